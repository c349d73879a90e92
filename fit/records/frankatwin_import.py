"""FrankaTwin result files → a fit and a validation in the lake, through the same records and
the same writers as twinlake's own (`FitRecord` / `publish_fit`, `ValidationRecord` /
`publish_validation_record`).

- `sysid_best_params.json` (FrankaTwin's system identification result) → fit `ft-<sha16>`:
  `fit.parquet` (`fit_source = 'frankatwin_import'`, the parameters named as
  `twinlake.sim.PARAM_NAMES`, read through `twinlake.sim.LAYOUT`), `history.parquet` (one row
  per iteration), `runs.parquet` (one row per source trajectory, linked to the lake run of
  its CSV stem), `profile.json`, and the file itself under `raw/`.
- `metrics.json` (FrankaTwin's sim-vs-real metrics) → validation `ftm-<sha16>`:
  `validation.parquet` and the `metrics.json` bytes. It links to the real run it compares
  (`run`, when a run of that CSV stem is in the lake) and to the imported fit (`fit`, when
  its `sysid_params` file is found and hashed).

Ids derive from the file's SHA-256, so importing the same bytes again is a no-op that says so.
Which files are results is decided by content, by the one rule of the ingest folder, which owns
the source formats (`twinlake.ingest.frankatwin.results.result_kind`: keys present, never the
name; `twinlake ingest` uses it to tell a user where such a file belongs). A broken file raises
`ResultFileError` naming the file, line and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from ...catalog import Lake, PartitionExists, SelectionError, connect, resolve_run, sha256_file
from ...ingest.frankatwin.results import result_kind
from .record import FitRecord, IntervalUse, publish_fit
from .validation_record import VALIDATION_COLUMNS, ValidationRecord, publish_validation_record

FIT_SOURCE = "frankatwin_import"
HISTORY_FLOATS = ("min", "mean", "best", "iter_s", "ms_per_tick", "eta_s")
VALIDATION_SCHEMA = pa.schema([
    *VALIDATION_COLUMNS, ("real_csv", pa.string()), ("sim_csv", pa.string()), ("sim_run", pa.string()),
    ("sysid_params", pa.string()), ("source_sha256", pa.string())])
"""validation.parquet of an import: the common columns, then FrankaTwin's file references."""


class ResultFileError(ValueError):
    """A result file that cannot be imported. `str()` is one line naming the file, line and
    field (the form of ingest's errors)."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field, self.message = Path(path), line, field, message
        where = Path(path).name + (f":{line}" if line is not None else "")
        super().__init__(f"{where}:{f' field {field!r}:' if field else ''} {message}")


def load_json(path: Path) -> Any:
    """Parse a JSON file; ResultFileError naming the line of a syntax error."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None
    except UnicodeDecodeError:
        raise ResultFileError(path, "not UTF-8 text") from None


def result_files(paths: list[Path]) -> list[Path]:
    """The FrankaTwin result files among `paths` (directories searched recursively), fits
    first, then validations, each sorted by path."""
    found: list[tuple[int, Path]] = []
    for path in map(Path, paths):
        for cand in sorted(path.rglob("*.json")) if path.is_dir() else [path]:
            kind = result_kind(cand)[0]
            if kind is not None:
                found.append((0 if kind == "fit" else 1, cand))
    return [p for _, p in sorted(found)]


@dataclass(frozen=True)
class ImportResult:
    """What an import did: `kind` ('fit' | 'validation'), partition id and path, whether it
    already existed (`existed`, a no-op), and the links it made."""

    kind: str
    partition_id: str
    path: Path
    existed: bool
    links: dict[str, Any]


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _utc_mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat()


def decoded_values(path: Path, dec: dict) -> dict[str, float]:
    """The parameters of a `best_params_decoded` block by name (`twinlake.sim.LAYOUT`: names,
    order, FrankaTwin's keys; `dynamic_ratio` derived from `mu_dynamic` when only that is
    given; the delay's whole ticks as written). ResultFileError naming the field otherwise.
    (Stricter than `twinlake.sim.load_params`, which takes `int("2")` for the delay.)"""
    from ...sim import LAYOUT

    values: list[float] = []
    for group in LAYOUT.groups:
        field = f"best_params_decoded.{group.frankatwin_key}"
        try:
            vec = LAYOUT.block_value(dec, group.name, frankatwin=True)
        except ValueError as exc:
            raise ResultFileError(path, str(exc), field=field) from None
        if not group.per_joint:
            kind = "an integer" if group.integer else "a number"
            if not isinstance(vec, (int, float)):
                raise ResultFileError(path, f"expected {kind}, got {vec!r}", field=field)
            values.append(float(int(vec)) if group.integer else float(vec))  # whole 1 ms ticks
        elif not isinstance(vec, list) or len(vec) != group.size:
            raise ResultFileError(path, f"expected a list of {group.size} numbers, got {vec!r:.60}", field=field)
        else:
            values += [float(v) for v in vec]
    return dict(zip(LAYOUT.names, values))


