"""The delay profiled again on the full data (fit/replay/full_stage.py `full_delay_profile`,
fit/replay/refine.py `neighbour_delays`), on a loss known in closed form: at each delay a
quadratic in the free coordinates with its own optimum and its own floor. A full-data optimum
at a delay whose neighbour is lower moves there, LM runs again and its last iteration (the
error bars' Jacobian) is taken at the new delay; at the lowest delay nothing moves."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.fit.core.space import parse_space
from twinlake.fit.replay.full_stage import full_delay_profile
from twinlake.fit.replay.refine import LAMBDAS, REL_TOL, LastIteration, neighbour_delays, refine
from twinlake.fit.replay.stopping import FullStop

SPACE = parse_space([])
N = len(SPACE.free_indices)
RNG = np.random.default_rng(7)
MATRIX = np.vstack([np.eye(N) * 3.0, RNG.normal(size=(12, N))])  # well conditioned, (N + 12, N)
OPTIMA = {d: np.clip(0.5 + 0.05 * (d - 2) * np.sin(np.arange(N) + d), 0.05, 0.95) for d in SPACE.delay_choices}
FLOORS = {0: 9e-4, 1: 6e-4, 2: 2e-4, 3: 5e-4, 4: 8e-4}  # the lowest loss at each delay [loss units]


class DelayPool:
    """`residuals` (P, M) and `evaluate` (P, 1) of full parameter rows: A·(z − z_d) and √floor_d."""

    def __init__(self) -> None:
        self.calls = 0

    def residuals(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        self.calls += len(rows)
        out = []
        for row in rows:
            d = SPACE.delay_of(row)
            z = SPACE.encode(row[None])[0]
            out.append(np.concatenate([MATRIX @ (z - OPTIMA[d]), [np.sqrt(FLOORS[d])]]))
        return np.array(out)

    def evaluate(self, rows: np.ndarray) -> np.ndarray:
        return np.sum(self.residuals(rows) ** 2, axis=1)[:, None]


def _stop(tolerance: float = REL_TOL) -> FullStop:
    """The full-data LM's stop with one relative tolerance and no floor gate."""
    return FullStop(tight=tolerance, loose=tolerance, gate_loss=None)


def _combine(per_interval: np.ndarray) -> np.ndarray:
    return np.asarray(per_interval)[:, 0]


def _optimum_at(pool, delay: int):
    """The full-data LM's result at `delay` from that delay's optimum: (params, loss, last)."""
    last = LastIteration()
    x0 = SPACE.decode(OPTIMA[delay][None] + 0.01, np.array([delay]))[0]
    params, loss, _ = refine(pool, _combine, SPACE, x0, None, 4, profile_delay=False, last=last, predict_stop=True)
    return params, loss, last


def test_a_lower_neighbouring_delay_becomes_the_delay_and_lm_runs_again_there():
    pool = DelayPool()
    params, loss, last = _optimum_at(pool, 1)
    assert SPACE.delay_of(params) == 1 and loss == pytest.approx(FLOORS[1], rel=1e-3)
    notes, rows = [], []
    moved, lower, last2 = full_delay_profile(pool, _combine, SPACE, params, loss, last, rows, 4, _stop(),
                                              notes.append)
    assert SPACE.delay_of(moved) == 2 and lower == pytest.approx(FLOORS[2], rel=1e-3)
    np.testing.assert_allclose(SPACE.encode(moved[None])[0], OPTIMA[2], atol=1e-3)
    # the error bars' Jacobian is the new LM's last iteration, at the new delay
    assert last2 is not last and last2.r[-1] == pytest.approx(np.sqrt(FLOORS[2]))  # replayed at delay 2
    np.testing.assert_allclose(last2.jac[:-1], MATRIX, atol=1e-6)
    assert any("delay 1 -> 2 ms" in n for n in notes)
    stages = [r.get("stage") for r in rows]
    assert stages.count("local-delay") == 2  # one probe row per move tried (1 -> 2, then from 2), apart from the LM's
    # from delay 2 its neighbours (1 tried, 3 higher) are probed and it stays
    assert not any("delay 2 -> 3" in n for n in notes)


def test_at_the_lowest_delay_nothing_moves():
    pool = DelayPool()
    params, loss, last = _optimum_at(pool, 2)
    rows: list = []
    before = pool.calls
    kept, kept_loss, kept_last = full_delay_profile(pool, _combine, SPACE, params, loss, last, rows, 4, _stop(),
                                                     lambda _: None)
    assert kept is params and kept_loss == loss and kept_last is last
    # both neighbours replayed at the optimum and one LM step each on the last Jacobian (6 λ)
    assert pool.calls - before == 2 + 2 * len(LAMBDAS)
    assert [r["stage"] for r in rows] == ["local-delay"] and rows[0]["evaluations"] == 2 + 2 * len(LAMBDAS)


def test_neighbour_delays_skips_the_tried_and_the_choices_edge():
    pool = DelayPool()
    z = OPTIMA[0].copy()
    assert neighbour_delays(pool, _combine, SPACE, z, 0, FLOORS[0] * 2, 1, [], "s", tried={1}) is None
    assert pool.calls == 0  # delay −1 is no choice and 1 was tried: nothing replayed
    moved = neighbour_delays(pool, _combine, SPACE, z, 0, np.inf, 2, [], "s")
    assert moved is not None and moved[1] == 1


def test_a_gain_within_the_lm_stop_is_noise_and_above_the_floor_gate_the_exploration_decides():
    pool = DelayPool()
    params, loss, last = _optimum_at(pool, 1)
    gain = 1.0 - FLOORS[2] / FLOORS[1]  # what moving to delay 2 gains, relative
    kept = full_delay_profile(pool, _combine, SPACE, params, loss, last, [], 4, _stop(gain * 1.01), lambda _: None)
    assert kept[0] is params  # lower, but by less than the stop tolerance: not a move
    before = pool.calls
    above = FullStop(tight=REL_TOL, loose=REL_TOL, gate_loss=loss / 2)  # the loss is over the floor gate
    kept = full_delay_profile(pool, _combine, SPACE, params, loss, last, [], 4, above, lambda _: None)
    assert kept[0] is params and pool.calls == before  # nothing replayed
    below = FullStop(tight=REL_TOL, loose=REL_TOL, gate_loss=loss * 2)
    moved = full_delay_profile(pool, _combine, SPACE, params, loss, last, [], 4, below, lambda _: None)
    assert SPACE.delay_of(moved[0]) == 2
