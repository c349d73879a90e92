"""Registry readers for FrankaTwin's CSV sources (FrankaTwin's data-format docs).

- `frankatwin_log50`: 50 Hz Cartesian log `<run>.csv` (47 columns) + sidecar `<run>.json`.
- `frankatwin_ring_1khz`: `<stem>.csv` (49 columns) + `<stem>_targets.csv` + `<stem>.json`.
- `frankatwin_target_csv`: generated reference `<name>.csv` (11 columns) + sidecar.
- `frankatwin_sim_csv`: sim replay `<name>.csv` (44 columns) + sidecar (`schema_version` 1).

Detection is by the header line (exact column list); companions are found next to the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from . import csv_logs as ftcsv
from . import sidecar as side
from ..canonical import conform_frames
from ..source_io import (SOURCE_FIELDS_TABLE, describe_mismatch, load_json,
                                           read_header, source_fields_table)
from .ring import check_ring
from ..registry import (Detection, IngestError, IngestUnit, RawFile, ReadOptions,
                                      register)

LAYOUT_NAMES = {"log50": "47-column FrankaTwin 50 Hz log", "ring": "49-column FrankaTwin 1 kHz "
                "ring log", "targets": "FrankaTwin ring-log targets file", "target":
                "FrankaTwin target CSV", "sim": "FrankaTwin sim replay CSV"}


def _detect(path: Path, layout: str) -> Detection:
    if not path.is_file():
        return Detection.no("not a file")
    header = read_header(path)
    found = ftcsv.layout_of(header)
    if found == layout:
        return Detection(True, f"header is the {LAYOUT_NAMES[layout]}")
    if found is not None:
        return Detection.no(f"header is the {LAYOUT_NAMES[found]}")
    expected = {"log50": ftcsv.LOG_COLUMNS, "ring": ftcsv.RING_COLUMNS,
                "target": ftcsv.TARGET_CSV_COLUMNS, "sim": ftcsv.SIM_COLUMNS}[layout]
    return Detection.no(f"header {describe_mismatch(header, expected)}")


def _sidecar(path: Path, required: bool) -> tuple[Path | None, dict | None]:
    side_path, body = side.find_sidecar(path)
    present = [c for c in side.sidecar_candidates(path) if c.is_file()]
    if body is None and present:
        found = load_json(present[0])  # raises the JSON error, naming file and line
        raise IngestError(present[0], f"not a FrankaTwin sidecar (a JSON object with "
                          f"schema_version expected, got {type(found).__name__})",
                          field="schema_version")
    if body is None and required:
        names = " or ".join(p.name for p in side.sidecar_candidates(path))
        raise IngestError(path, f"sidecar {names} is missing (it holds the applied gains, "
                          "q_init and anchors)", kind="missing")
    return side_path, body


def _unit(path: Path, options: ReadOptions, frames: pa.Table, raw: list[RawFile],
          fields: dict[str, Any], **kw: Any) -> IngestUnit:
    fields.setdefault("robot_id", None)
    extra = {**kw.pop("extra_tables", {}), SOURCE_FIELDS_TABLE: source_fields_table(fields)}
    return IngestUnit(robot=options.robot, run=options.run or path.stem,
                      frames=conform_frames(frames), raw_files=raw, run_fields=fields,
                      extra_tables=extra, **kw)


def _completeness(fields: dict[str, Any], rows: int, flags: list[str], notes: list[str]) -> None:
    planned = fields.get("num_samples_planned")
    fields["complete"] = None
    if isinstance(planned, int):
        fields["complete"] = rows >= planned and not fields.get("aborted")
        if rows != planned:
            flags.append("row_count_mismatch")
            notes.append(f"{rows} rows but the sidecar planned num_samples = {planned}")
    if fields.get("aborted"):
        flags.append("aborted")
        notes.append(f"aborted: {fields.get('abort_name')} at {fields.get('abort_time_s')} s")


class Log50Reader:
    """FrankaTwin 50 Hz real log + sidecar (schema 2)."""

    name = "frankatwin_log50"

    def detect(self, path: Path) -> Detection:
        return _detect(path, "log50")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        side_path, body = _sidecar(path, required=True)
        fields = side.real_run_fields(side_path, body)
        frames = ftcsv.read_log50(path)
        flags: list[str] = ["state_staleness_0_10ms"]
        notes = ["each 50 Hz row's state is 0-10 ms older than its nominal t_s"]
        failure = side.ring_log_failure(body)
        if failure is not None:  # the 50 Hz log is fine; the run's 1 kHz log is missing
            flags.append("ring_log_not_saved")
            notes.append(f"the run's 1 kHz ring log was not saved ({failure[1]}): "
                         f"{side.LOG_SAVE_REMEDY}")
        _completeness(fields, frames.num_rows, flags, notes)
        fields.update(source_format=self.name, fit_eligible=False, controller=1,
                      state_staleness_ms_max=side.STALENESS_50HZ_MS, source_kind="real",
                      metadata_json=fields["sidecar_json"])
        raw = [RawFile(path, "recording"), RawFile(side_path, "sidecar")]
        return _unit(path, options, frames, raw, fields, flags=flags, reasons=notes)


class RingReader:
    """FrankaTwin 1 kHz ring log: merged CSV + targets CSV + sidecar (schema 2)."""

    name = "frankatwin_ring_1khz"

    def detect(self, path: Path) -> Detection:
        return _detect(path, "ring")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        targets_path = path.with_name(path.stem + "_targets.csv")
        if not targets_path.is_file():
            raise IngestError(path, f"targets file {targets_path.name} is missing",
                              kind="missing")
        side_path, body = _sidecar(path, required=True)
        fields = side.real_run_fields(side_path, body)
        frames = ftcsv.read_ring(path)
        if frames.num_rows == 0:
            raise IngestError(path, "no frames (header only): nothing was drained", kind="empty")
        targets = ftcsv.read_targets(targets_path)
        check = check_ring(frames, targets, body.get("ring_log"))
        if check.reasons:
            raise IngestError(path, "rejected: " + "; ".join(check.reasons), kind="rejected")
        flags, notes = list(check.flags), list(check.notes)
        # the sidecar's num_samples counts 50 Hz setpoints, not ticks: completion = no abort
        fields["complete"] = None if fields.get("aborted") is None else not fields["aborted"]
        if fields.get("aborted"):
            flags.append("aborted")
            notes.append(f"aborted: {fields.get('abort_name')} at {fields.get('abort_time_s')} s")
        fields.update(check.fields, source_format=self.name, fit_eligible=True, controller=1,
                      state_staleness_ms_max=None, source_kind="real",
                      metadata_json=fields["sidecar_json"])
        raw = [RawFile(path, "recording"), RawFile(targets_path, "targets"),
               RawFile(side_path, "sidecar")]
        return _unit(path, options, frames, raw, fields, targets=targets, flags=flags,
                     reasons=notes)


class TargetCsvReader:
    """FrankaTwin generated reference (`gen_*_traj.py`): no measurements, only `tgt_*`."""

    name = "frankatwin_target_csv"

    def detect(self, path: Path) -> Detection:
        return _detect(path, "target")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        side_path, body = _sidecar(path, required=False)
        frames = ftcsv.read_target_csv(path, body.get("schema_version") if body else None)
        flags = [] if body else ["no_sidecar"]
        fields = side.target_run_fields(side_path, body) if body else {}
        fields.update(source_format=self.name, fit_eligible=False, source_kind="target",
                      controller=1, metadata_json=fields.get("sidecar_json"))
        raw = [RawFile(path, "recording")] + ([RawFile(side_path, "sidecar")] if body else [])
        return _unit(path, options, frames, raw, fields, flags=flags)


class SimCsvReader:
    """FrankaTwin sim replay CSV + sidecar (schema 1): a run whose source is a simulator."""

    name = "frankatwin_sim_csv"

    def detect(self, path: Path) -> Detection:
        return _detect(path, "sim")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        side_path, body = _sidecar(path, required=False)
        version = body.get("schema_version") if body else None
        frames = ftcsv.read_sim(path, version if isinstance(version, int) else None)
        flags = [] if body else ["no_sidecar"]
        fields = side.sim_run_fields(side_path, body) if body else {}
        fields.update(source_format=self.name, fit_eligible=False, source_kind="sim",
                      controller=1, metadata_json=fields.get("sidecar_json"))
        raw = [RawFile(path, "recording")] + ([RawFile(side_path, "sidecar")] if body else [])
        return _unit(path, options, frames, raw, fields, flags=flags)


class SidecarAloneReader:
    """A FrankaTwin sidecar JSON with no recording beside it. Never ingested (it holds no
    frames) and never skipped silently: reading it refuses with the reason, e.g. the 1 kHz
    fetch failed (`ring_log.save_error`, null paths) and how to recover the log."""

    name = "frankatwin_sidecar"

    def detect(self, path: Path) -> Detection:
        if not path.is_file():
            return Detection.no("not a file")
        if side.sidecar_alone(path) is None:
            return Detection.no("not a FrankaTwin sidecar JSON (schema_version, controller, "
                                "csv_path)")
        owner = next((c for c in side.owner_csvs(path) if c.is_file()), None)
        if owner is not None:
            return Detection.no(f"the sidecar of {owner.name}, read with that file")
        return Detection(True, "FrankaTwin sidecar JSON without its recording beside it")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        body = load_json(path)
        failure = side.ring_log_failure(body)
        if failure is not None:
            field, what = failure
            raise IngestError(path, f"the run's 1 kHz ring log was not saved ({what}), so "
                              f"there are no frames to ingest: {side.LOG_SAVE_REMEDY}",
                              field=field, kind="fetch_failed")
        names = " or ".join(c.name for c in side.owner_csvs(path))
        raise IngestError(path, f"FrankaTwin sidecar without its recording: {names} is not "
                          f"beside it (csv_path {body.get('csv_path')!r}); put the CSV next "
                          "to this file and ingest the CSV", kind="missing")


for _reader in (Log50Reader(), RingReader(), TargetCsvReader(), SimCsvReader(),
                SidecarAloneReader()):
    register(_reader)
