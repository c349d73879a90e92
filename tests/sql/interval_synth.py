"""Synthetic 1 kHz recordings in the lake layout, with split causes injected at known ticks.

Arrays are built with numpy across all ticks (no per-tick Python) and written through the
real `twinlake.catalog.publish_partition` as `frames.parquet` (canonical `FRAME_SCHEMA`)
plus `run.parquet` (`RUN_SCHEMA` plus the contract columns `recorded_gaps`, `fit_eligible`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake, connect, publish_partition
from twinlake.catalog.intervals import clean_intervals, stage_run_intervals

K_DEFAULT = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
D_DEFAULT = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)
GAP_TYPE = pa.list_(pa.struct([("seq_from", pa.int64()), ("seq_to", pa.int64())]))


@dataclass
class Recording:
    """Columns of one run as numpy arrays (one entry per tick), plus run-level facts."""

    cols: dict[str, np.ndarray]
    recorded_gaps: list[tuple[int, int]] = field(default_factory=list)
    fit_eligible: bool | None = None
    tick_period_s: float | None = None  # run.tick_period_s (ingest computes it; null: 1 ms)
    tick_counter: bool = False  # seq is the recorder's own tick count (source_format fr3_stack_csv)
    tick_grid: str | None = None  # run.tick_grid: "recorded" | "rebuilt" (from t_s) | null
    control_period_median_s: float | None = None  # run.control_period_median_s (ingest: median)

    @property
    def n(self) -> int:
        return len(self.cols["seq"])


def joint_recording(n: int, *, seq0: int = 0, controller: int = 2, reset_count: int = 1) -> Recording:
    """A clean joint-impedance run of `n` ticks at exactly 1 ms (first period 0)."""
    seq = np.arange(seq0, seq0 + n, dtype=np.int64)
    t = (seq - seq0) * 1e-3
    cols: dict[str, np.ndarray] = {"seq": seq, "t_s": t}
    for j in range(1, 8):
        q = 0.2 * np.sin(2 * np.pi * 0.5 * t + j)
        cols[f"q{j}"] = q
        cols[f"dq{j}"] = 0.2 * np.pi * np.cos(2 * np.pi * 0.5 * t + j)
        cols[f"tau_J{j}"] = np.cos(t + j)
        cols[f"tau_cmd{j}"] = np.sin(t + j)
        cols[f"q_target{j}"] = q + 0.01
        cols[f"q_target_filtered{j}"] = q + 0.005
        cols[f"K_joint{j}"] = np.full(n, K_DEFAULT[j - 1])
        cols[f"D_joint{j}"] = np.full(n, D_DEFAULT[j - 1])
    for s in ("px", "py", "pz", "qx", "qy", "qz", "qw"):
        cols[f"ee_{s}"] = np.full(n, 0.5 if s != "qw" else 1.0)
        cols[f"tgt_{s}"] = np.zeros(n)
    cols["controller"] = np.full(n, controller, dtype=np.int32)
    cols["schema_version"] = np.full(n, 2, dtype=np.int32)
    cols["joint_target_valid"] = np.full(n, 1 if controller == 2 else 0, dtype=np.int8)
    cols["filter_alpha"] = np.full(n, 0.05)
    cols["joint_use_friction"] = np.zeros(n, dtype=np.int8)
    cols["joint_reset_count"] = np.full(n, reset_count, dtype=np.int64)
    cols["robot_time_s"] = 100.0 + t
    period = np.full(n, 1e-3)
    period[0] = 0.0
    cols["control_period_s"] = period
    cols["stale"] = np.zeros(n, dtype=bool)
    return Recording(cols)


def frames_table(rec: Recording) -> pa.Table:
    """The canonical frames table of `rec` (columns it lacks are null)."""
    arrays = []
    for f in FRAME_SCHEMA:
        if f.name in rec.cols:
            arrays.append(pa.array(rec.cols[f.name], type=f.type))
        else:
            arrays.append(pa.nulls(rec.n, type=f.type))
    return pa.Table.from_arrays(arrays, schema=FRAME_SCHEMA)


def run_table(rec: Recording, contract_columns: bool = True) -> pa.Table:
    """A one-row run.parquet: canonical columns (mostly null here) plus, unless
    `contract_columns` is false, the contract columns `recorded_gaps` and `fit_eligible`."""
    seq = rec.cols["seq"]
    row = {f.name: pa.nulls(1, type=f.type) for f in RUN_SCHEMA}
    row["source_format"] = pa.array(["fr3_stack_csv" if rec.tick_counter else "synthetic"])
    row["frame_count"] = pa.array([rec.n], pa.int64())
    row["seq_first"] = pa.array([int(seq.min()) if rec.n else None], pa.int64())
    row["seq_last"] = pa.array([int(seq.max()) if rec.n else None], pa.int64())
    row["tick_period_s"] = pa.array([rec.tick_period_s], pa.float64())
    row["tick_grid"] = pa.array([rec.tick_grid], pa.string())
    row["control_period_median_s"] = pa.array([rec.control_period_median_s], pa.float64())
    table = pa.table(row, schema=RUN_SCHEMA)
    contract = ("recorded_gaps", "fit_eligible")
    if not contract_columns:  # an older run.parquet, written before these columns existed
        return table.drop_columns(list(contract))
    gaps = [{"seq_from": a, "seq_to": b} for a, b in rec.recorded_gaps]
    table = table.set_column(table.schema.get_field_index("recorded_gaps"),
                             pa.field("recorded_gaps", GAP_TYPE), pa.array([gaps], GAP_TYPE))
    return table.set_column(table.schema.get_field_index("fit_eligible"),
                            pa.field("fit_eligible", pa.bool_()),
                            pa.array([rec.fit_eligible], pa.bool_()))


def publish_run(lake: Path, robot: str, run: str, rec: Recording, *,
                contract_columns: bool = True) -> Path:
    """Write `rec` as the run partition `<lake>/runs/robot=<robot>/run=<run>/`."""
    lk = Lake(lake)

    def write(path: Path) -> None:  # as the ingest's write step does: the files, then their intervals
        pq.write_table(frames_table(rec), path / "frames.parquet")
        pq.write_table(run_table(rec, contract_columns), path / "run.parquet")
        stage_run_intervals(lk, path, robot, run)

    return publish_partition(lk, lk.run_relative(robot, run), write)


def set_idle(rec: Recording, start: int, stop: int) -> None:
    """Rows [start, stop) under idle (controller 0), as CSV v2 writes them: joint_target_valid
    0 and the joint columns 48-78 (targets, gains, alpha, friction, reset count) zero."""
    c = rec.cols
    c["controller"][start:stop] = 0
    c["joint_target_valid"][start:stop] = 0
    for j in range(1, 8):
        for prefix in ("q_target", "q_target_filtered", "K_joint", "D_joint"):
            c[f"{prefix}{j}"][start:stop] = 0.0
    c["filter_alpha"][start:stop] = 0.0
    c["joint_use_friction"][start:stop] = 0
    c["joint_reset_count"][start:stop] = 0


def cartesian_recording(n: int, *, seq0: int = 0) -> Recording:
    """A FrankaTwin-style 1 kHz ring log: controller 1, no joint columns (null), Cartesian
    targets finite, periods around 1 ms."""
    rec = joint_recording(n, seq0=seq0, controller=1)
    for j in range(1, 8):
        for prefix in ("q_target", "q_target_filtered", "K_joint", "D_joint"):
            del rec.cols[f"{prefix}{j}"]
    for name in ("filter_alpha", "joint_use_friction", "joint_reset_count", "joint_target_valid",
                 "schema_version", "robot_time_s"):
        del rec.cols[name]
    for k, s in enumerate(("px", "py", "pz", "qx", "qy", "qz", "qw")):
        rec.cols[f"tgt_{s}"] = np.full(n, 0.1 * k)
    rec.cols["control_period_s"][1:] = 1e-3 + 2e-5 * np.sin(np.arange(1, n))
    return rec


def drop_ticks(rec: Recording, start: int, count: int) -> None:
    """Remove `count` rows starting at row `start` (a seq jump; t_s keeps its tick time)."""
    keep = np.ones(rec.n, dtype=bool)
    keep[start : start + count] = False
    rec.cols = {k: v[keep] for k, v in rec.cols.items()}


class LakeBuilder:
    """Publish runs into one lake, then query intervals through `connect` (real DuckDB)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, rec: Recording, run: str = "r1", robot: str = "fr3") -> None:
        publish_run(self.root, robot, run, rec)

    def intervals(self, **kwargs) -> list[dict]:
        con = connect(self.root)
        try:
            return clean_intervals(con, **kwargs).to_pylist()
        finally:
            con.close()
