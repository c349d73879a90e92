"""The LM's stop rules (fit/replay/stopping.py): tolerances as distances in standard errors."""

from types import SimpleNamespace

import numpy as np

from twinlake.fit.replay import stopping
from twinlake.fit.replay.refine import LastIteration


def _data(samples_per_interval):
    return SimpleNamespace(inputs=[SimpleNamespace(q_ref=np.zeros((n, 7))) for n in samples_per_interval])


def test_residual_count_is_q_and_dq_of_every_joint():
    assert stopping.residual_count(_data([100, 50])) == 2 * 7 * 150


def test_full_tolerance_is_the_squared_distance_in_standard_errors_per_residual():
    data, k = _data([12_000] * 3), 32
    m = stopping.residual_count(data)
    stop = stopping.full_stop(data, k, floor=1.0)
    assert np.isclose(stop(1.0) * (m - k), stopping.FULL_STOP_SE ** 2)  # a gain of FULL_STOP_SE² σ², σ² = loss / (M − k)
    assert np.isclose(stop.sigma2_units(1.0, data, k), stopping.FULL_STOP_SE ** 2)
    # far tighter than the cheap stage's rule, which allows moving all k parameters by CHEAP_STOP_SE
    assert stopping.cheap_rel_tol(data, k) > 100 * stop(1.0)


def test_above_the_floor_gate_the_full_stop_is_the_cheap_rule():
    data, k = _data([12_000] * 3), 32
    stop = stopping.full_stop(data, k, floor=1.0)  # the gate: FLOOR_GATE × 1.0
    assert stop(1.9) == stop.tight and stop(2.1) == stop.loose == stopping.cheap_rel_tol(data, k)
    no_floor = stopping.full_stop(data, k, floor=None)  # no measurable floor: always tight
    assert no_floor(1e9) == no_floor.tight


def test_a_gauss_newton_gain_bounds_every_parameter_distance_in_its_standard_errors():
    rng = np.random.default_rng(0)
    jac = rng.standard_normal((500, 4)) @ np.diag([1.0, 10.0, 0.1, 3.0])
    jac[:, 1] += 0.9 * jac[:, 0] * 10  # correlated columns
    sigma2 = 0.01
    delta = rng.standard_normal(4) * 0.01
    gain = delta @ jac.T @ jac @ delta
    stderr = np.sqrt(np.diag(sigma2 * np.linalg.inv(jac.T @ jac)))
    assert np.all(np.abs(delta) / stderr <= np.sqrt(gain / sigma2) + 1e-12)


def test_convergence_note_only_when_the_cap_ended_a_still_paying_search():
    data, k = _data([1000]), 5
    r = np.full(stopping.residual_count(data), 0.1)
    sigma2 = float(r @ r) / (stopping.residual_count(data) - k)
    stop = stopping.full_stop(data, k, floor=None)
    for how in ("predicted", "step"):
        assert stopping.convergence_note(LastIteration(r=r, stop=how, realised_gain=10 * sigma2), data, k, 8, stop) is None
    note = stopping.convergence_note(LastIteration(r=r, stop="cap", realised_gain=80 * sigma2), data, k, 8, stop)
    assert note.startswith("not converged") and "cap of 8 iterations" in note and "80 σ²" in note
    assert "below 0.25 σ²" in note
