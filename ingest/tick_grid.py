"""The tick grid of a run and its stale repeated rows: what real PC-side logs look like.

A PC-side logger of a 1 kHz robot loop does not see every tick and sometimes sees one twice:
it skips ticks (the seq grid has holes: `runstats` counts them as `dropped`, the intervals
rules split there) and repeats stale rows (q, dq and tau_J identical to the row before while
the arm moves). Both are kept as recorded, never interpolated; stale rows are flagged in the
canonical frame column `stale` so no fit mistakes a repeat for standstill.

- `stale_mask(frames)`: the `stale` column for any canonical frames table (numpy over whole
  columns; no per-row Python).
- `rebuild_seq(t_s)`: a tick grid for a source without the robot's own tick counter: each
  step between rows advances seq by its time step in median periods, rounded, at least one
  (the grid stays strictly increasing, the rows stay in file order: nothing is re-sorted).
- `tick_period_s(seq, t_s)`: the median `t_s` step per seq step (the run's own tick period).
- `frames_on_grid(path, unit)`: what the pipeline does with every reader's frames: canonical
  form, the grid (rebuilt when the reader left `seq` out), the `stale` column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import JOINTS
from .canonical import conform_frames
from .registry import IngestError, IngestUnit

STALE_MIN_SPEED_RAD_S = 1e-3
"""A repeated row is stale when some joint's recorded speed exceeds this [rad/s]: the arm
moves, so its state cannot have been identical one tick later."""

_Q = [f"q{j}" for j in range(1, JOINTS + 1)]
_DQ = [f"dq{j}" for j in range(1, JOINTS + 1)]
_TAU = [f"tau_J{j}" for j in range(1, JOINTS + 1)]


def _recorded(frames: pa.Table, names: list[str]) -> list[np.ndarray]:
    """The float values of the `names` the source recorded (a column all null is left out;
    a null inside a recorded column is NaN, which equals nothing)."""
    out = []
    for name in names:
        col = frames.column(name)
        if col.null_count == len(col):
            continue
        if col.null_count:
            col = pc.fill_null(col, np.nan)
        out.append(np.asarray(col.to_numpy(), dtype=np.float64))
    return out


def stale_mask(frames: pa.Table) -> np.ndarray:
    """bool[n]: row i repeats row i-1 exactly in every recorded q, dq and tau_J column (q
    must be recorded), while the arm moves: some |dq| > `STALE_MIN_SPEED_RAD_S` at the row,
    or, without recorded dq, q changed from row i-2 to row i-1. Row 0 is never stale."""
    n = frames.num_rows
    out = np.zeros(n, dtype=bool)
    q = _recorded(frames, _Q)
    if n < 2 or not q:
        return out
    dq = _recorded(frames, _DQ)
    # rows whose first q repeats (few in real data), then only those checked further
    rows = np.flatnonzero(q[0][1:] == q[0][:-1]) + 1
    for v in q[1:] + dq + _recorded(frames, _TAU):
        rows = rows[v[rows] == v[rows - 1]]
    if dq:
        moving = np.zeros(rows.size, dtype=bool)
        for v in dq:
            moving |= np.abs(v[rows]) > STALE_MIN_SPEED_RAD_S
    else:  # q changed from row i-2 to row i-1
        moving = np.zeros(rows.size, dtype=bool)
        before = rows[rows >= 2]
        changed = np.zeros(before.size, dtype=bool)
        for v in q:
            changed |= v[before - 1] != v[before - 2]
        moving[rows >= 2] = changed
    out[rows[moving]] = True
    return out


def median_period_s(t_s: np.ndarray) -> float | None:
    """Median of the positive finite steps of `t_s` [s]; None without any."""
    dt = np.diff(np.asarray(t_s, dtype=np.float64))
    dt = dt[np.isfinite(dt) & (dt > 0)]
    return float(np.median(dt)) if dt.size else None


def rebuild_seq(t_s: np.ndarray) -> tuple[np.ndarray, float]:
    """(seq int64[n], period_s): the tick grid rebuilt from the times at their median period;
    `period_s` is then the median time step per tick (steps over lost ticks divided).
    seq[0] = 0; each step into row i advances by round(dt / period) ticks, at least one (a
    jittery clock, a repeat at the same time, a clock stepping back), so seq strictly
    increases and a step of two periods is one lost tick. dt is measured from the latest
    time seen before row i, and the ticks that rows repeating or stepping back in time took
    are repaid by the next forward step, so such rows cost no lost tick after them: nothing
    was dropped (the intervals split there: time_repeat, clock_reversal).
    Judged step by step, a slightly wrong period never accumulates into a drift over a long
    run. Raises ValueError when `t_s` is empty, not finite, or has no positive step."""
    t = np.asarray(t_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no rows")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise ValueError(f"time is not finite at row {int(bad[0])}")
    period = median_period_s(t)
    if period is None:
        if t.size == 1:
            return np.zeros(1, np.int64), float("nan")
        raise ValueError("time never increases: no tick period")
    dt = t[1:] - np.maximum.accumulate(t)[:-1]
    still = dt <= 0  # a row that repeats or steps back: it still takes one tick of the grid,
    run = np.cumsum(still)  # which the next forward step repays (it is no lost tick)
    run = run - np.maximum.accumulate(np.where(still, 0, run))  # non-advancing rows ending here
    debt = np.concatenate([[0], run[:-1]])
    steps = np.where(still, 1, np.maximum(np.rint(dt / period) - debt, 1)).astype(np.int64)
    seq = np.concatenate([[0], np.cumsum(steps)]).astype(np.int64)
    ok = dt > 0  # the period per tick, skipped ticks no longer in it
    return seq, float(np.median(dt[ok] / steps[ok]))


class TimeOrder:
    """Where `t_s` repeats or steps back between consecutive rows, counted a chunk at a time
    (rows are kept in file order, never re-sorted); `reason()` is the run's reason, or None."""

    def __init__(self) -> None:
        self.counts = {"repeats the previous row's time": 0, "steps back": 0}
        self.first: dict[str, int] = {}
        self.rows = 0
        self.last: float | None = None

    def add(self, t_s: np.ndarray) -> None:
        t = np.asarray(t_s, dtype=np.float64)
        if t.size == 0:
            return
        dt = np.diff(t, prepend=t[0] if self.last is None else self.last)
        at = {"repeats the previous row's time": dt == 0, "steps back": dt < 0}
        if self.last is None:
            at = {k: np.concatenate([[False], v[1:]]) for k, v in at.items()}
        for what, mask in at.items():
            rows = np.flatnonzero(mask)
            if rows.size:
                self.counts[what] += int(rows.size)
                self.first.setdefault(what, self.rows + int(rows[0]))
        self.rows += t.size
        self.last = float(t[-1])

    def reason(self) -> str | None:
        parts = [f"{what} at {n} row{'s' if n != 1 else ''} (first row {self.first[what]})"
                 for what, n in self.counts.items() if n]
        if not parts:
            return None
        return (f"t_s {' and '.join(parts)}: kept in file order, no tick counted as lost; the intervals "
                "split there (time_repeat, clock_reversal)")


