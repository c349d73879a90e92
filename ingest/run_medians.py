"""The run's median periods from its frames given a chunk at a time, exact and compact.

`rate_hz` (1 / median `t_s` step), `tick_period_s` (median `t_s` step per seq step over finite,
positive steps, `tick_grid.tick_period_s`) and `control_period_median_s` need every row's
value: a median is no streaming count. Kept are only what they are taken from, 17 bytes a row:
each `t_s` step (float64), whether it counts for the tick period with a seq step of one (bool;
its quotient is then the step itself, bit for bit) and the non-null control periods (float64);
the quotients of the rare steps over lost ticks are kept apart. A median depends only on the
multiset of its values, so these give exactly the numbers of the whole arrays.
"""

from __future__ import annotations

import numpy as np


class RunMedians:
    """`add(seq, t_s, control_period_s)` for each chunk in row order (`seq` int64, `t_s`
    float64 with NaN for null [s], `control_period_s` float64 without nulls [s]); `result()`
    the run's `rate_hz`, `tick_period_s` and `control_period_median_s` (None where undefined),
    as over the whole arrays."""

    def __init__(self) -> None:
        self._dt: list[np.ndarray] = []
        self._unit_ok: list[np.ndarray] = []
        self._other_q: list[np.ndarray] = []
        self._period: list[np.ndarray] = []
        self._last: tuple[float, float] | None = None  # (seq, t_s) of the last row so far

    def add(self, seq: np.ndarray, t_s: np.ndarray, control_period_s: np.ndarray) -> None:
        self._period.append(np.array(control_period_s, dtype=np.float64))  # a copy, not a view
        if not len(seq):
            return
        s = np.asarray(seq, dtype=np.float64)
        t = np.asarray(t_s, dtype=np.float64)
        if self._last is not None:
            s, t = np.concatenate([[self._last[0]], s]), np.concatenate([[self._last[1]], t])
        self._last = (s[-1], t[-1])
        ds, dt = np.diff(s), np.diff(t)
        ok = np.isfinite(dt) & (dt > 0) & (ds > 0)
        unit = ds == 1.0
        self._dt.append(dt)
        self._unit_ok.append(ok & unit)
        self._other_q.append(dt[ok & ~unit] / ds[ok & ~unit])

    def result(self) -> dict[str, float | None]:
        """{'rate_hz', 'tick_period_s', 'control_period_median_s'}; the kept arrays are freed."""
        period = np.concatenate(self._period)
        self._period = []
        control = float(np.median(period, overwrite_input=True)) if period.size else None
        del period
        dt = np.concatenate(self._dt)
        self._dt = []
        unit_ok = np.concatenate(self._unit_ok)
        self._unit_ok = []
        q = np.concatenate([dt[unit_ok], *self._other_q])
        del unit_ok
        tick = float(np.median(q, overwrite_input=True)) if q.size else None
        del q
        rate = None
        if dt.size and (m := np.median(dt, overwrite_input=True)) > 0:
            rate = float(1.0 / m)
        return {"rate_hz": rate, "tick_period_s": tick, "control_period_median_s": control}
