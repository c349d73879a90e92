"""The tick grid and stale flags of the shared pipeline (ingest/tick_grid.py) on small
tables: a repeat while moving is stale, standstill is not; the grid rebuilt from a jittery
clock keeps its skips and never drifts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from twinlake.ingest.canonical import conform_frames
from twinlake.ingest.tick_grid import rebuild_seq, stale_mask, tick_period_s


def _frames(q: np.ndarray, dq: np.ndarray | None, tau: np.ndarray | None = None) -> pa.Table:
    cols = {"seq": pa.array(np.arange(len(q)), pa.int64())}
    cols |= {f"q{j}": q[:, j - 1] for j in range(1, 8)}
    if dq is not None:
        cols |= {f"dq{j}": dq[:, j - 1] for j in range(1, 8)}
    if tau is not None:
        cols |= {f"tau_J{j}": tau[:, j - 1] for j in range(1, 8)}
    return conform_frames(pa.table(cols))


def test_a_repeat_while_moving_is_stale_and_standstill_is_not():
    n = 10
    q = np.linspace(0, 0.01, n)[:, None] + np.zeros(7)
    dq = np.full((n, 7), 0.5)
    tau = np.arange(n)[:, None] + np.zeros(7)
    for arr in (q, dq, tau):
        arr[5] = arr[4]  # row 5 repeats row 4
    tau2 = tau.copy()
    tau2[7, 3] = np.nan  # NaN equals nothing: not a repeat
    q[7], dq[7] = q[6], dq[6]
    assert np.flatnonzero(stale_mask(_frames(q, dq, tau2))).tolist() == [5]
    still = np.zeros((n, 7))
    assert not stale_mask(_frames(still, still, still)).any()  # holding still: not stale
    q_only = q.copy()
    q_only[2] = q_only[1]
    assert np.flatnonzero(stale_mask(_frames(q_only, None))).tolist() == [2, 5, 7]


def test_rebuilt_grid_keeps_skips_rounds_jitter_and_never_drifts():
    rng = np.random.default_rng(1)
    ticks = np.delete(np.arange(200_000), np.arange(11, 200_000, 12))  # one in 12 skipped
    # 500 Hz, jittery clock: within ±0.45 ms, so two rows differ by < half a period
    t = ticks * 2e-3 + np.clip(rng.normal(0, 1.5e-4, ticks.size), -4.5e-4, 4.5e-4)
    seq, period = rebuild_seq(t)
    assert np.array_equal(seq, ticks - ticks[0])
    assert period == pytest.approx(2e-3, rel=1e-3)
    assert tick_period_s(seq, t) == pytest.approx(2e-3, rel=1e-3)
    back = np.array([0.0, 0.001, 0.002, 0.0015, 0.0025, 0.0025])  # steps back, repeats
    assert rebuild_seq(back)[0].tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="not finite at row 2"):
        rebuild_seq(np.array([0.0, 0.001, np.nan]))
