"""The intervals' check against the loss (fit/core/profile_check.py), on residual functions
whose loss is known in closed form: where the Jacobian the fit hands over is the loss's own,
nothing is widened; where it claims a curvature the loss does not have, the interval is widened
to where the loss reaches the interval's level; a valley through a joint is followed by
re-fitting that joint."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.fit.core.covariance import CovarianceEstimate
from twinlake.fit.core.profile_check import (CHECK_EDGES, GRID, RISE_FACTOR, check_intervals, joint_groups)

NAMES = ["armature_j1", "mu_static_j7", "mu_viscous_j7"]
LOWER, UPPER = np.zeros(3), np.array([0.5, 5.0, 5.0])
OPTIMUM = np.array([0.2, 1.0, 2.0])


class ResidualPool:
    """The pool's `residuals` (P, M) for full parameter rows: `function(z)` of the range-scaled
    free coordinates (here every coordinate is free)."""

    def __init__(self, function) -> None:
        self.function, self.calls = function, 0

    def residuals(self, rows: np.ndarray) -> np.ndarray:
        self.calls += len(rows)
        z = (np.asarray(rows) - LOWER) / (UPPER - LOWER)
        return np.stack([self.function(row) for row in z])


def _linear(matrix: np.ndarray):
    z_opt = (OPTIMUM - LOWER) / (UPPER - LOWER)
    return lambda z: matrix @ (z - z_opt)


def _check(pool, claimed: np.ndarray, sigma2: float = 1e-4):
    """check_intervals at OPTIMUM with the Jacobian `claimed` (M, 3) and its iid covariance."""
    r_factor = np.linalg.qr(claimed, mode="r")
    cov = sigma2 * np.linalg.inv(claimed.T @ claimed)
    estimate = CovarianceEstimate("gauss_newton_iid", cov, 1, 10**6, 1000, sigma2)
    return estimate, check_intervals(pool, OPTIMUM.copy(), np.arange(3), LOWER, UPPER, NAMES, r_factor, cov, 1.96)


def test_a_loss_that_is_the_quadratic_its_jacobian_says_is_left_alone():
    matrix = np.array([[30.0, 1.0, 0.0], [0.0, 20.0, 5.0], [2.0, 0.0, 25.0], [1.0, 1.0, 1.0]])
    pool = ResidualPool(_linear(matrix))
    estimate, check = _check(pool, matrix)
    assert check.profiled == () and np.all(check.scale == 1.0) and check.checked.all()
    assert check.replays == pool.calls == 2 * len(CHECK_EDGES) * 3 + 1
    np.testing.assert_array_equal(check.widen(estimate).cov, estimate.cov)


def test_a_flatter_loss_than_claimed_is_widened_to_where_it_reaches_the_level():
    """The loss along armature_j1 is 60 times flatter than the Jacobian says: its interval is
    widened ~60 times (the grid's piecewise-linear crossing, within 10 %); the others pass."""
    claimed = np.diag([30.0, 20.0, 25.0])
    true = np.diag([0.5, 20.0, 25.0])
    estimate, check = _check(ResidualPool(_linear(true)), claimed)
    assert {(NAMES[f.index], f.side) for f in check.profiled} == {("armature_j1", -1), ("armature_j1", 1)}
    assert 54 <= check.scale[0] <= 61 and check.scale[1] == check.scale[2] == 1.0
    widened = check.widen(estimate)
    assert np.sqrt(widened.cov[0, 0]) == pytest.approx(check.scale[0] * np.sqrt(estimate.cov[0, 0]))
    for f in check.profiled:  # each side's probe rose by 1/3600 of what the claimed interval assumes
        assert f.rise_ratio == pytest.approx((0.5 / 30.0) ** 2, rel=1e-6)
        assert f.rise_ratio < 1 / RISE_FACTOR


def test_a_loss_flat_to_the_bound_widens_to_the_bound():
    """No rise at all along mu_static_j7 (a wall-less valley): its interval reaches the bound it
    walks to, so the status rule will call it not identified."""
    claimed = np.diag([30.0, 20.0, 25.0])
    true = np.diag([30.0, 0.0, 25.0])
    _, check = _check(ResidualPool(_linear(true)), claimed)
    sides = {f.side: f for f in check.profiled if NAMES[f.index] == "mu_static_j7"}
    assert set(sides) == {-1, 1}
    assert sides[1].extent == pytest.approx(1.0 - OPTIMUM[1] / 5.0)  # to the upper bound, range-scaled
    assert sides[-1].extent == pytest.approx(OPTIMUM[1] / 5.0)


def test_a_valley_through_a_joint_is_followed_by_re_fitting_the_joint():
    """The loss pins only mu_static_j7 + mu_viscous_j7 (a valley). The Jacobian claims
    mu_static_j7 ten times steeper than it is (it fails the check) and mu_viscous_j7 as steep as
    it is along the straight line (it passes). Both of that joint's intervals are profiled with
    the other re-fitted, so both follow the valley far beyond what the straight line allows;
    armature_j1 (another joint) is left alone."""
    z_opt = (OPTIMUM - LOWER) / (UPPER - LOWER)

    def valley(z):
        d = z - z_opt
        return np.array([30.0 * d[0], 20.0 * (d[1] + d[2]), 1e-3 * d[1], 1e-3 * d[2]])

    claimed = np.diag([30.0, 200.0, 20.0])
    _, check = _check(ResidualPool(valley), claimed)
    failed = {NAMES[f.index]: f for f in check.profiled if f.rise_ratio < 1 / RISE_FACTOR}
    assert set(failed) == {"mu_static_j7"}
    assert {NAMES[f.index] for f in check.profiled} == {"mu_static_j7", "mu_viscous_j7"}
    assert check.scale[1] > 20 and check.scale[2] > 20 and check.scale[0] == 1.0


def test_the_grid_reaches_far_enough_for_the_bounds_it_is_used_with():
    assert CHECK_EDGES == (2.0, 4.0) and 2 ** GRID >= 1000


def test_joint_groups_are_the_other_free_parameters_of_the_same_joint():
    names = ["armature_j1", "mu_static_j1", "armature_j7", "payload_mass", "mu_viscous_j7", "motor_delay_ms"]
    assert joint_groups(names) == [[1], [0], [4], [], [2], []]


def test_fit_show_names_the_intervals_the_check_widened():
    from twinlake.fit.core.covariance import method_line

    stored = {"method": "hac_bartlett_andrews", "bandwidth_ticks": 20, "dof": 500, "names": ["armature_j7", "mu_static_j7"],
              "matrix": [[4.0, 0.0], [0.0, 900.0]],
              "alternatives": {"hac_before_profile_check": {"stderr": [2.0, 3.0]}}}
    assert "widened where it is flatter than they assume: mu_static_j7 ×10" in method_line(stored)
    stored["alternatives"]["hac_before_profile_check"]["stderr"] = [2.0, 30.0]
    assert "checked against replays of the loss: none widened" in method_line(stored)
    del stored["alternatives"]["hac_before_profile_check"]
    assert "checked against" not in method_line(stored)