def history_rows(body: dict) -> list[dict[str, Any]]:
    """FrankaTwin's per-iteration entries as `FitRecord.history` rows (non-numbers → null)."""
    rows = []
    for h in body.get("history") or []:
        if not isinstance(h, dict):
            continue
        row: dict[str, Any] = {"iter": h.get("iter") if isinstance(h.get("iter"), int) else None}
        row.update({key: _f(h.get(key)) for key in HISTORY_FLOATS})
        for key in ("per_traj_min", "best_candidate_weighted"):
            row[key] = [_f(v) for v in h.get(key) or []]
        rows.append(row)
    return rows


class _RunLinks:
    """Lake runs named after a CSV's stem (when exactly one robot has one), on one catalog
    connection."""

    def __init__(self, lake: Lake) -> None:
        self.con = connect(lake)

    def find(self, csv: Any, robot: str | None) -> dict[str, Any] | None:
        stem = Path(str(csv or "")).stem
        try:
            return resolve_run(self.con, stem, robot) if stem else None
        except SelectionError:
            return None

    def close(self) -> None:
        self.con.close()


def trajectory_uses(links: _RunLinks, body: dict, robot: str | None) -> list[IntervalUse]:
    """One `IntervalUse` (role train, no interval) per source trajectory of the fit."""
    uses = []
    for traj in ((body.get("source") or {}).get("trajectories")) or []:
        found = links.find(traj.get("real_csv"), robot)
        stem = Path(str(traj.get("real_csv") or "")).stem
        num = traj.get("num_samples")
        uses.append(IntervalUse(
            robot=found["robot"] if found else robot, run=found["run"] if found else stem,
            interval_index=None, seq_first=None, seq_last=None, role="train", weight=_f(traj.get("weight")),
            run_sha256=found.get("raw_sha256") if found else None, real_csv=traj.get("real_csv"),
            num_samples=num if isinstance(num, int) and not isinstance(num, bool) else None,
            linked=found is not None))
    return uses


def fit_record(lake: Lake, path: Path, body: dict, robot: str | None) -> tuple[FitRecord, np.ndarray]:
    """The FitRecord of a sysid_best_params.json body, and its parameter vector as written
    (the delay unclamped) for fit.parquet. ResultFileError on bad fields."""
    from ...sim import DynamicsParams

    dec = body.get("best_params_decoded")
    score = body.get("best_score")
    if not isinstance(score, (int, float)):
        raise ResultFileError(path, f"expected a number, got {score!r}", field="best_score")
    vector = np.array(list(decoded_values(path, dec).values()), dtype=np.float64)
    try:
        params = DynamicsParams.from_vector(vector)
    except ValueError as exc:
        raise ResultFileError(path, str(exc), field="best_params_decoded") from None
    args = body.get("args") if isinstance(body.get("args"), dict) else {}
    sha = sha256_file(path)
    links = _RunLinks(lake)
    try:
        uses = trajectory_uses(links, body, robot)
    finally:
        links.close()
    rec = FitRecord(
        fit_id="ft-" + sha[:16], fit_source=FIT_SOURCE, created_utc=_utc_mtime(path), status="imported",
        best_loss=float(score), params=params, seed=args.get("seed") if isinstance(args.get("seed"), int) else None,
        settings={"args": args, "bounds": body.get("bounds"), "source": body.get("source")},
        history=history_rows(body), runs=uses,
        extra={"best_params_raw": [float(v) for v in body.get("best_params_raw") or []] or None,
               "source_file": path.name, "source_sha256": sha})
    return rec, vector


def _published(kind: str, pid: str, publish, links: dict[str, Any]) -> ImportResult:
    try:
        return ImportResult(kind, pid, publish(), False, links)
    except PartitionExists as exc:
        return ImportResult(kind, pid, exc.path, True, links)


def import_fit(lake: Lake, path: Path, robot: str | None = None, *,
               replace: bool = False) -> ImportResult:
    """Publish a FrankaTwin `sysid_best_params.json` as fit `ft-<sha16>`."""
    body = load_json(path)
    if result_kind(path)[0] != "fit":
        raise ResultFileError(path, "not a sysid_best_params.json (no best_params_decoded)")
    rec, vector = fit_record(lake, path, body, robot)
    return _published("fit", rec.fit_id, lambda: publish_fit(lake, rec, replace=replace, param_vector=vector,
                                                             raw_files=[path]),
                      {"runs": [u.run for u in rec.runs]})


