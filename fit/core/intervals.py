"""Which recorded data a fit sees: `RUN[:INTERVAL]` selectors resolved against the lake's
clean intervals, the frames of each interval read back, and the replay inputs built from them;
what a run must have for each use is `needs`' to say.

Selector syntax (`--train`, `--holdout`): `RUN`, `ROBOT/RUN`, `RUN:INTERVAL` or
`ROBOT/RUN:INTERVAL`, where INTERVAL is the `interval_index` of the clean-interval query
(`twinlake intervals`); without it every clean interval of the run of at least
`min_duration_s` is used. The rules are the catalog's (`twinlake.catalog.selection`); this
module adds the fit's defaults (intervals of at least 0.5 s, a cap on the seconds read).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ..errors import DataError
from ...catalog import IntervalRef, Lake, connect, resolve_intervals, run_frames
from . import needs as needs_


def resolve(
    lake: Lake | str | Path, selectors: list[str], *, min_duration_s: float = 0.5,
    needs: tuple[str, ...] = needs_.REPLAY, purpose: str = needs_.REPLAY_PURPOSE,
    hint: tuple[str, str, str] | None = needs_.TORQUE_HINT,
) -> list[IntervalRef]:
    """The clean intervals named by `selectors`, in the given order (duplicates removed).
    Each run's first interval must have `needs` (default: what a replay needs,
    `fit/core/needs.py`); the one refusal (a DataError: `purpose`, `hint`) when not."""
    con = connect(lake)
    try:
        refs = resolve_intervals(con, selectors, min_duration_s=min_duration_s)
        for ref in {(r.robot, r.run): r for r in reversed(refs)}.values():  # each run's first
            lacking = needs_.missing_in_run(con, ref.robot, ref.run, ref.seq_first, needs)
            if lacking:
                raise needs_.refusal(f"{ref.robot}/{ref.run}", lacking, purpose=purpose, needs=needs, hint=hint)
        return refs
    finally:
        con.close()


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
                raise DataError(f"interval {ref.label}: no frames in seq {ref.seq_first}..{last}")
            tables.append(table)
        return tables
    finally:
        con.close()


def replay_inputs(refs: list[IntervalRef], tables: list[pa.Table], *, use_ema: bool = True) -> list:
    """One `twinlake.sim.ReplayInput` per interval (its frames from `read_frames`); an
    interval that cannot be replayed is named in the DataError."""
    from ...sim import ReplayInput

    inputs = []
    for ref, table in zip(refs, tables):
        needs_.require(table, ref.label)
        try:
            inputs.append(ReplayInput.from_frames(table, use_ema=use_ema))
        except ValueError as exc:
            raise DataError(f"interval {ref.label}: {exc}") from None
    return inputs


__all__ = ["IntervalRef", "read_frames", "replay_inputs", "resolve"]
