"""Export one lake run (or one clean interval of it) as a `joint_sysid_recording/v1` bundle.

The portable bundle fr3_stack planned: `metadata.json`, `samples.csv`
(one row per 1 kHz tick, SI units, 1-based joint names; contract in `bundle_validate.py` and
docs/formats.md) and `report.md`. A run that is gapped, aborted, incomplete, not joint
impedance, not fit-eligible or not one controller configuration is refused with every reason,
unless `interval` selects a clean interval of the `intervals` SQL (then only that slice is
checked and exported). The run, its clean intervals and its frames are read through the
catalog (`twinlake.catalog.selection`). Output bytes depend only on the lake content (no wall-clock time).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...catalog import (Lake, SelectionError, connect, pick_interval, resolve_run,
                              run_frames, run_intervals)
from .bundle_validate import (CONSTANT_COLUMNS, COLUMNS, NULLABLE,
                                             validate_bundle)

JOINT_IMPEDANCE = 2
FRICTION_MODEL = {"form": "fp1*tanh(fp2*dq) + fp3*dq", "fp1_nm": [0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.2],
                  "fp2_s_per_rad": 50.0, "fp3_nm_s_per_rad": 0.05,
                  "source": "fr3_stack daemon defaults (its joint impedance controller)"}


class ExportRefused(Exception):
    """The run cannot be exported as asked; `reasons` lists every problem found."""

    def __init__(self, what: str, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(f"{what}: refused: " + "; ".join(reasons))


@dataclass
class Selection:
    """What is exported: the whole run, or one interval (`index`, seq range, reasons)."""

    kind: str
    seq_first: int
    seq_last: int
    index: int | None = None
    start_reason: str | None = None
    end_reason: str | None = None
    waived: list[str] = field(default_factory=list)


def find_run(lake: Lake, run: str, robot: str | None = None) -> tuple[str, str]:
    """(robot, run) for `run` (or `robot/run`); `ExportRefused` if absent or ambiguous."""
    con = connect(lake)
    try:
        row = resolve_run(con, run, robot)
    except SelectionError as exc:
        raise ExportRefused(run, [str(exc)]) from None
    finally:
        con.close()
    return row["robot"], row["run"]


def frame_problems(frames: pa.Table) -> list[str]:
    """Why these frames are not one clean joint-impedance stretch (empty: clean)."""
    out: list[str] = []
    if frames.num_rows == 0:
        return ["no frames"]
    ctrl = pc.unique(frames["controller"]).to_pylist()
    if ctrl != [JOINT_IMPEDANCE]:
        out.append(f"not joint impedance throughout (controllers {sorted(map(str, ctrl))})")
    if pc.min(frames["joint_target_valid"]).as_py() != 1 or frames["joint_target_valid"].null_count:
        out.append("joint_target_valid is not 1 on every tick")
    seq = frames["seq"].to_numpy()
    jumps = np.flatnonzero(np.diff(seq) != 1)
    if jumps.size:
        out.append(f"gapped: {jumps.size} seq jump(s), first after seq {int(seq[jumps[0]])}")
    changing = [c for c in CONSTANT_COLUMNS[:-2] if pc.count_distinct(frames[c]).as_py() > 1]
    if changing:
        out.append(f"controller configuration changes ({', '.join(changing[:4])}...)")
    required = [n for n, _, _, _ in COLUMNS if n not in NULLABLE]
    bad = [n for n in required if frames[n].null_count or (
        pa.types.is_floating(frames[n].type) and not pc.all(pc.is_finite(frames[n])).as_py())]
    if bad:
        out.append(f"missing or non-finite values in {bad[:4]}")
    return out


def run_problems(run_row: dict[str, Any]) -> list[str]:
    """Run-level refusals from run.parquet: aborted, incomplete, recorded gaps, not fit data."""
    out = []
    if run_row.get("aborted"):
        out.append("aborted")
    if run_row.get("complete") is False or run_row.get("verdict") == "partial":
        out.append("incomplete (the recording did not complete)")
    if run_row.get("recorded_gaps"):
        out.append(f"gapped: {len(run_row['recorded_gaps'])} recorded lost range(s)")
    if run_row.get("fit_eligible") is False:
        out.append("not fit-eligible (diagnostics / not 1 kHz robot data)")
    if (run_row.get("dropped") or 0) > 0:
        out.append(f"gapped: {run_row['dropped']} dropped tick(s)")
    return out


def select(lake: Lake, robot: str, run: str, interval: int | None) -> tuple[pa.Table, dict, Selection]:
    """Frames, run row and selection to export, or `ExportRefused` with every reason."""
    what = f"{robot}/{run}"
    con = connect(lake)
    try:
        try:
            run_row = resolve_run(con, run, robot)
            chosen = None if interval is None else pick_interval(
                run_intervals(con, robot, run), interval, robot, run)
        except SelectionError as exc:
            raise ExportRefused(what, [str(exc)]) from None
        first, last = (None, None) if chosen is None else (chosen["seq_first"], chosen["seq_last"])
        frames = run_frames(con, robot, run, first, last)
    finally:
        con.close()
    if chosen is None:
        reasons = run_problems(run_row) + frame_problems(frames)
        if reasons:
            raise ExportRefused(what, reasons + ["(choose a clean interval with --interval I; "
                                                 "see `twinlake intervals`)"])
        seq = frames["seq"]
        return frames, run_row, Selection("run", pc.min(seq).as_py(), pc.max(seq).as_py())
    sel = Selection("interval", int(chosen["seq_first"]), int(chosen["seq_last"]), interval,
                    chosen["start_reason"], chosen["end_reason"], run_problems(run_row))
    reasons = frame_problems(frames)
    if reasons:
        raise ExportRefused(f"{what} interval {interval}", reasons)
    return frames, run_row, sel


def samples_csv(frames: pa.Table) -> bytes:
    """samples.csv bytes: header then rows; floats in shortest round-trip decimal, ints as
    integers, null as an empty cell (Arrow's writer, no per-row Python)."""
    cols = []
    for name, _, dtype, _ in COLUMNS:
        cols.append(frames[name].cast(pa.int64() if dtype == "int64" else pa.float64()))
    table = pa.Table.from_arrays(cols, names=[c[0] for c in COLUMNS])
    buf = io.BytesIO()
    buf.write((",".join(table.column_names) + "\n").encode())
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return buf.getvalue()


def _checks(frames: pa.Table, run_row: dict, sel: Selection) -> list[dict[str, Any]]:
    """The pre-export checks that passed (a failure refuses before this point)."""
    seq = frames["seq"].to_numpy()
    return [
        {"name": "joint impedance on every tick, joint_target_valid = 1", "passed": True,
         "detail": f"{frames.num_rows} ticks"},
        {"name": "seq contiguous (no gaps, nothing interpolated)", "passed": True,
         "detail": f"{int(seq[0])}..{int(seq[-1])}"},
        {"name": "one controller configuration (K, D, alpha, friction flag constant)",
         "passed": True, "detail": ""},
        {"name": "required values present and finite", "passed": True, "detail": ""},
        {"name": "run not aborted / complete / no recorded gaps in the selection", "passed": True,
         "detail": "whole run" if sel.kind == "run" else
         f"interval {sel.index}; run-level problems: {sel.waived or 'none'}"},
        {"name": "completion confirmed by a recording status", "passed":
         bool(run_row.get("completion_confirmed")),
         "detail": "informational: a recording without a status file cannot confirm completion"},
    ]


def export_bundle(lake: Lake, run: str, out: Path, *, robot: str | None = None,
                  interval: int | None = None) -> tuple[Path, list[str]]:
    """Write the bundle to `out` (a new or empty directory) and validate it. Returns the
    directory and the validator's lines. Raises `ExportRefused` with every reason."""
    robot, run = find_run(lake, run, robot)
    frames, run_row, sel = select(lake, robot, run, interval)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ExportRefused(str(out), ["output directory exists and is not empty"])
    out.mkdir(parents=True, exist_ok=True)
    data = samples_csv(frames)
    (out / "samples.csv").write_bytes(data)
    from .metadata import build_metadata, report_md

    meta = build_metadata(frames, run_row, robot, run, sel, hashlib.sha256(data).hexdigest(),
                          _checks(frames, run_row, sel), FRICTION_MODEL)
    (out / "metadata.json").write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
    (out / "report.md").write_text(report_md(meta, ["(pending)"]))
    rep = validate_bundle(out)
    (out / "report.md").write_text(report_md(meta, rep.lines()))
    if not rep.ok:
        raise ExportRefused(str(out), [line for line in rep.lines() if line.startswith("FAIL")])
    return out, rep.lines()
