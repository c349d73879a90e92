"""FrankaTwin result files: recognised by content, never ingested as runs.

`sysid_best_params.json` (a system identification result: `best_score` and
`best_params_decoded`) becomes a fit and `metrics.json` (sim-vs-real metrics: `real_csv`,
`sim_csv`, `ee`) a validation; the import is the fit folder's
(`twinlake.fit.records.frankatwin_import`, command `twinlake import frankatwin`), which ingest does
not import. Here the one content rule, `result_kind`, which the importer uses too, and the
reader `ResultFileHint`: it never matches, but tells a user who passes such a file to
`twinlake ingest` where it belongs. `ingest_paths` hands each directory to the result
importer it is given.
"""

from __future__ import annotations

from pathlib import Path

from ..source_io import try_json
from ..registry import Detection, IngestError, ReadOptions, register


def result_kind(path: Path) -> tuple[str | None, str]:
    """'fit' for a sysid_best_params.json body, 'validation' for a metrics.json body, with
    the reason (from content: keys present), else (None, why not)."""
    body = try_json(path) if path.is_file() and path.suffix == ".json" else None
    if not isinstance(body, dict):
        return None, "not a JSON object"
    if isinstance(body.get("best_params_decoded"), dict) and "best_score" in body:
        return "fit", "has best_score + best_params_decoded (FrankaTwin sysid_best_params.json)"
    if body.get("schema_version") == 1 and {"real_csv", "sim_csv", "ee"} <= body.keys():
        return "validation", "has real_csv, sim_csv, ee (FrankaTwin metrics.json)"
    return None, "neither sysid_best_params.json (best_params_decoded) nor metrics.json keys"


class ResultFileHint:
    """Never matches: FrankaTwin result files are not runs. Its `detect` reason tells a user
    who passes one to `twinlake ingest` to use `twinlake import frankatwin` instead."""

    name = "frankatwin_result"

    def detect(self, path: Path) -> Detection:
        kind, why = result_kind(path) if path.is_file() else (None, "not a file")
        if kind is None:
            return Detection.no(why)
        return Detection.no(f"a FrankaTwin {'fit' if kind == 'fit' else 'metrics'} result "
                            "file, not a run: use `twinlake import frankatwin`")

    def read(self, path: Path, options: ReadOptions):
        raise IngestError(path, "not a run: use `twinlake import frankatwin`")


register(ResultFileHint())