def _fit_of(path: Path, params_ref: Any) -> str | None:
    """The id an imported `sysid_params` file has (found as given, beside `path`, or by name)."""
    if not isinstance(params_ref, str):
        return None
    for cand in (Path(params_ref), path.parent / params_ref, path.parent / Path(params_ref).name):
        if cand.is_file():
            return "ft-" + sha256_file(cand)[:16]
    return None


def validation_row(lake: Lake, path: Path, body: dict, robot: str | None) -> dict[str, Any]:
    """`validation.parquet` row (VALIDATION_SCHEMA) from a metrics.json body, with its run
    and fit links."""
    ee = body.get("ee") or {}
    joints = body.get("joints") or {}
    links = _RunLinks(lake)
    try:
        real = links.find(body.get("real_csv"), robot)
        v_robot = real["robot"] if real else robot
        sim = links.find(body.get("sim_csv"), v_robot)
    finally:
        links.close()
    return {
        "validation_source": FIT_SOURCE, "created_utc": body.get("created_utc"),
        "robot": v_robot, "run": real["run"] if real else None, "fit": _fit_of(path, body.get("sysid_params")),
        "sim_label": Path(str(body.get("sim_csv") or "")).name or None,
        "num_samples": body.get("num_samples"), "duration_s": _f(body.get("duration_s")),
        "ee_pos_rmse_3d_m": _f(((ee.get("pos") or {}).get("rmse_m") or {}).get("3d")),
        "ee_ori_rmse_rad": _f((ee.get("ori") or {}).get("rmse_rad")),
        "q_rmse_all_rad": _f(joints.get("pos_rmse_all_rad")),
        "dq_rmse_all_rad_s": _f(joints.get("vel_rmse_all_rad_s")),
        "q_rmse_rad": [_f(v) for v in joints.get("pos_rmse_rad") or []] or None,
        "verdict": None, "thresholds_json": None,
        "metrics_json": json.dumps(body, indent=2),
        "real_csv": body.get("real_csv"), "sim_csv": body.get("sim_csv"), "sim_run": sim["run"] if sim else None,
        "sysid_params": body.get("sysid_params"), "source_sha256": sha256_file(path),
    }


def import_validation(lake: Lake, path: Path, robot: str | None = None, *,
                      replace: bool = False) -> ImportResult:
    """Publish a FrankaTwin `metrics.json` as validation `ftm-<sha16>`."""
    body = load_json(path)
    if result_kind(path)[0] != "validation":
        raise ResultFileError(path, "not a FrankaTwin metrics.json (real_csv, sim_csv, ee expected)")
    row = validation_row(lake, path, body, robot)
    rec = ValidationRecord("ftm-" + row["source_sha256"][:16],
                           pa.Table.from_pylist([row], schema=VALIDATION_SCHEMA), path.read_bytes())
    return _published("validation", rec.validation_id,
                      lambda: publish_validation_record(lake, rec, replace=replace),
                      {"run": row["run"], "fit": row["fit"], "robot": row["robot"], "sim_run": row["sim_run"]})


def import_result(lake: Lake, path: Path, robot: str | None = None, *,
                  replace: bool = False) -> ImportResult:
    """Import a FrankaTwin result file by its content (fit or validation)."""
    kind, why = result_kind(path)
    if kind == "fit":
        return import_fit(lake, path, robot, replace=replace)
    if kind == "validation":
        return import_validation(lake, path, robot, replace=replace)
    raise ResultFileError(path, f"not a FrankaTwin result file: {why}")


def import_results(lake: Lake, paths: list[Path], robot: str | None = None, *,
                   replace: bool = False) -> Iterator[dict[str, Any]]:
    """Import every result file among `paths` (directories searched recursively; fits first,
    then validations, so a validation links to its fit). Yields one dict per file: `ok`,
    `path`, `message`, and on success `kind`, `id`, `partition`, `existed`, `links`. A path
    that is a file but not a result file yields an error naming why."""
    files = result_files(paths)
    for path in map(Path, paths):
        if path.is_file() and path not in files:
            yield {"ok": False, "path": str(path), "message": f"error: {path.name}: "
                   f"not a FrankaTwin result file ({result_kind(path)[1]})"}
    for path in files:
        try:
            res = import_result(lake, path, robot, replace=replace)
        except ResultFileError as err:
            yield {"ok": False, "path": str(path), "message": f"error: {err}"}
            continue
        verb = "already imported" if res.existed else "imported"
        yield {"ok": True, "path": str(path), "kind": res.kind, "id": res.partition_id,
               "partition": str(res.path), "existed": res.existed, "links": res.links,
               "message": f"{path.name}: {verb} {res.kind} {res.partition_id} {res.links}"}


__all__ = ["FIT_SOURCE", "ImportResult", "ResultFileError", "decoded_values", "fit_record", "import_fit",
           "import_result", "import_results", "import_validation", "load_json", "result_files", "result_kind",
           "validation_row"]