def tick_period_s(seq: np.ndarray, t_s: np.ndarray) -> float | None:
    """Median of `diff(t_s) / diff(seq)` over steps with a finite, positive time step [s]
    (a skipped tick does not shorten it); None without any such step."""
    ds = np.diff(np.asarray(seq, dtype=np.float64))
    dt = np.diff(np.asarray(t_s, dtype=np.float64))
    ok = np.isfinite(dt) & (dt > 0) & (ds > 0)
    return float(np.median(dt[ok] / ds[ok])) if ok.any() else None


def grid_from_time(path: Path, t_s: np.ndarray) -> tuple[np.ndarray, str]:
    """(seq, the run's reason saying so): `rebuild_seq(t_s)`, or IngestError naming why not
    (for a reader that rebuilds the grid of a whole run itself, then gives its frames with
    `seq` a chunk at a time, `run_fields["tick_grid"] = "rebuilt"`)."""
    try:
        seq, period = rebuild_seq(t_s)
    except ValueError as exc:
        raise IngestError(path, f"cannot rebuild the tick grid from the time: {exc}",
                          field="t_s") from None
    return seq, (f"no robot tick counter: tick grid rebuilt from t_s at its median period "
                 f"{period * 1e3:.4g} ms")


def frames_on_grid(path: Path, unit: IngestUnit) -> pa.Table:
    """The unit's frames in canonical form with their tick grid and `stale` flags, for every
    source alike. A reader without the robot's own tick counter leaves `seq` out: the grid is
    rebuilt from `t_s` at its median period (`tick_grid.rebuild_seq`), and the run says so
    (`tick_grid = "rebuilt"`, a reason); otherwise `tick_grid = "recorded"`. `stale` is the
    reader's own flag (if it set one) or'ed with `tick_grid.stale_mask`."""
    frames = unit.frames
    if "seq" not in frames.column_names:
        if "t_s" not in frames.column_names:
            raise IngestError(path, "no tick counter and no time column: cannot place the rows "
                              "on a tick grid", field="t_s")
        seq, reason = grid_from_time(path, frames.column("t_s").to_numpy(zero_copy_only=False))
        frames = frames.append_column("seq", pa.array(seq, pa.int64()))
        unit.run_fields["tick_grid"] = "rebuilt"
        unit.reasons.append(reason)
    else:
        unit.run_fields.setdefault("tick_grid", "recorded")
    return with_stale(conform_frames(frames))


def with_stale(frames: pa.Table, before: pa.Table | None = None) -> pa.Table:
    """Canonical `frames` with their `stale` column: the reader's own flag (if it set one)
    or'ed with `stale_mask`. `before`: the last rows (two suffice) of the frames before
    these, when a run comes a chunk at a time; its first rows are judged beside them, so the
    column is the one of the whole run."""
    mask = stale_mask(frames)
    if before is not None and before.num_rows and frames.num_rows:
        judged = _Q + _DQ + _TAU
        head = frames.slice(0, 2).select(judged)
        joined = pa.concat_tables([before.select(judged), head]).combine_chunks()
        mask[: head.num_rows] = stale_mask(joined)[before.num_rows:]
    stale = pa.array(mask)
    given = frames.column("stale")
    if given.null_count < len(given):
        stale = pc.or_(pc.fill_null(given, False), stale)
    return frames.set_column(frames.schema.get_field_index("stale"), "stale", stale)
