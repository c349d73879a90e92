"""Which recorded data a fit sees: `RUN[:INTERVAL]` selectors resolved against the lake's
clean intervals, the frames of each interval read back, and the replay inputs built from them.

Selector syntax (`--train`, `--holdout`): `RUN`, `ROBOT/RUN`, `RUN:INTERVAL` or
`ROBOT/RUN:INTERVAL`, where INTERVAL is the `interval_index` of the clean-interval query
(`twinlake intervals`); without it every clean interval of the run of at least
`min_duration_s` is used. The rules are the catalog's (`twinlake.catalog.selection`); this
module adds the fit's defaults (intervals of at least 0.5 s, a cap on the seconds read).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ...catalog import IntervalRef, Lake, connect, resolve_intervals, run_frames

def resolve(
    lake: Lake | str | Path, selectors: list[str], *, min_duration_s: float = 0.5
) -> list[IntervalRef]:
    """The clean intervals named by `selectors`, in the given order (duplicates removed)."""
    con = connect(lake)
    try:
        refs = resolve_intervals(con, selectors, min_duration_s=min_duration_s)
        for ref in {(r.robot, r.run): r for r in reversed(refs)}.values():  # each run's first
            refuse_unreplayable(con, ref)
        return refs
    finally:
        con.close()


def refuse_unreplayable(con, ref: IntervalRef) -> None:
    """ValueError (one line naming the run and what is missing) when the interval's first tick
    has no joint-impedance controller, joint targets or gains: valid data (a mapped log
    without [run] constants) that a replay cannot drive."""
    row = run_frames(con, ref.robot, ref.run, ref.seq_first, ref.seq_first).select(
        ["controller", "q_target1", "K_joint1", "D_joint1"]).to_pylist()
    tick = row[0] if row else {}
    missing = [what for what, ok in (
        ("controller (joint impedance, 2)", tick.get("controller") == 2),
        ("joint targets (q_target)", tick.get("q_target1") is not None),
        ("gains (K_joint, D_joint)", tick.get("K_joint1") is not None and tick.get("D_joint1") is not None),
    ) if not ok]
    if missing:
        raise ValueError(f"run {ref.robot}/{ref.run}: cannot be replayed: no {', no '.join(missing)} "
                         "recorded; a replay fit needs the controller with its targets and gains (fit such a run "
                         "with --method torque)")


def read_frames(lake: Lake | str | Path, refs: list[IntervalRef], max_duration_s: float | None = None) -> list[pa.Table]:
    """The frames (canonical columns, sorted by seq) of each interval; with `max_duration_s`
    only the first that many seconds at 1 kHz (seq_first + round(1000·s))."""
    con = connect(lake)
    try:
        tables = []
        for ref in refs:
            last = ref.seq_last
            if max_duration_s is not None:
                last = min(last, ref.seq_first + int(round(max_duration_s * 1000.0)))
            table = run_frames(con, ref.robot, ref.run, ref.seq_first, last)
            if table.num_rows == 0:
                raise ValueError(f"interval {ref.label}: no frames in seq {ref.seq_first}..{last}")
            tables.append(table)
        return tables
    finally:
        con.close()


CONTROLLER_INPUTS = ("q_target", "K_joint", "D_joint")


def missing_controller_inputs(table: pa.Table) -> list[str]:
    """The controller inputs a replay needs that the frames do not have (no finite value in
    `<name>1..7`): a run without targets or gains (a mapped log) cannot be replayed."""
    import numpy as np

    out = []
    for name in CONTROLLER_INPUTS:
        cols = [f"{name}{j}" for j in range(1, 8)]
        present = [c for c in cols if c in table.column_names]
        values = [np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=float) for c in present]
        if len(present) < 7 or not all(np.isfinite(v).any() for v in values):
            out.append(f"{name}1..7")
    return out


def replay_inputs(refs: list[IntervalRef], tables: list[pa.Table], *, use_ema: bool = True) -> list:
    """One `twinlake.sim.ReplayInput` per interval (its frames from `read_frames`); an
    interval that cannot be replayed is named in the ValueError."""
    from ...sim import ReplayInput

    inputs = []
    for ref, table in zip(refs, tables):
        missing = missing_controller_inputs(table)
        if missing:
            raise ValueError(f"interval {ref.label}: cannot be replayed: no {', '.join(missing)} (the replay route "
                             "needs the controller's targets and gains; fit such a run with --method torque)")
        try:
            inputs.append(ReplayInput.from_frames(table, use_ema=use_ema))
        except ValueError as exc:
            raise ValueError(f"interval {ref.label}: {exc}") from None
    return inputs


__all__ = ["CONTROLLER_INPUTS", "IntervalRef", "missing_controller_inputs", "read_frames", "replay_inputs", "resolve"]
