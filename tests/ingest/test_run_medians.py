"""RunMedians over chunks gives exactly the medians of the whole arrays (the numbers a run row
held when FrameStats kept `seq`, `t_s` and `control_period_s` whole)."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.ingest.run_medians import RunMedians
from twinlake.ingest.tick_grid import tick_period_s


def _whole(seq: np.ndarray, t: np.ndarray, period: np.ndarray) -> dict:
    dt = np.diff(t)
    return {"rate_hz": float(1.0 / np.median(dt)) if dt.size and np.median(dt) > 0 else None,
            "tick_period_s": tick_period_s(seq, t),
            "control_period_median_s": float(np.median(period)) if period.size else None}


def _recording(rng: np.random.Generator, rows: int,
               with_nan: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jittery 1 kHz times with lost ticks (seq jumps), repeats, a step back and a NaN (which
    makes the median step NaN: no rate)."""
    step = np.where(rng.random(rows) < 0.02, rng.integers(2, 6, rows), 1)
    seq = np.cumsum(step).astype(np.int64)
    t = seq * 1e-3 + rng.normal(0.0, 2e-5, rows)
    t[rows // 3] = t[rows // 3 - 1]  # a repeated time
    t[rows // 2] = t[rows // 2 - 1] - 1e-3  # a step back
    if with_nan:
        t[2 * rows // 3] = np.nan
    period = 1e-3 + rng.normal(0.0, 1e-5, rows)
    return seq, t, period


@pytest.mark.parametrize("seed,with_nan", [(0, False), (1, False), (2, True)])
def test_chunked_medians_are_the_whole_arrays(seed: int, with_nan: bool):
    rng = np.random.default_rng(seed)
    seq, t, period = _recording(rng, 5_000, with_nan)
    cuts = np.sort(rng.choice(np.arange(1, 5_000), size=7, replace=False))
    medians = RunMedians()
    for s, tt, p in zip(np.split(seq, cuts), np.split(t, cuts), np.split(period, cuts)):
        medians.add(s, tt, p)
    got, want = medians.result(), _whole(seq, t, period)
    assert got == want
    assert got["tick_period_s"] is not None and abs(got["tick_period_s"] - 1e-3) < 1e-5
    assert (got["rate_hz"] is None) == with_nan


def test_a_run_of_one_row_has_no_step_medians():
    medians = RunMedians()
    medians.add(np.array([7], dtype=np.int64), np.array([0.5]), np.array([], dtype=np.float64))
    assert medians.result() == {"rate_hz": None, "tick_period_s": None,
                                "control_period_median_s": None}
