"""The closed loop's noise bootstrap (fit/core/loop_noise.py) on a small replayed problem."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from twinlake.fit.core.objective import FitProblem, LossScales, ProblemData
from twinlake.fit.core.pool import LocalPool
from twinlake.fit.trust.identifiability import fd_jacobian
from twinlake.fit.core.loop_noise import bootstrap, measurement_rows, recording_noise
from twinlake.sim import DEFAULT_BOUNDS, HOME_Q, DynamicsParams, PopulationEngine, ReplayInput

TRUTH = DynamicsParams(armature=[0.30, 0.22, 0.17, 0.18, 0.12, 0.10, 0.06], mu_static=[0.8] * 7,
                       dynamic_ratio=[0.6] * 7, mu_viscous=[2.0, 2.5, 1.5, 2.0, 1.0, 0.6, 0.5], motor_delay_ms=1)
FREE = [0, 7, 21]  # armature_j1, mu_static_j1, mu_viscous_j1


def _data(n_ticks: int = 400, seed: int = 0) -> ProblemData:
    """One joint-impedance interval (slow two-tone targets, friction compensation on) replayed
    under TRUTH, with white noise of 2e-5 rad / 5e-4 rad/s on the recorded q and dq."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_ticks) * 1e-3
    target = np.tile(HOME_Q, (n_ticks, 1)) + 0.02 * np.sin(2 * np.pi * rng.uniform(0.5, 2, 7) * t[:, None])
    inp = ReplayInput(
        controller="joint_impedance", q0=HOME_Q.copy(), dq0=np.zeros(7), tau_prev0=np.zeros(7),
        tau_history=np.zeros((4, 7)), sample_ticks=np.arange(n_ticks), n_ticks=n_ticks, q_target=target,
        ema0=HOME_Q.copy(), k_nm_per_rad=np.tile([600.0, 600, 600, 600, 250, 150, 50], (n_ticks, 1)),
        d_nms_per_rad=np.tile([50.0, 50, 50, 50, 30, 25, 15], (n_ticks, 1)), filter_alpha=np.full(n_ticks, 0.05),
        use_friction=np.ones(n_ticks, dtype=bool), q_ref=np.zeros((n_ticks, 7)), dq_ref=np.zeros((n_ticks, 7)))
    clean = PopulationEngine([inp], nthread=1).run(TRUTH.to_vector()[None])[0]
    inp.q_ref = clean.q[0] + 2e-5 * rng.standard_normal(clean.q[0].shape)
    inp.dq_ref = clean.dq[0] + 5e-4 * rng.standard_normal(clean.dq[0].shape)
    return ProblemData([inp], np.ones(1), LossScales(), [])


def test_measurement_rows_are_the_noise_in_the_residuals_layout_and_units():
    data = _data()
    q_std, dq_std = recording_noise(data)
    assert np.allclose(q_std, 2e-5, rtol=0.25) and np.allclose(dq_std, 5e-4, rtol=0.25)
    rows = measurement_rows(data, np.array([5, 6]), q_std, dq_std)
    from twinlake.sim.replay.controller_noise import noise_block

    x = TRUTH.to_vector()[None]
    base = FitProblem(data).residuals(x)[0]
    for b, seed in enumerate((5, 6)):
        n = noise_block(seed, 0, data.inputs[0].n_ticks, q_std, dq_std)
        inp = replace(data.inputs[0], q_ref=data.inputs[0].q_ref - n[:, :7], dq_ref=data.inputs[0].dq_ref - n[:, 7:])
        moved = FitProblem(replace(data, inputs=[inp])).residuals(x)[0]  # the recording lowered by n: r rises by n
        np.testing.assert_allclose(moved - base, rows[b], rtol=1e-9, atol=1e-12)


def test_bootstrap_is_the_same_bytes_whatever_the_chunking_and_moves_with_the_seed():
    data = _data()
    x = TRUTH.to_vector()
    lo, hi = DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1]
    jac, _ = fd_jacobian(FitProblem(data).residuals, x, FREE, lo, hi)
    jac_z = jac * (hi - lo)[FREE]  # ∂r/∂z, z range-normalised
    one = bootstrap(LocalPool(data, chunk=1), data, x, jac_z, seed=3, draws=4)
    many = bootstrap(LocalPool(data, chunk=16), data, x, jac_z, seed=3, draws=4)
    for name in ("bias", "cov_loop", "cov_total"):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name))
    other = bootstrap(LocalPool(data, chunk=16), data, x, jac_z, seed=4, draws=4)
    assert not np.array_equal(one.bias, other.bias)
    assert one.bias.shape == (3,) and one.cov_loop.shape == (3, 3) and np.all(np.diag(one.cov_loop) > 0)
    assert np.all(np.diag(one.cov_total) > 0) and one.draws == 4
    ranges = (hi - lo)[FREE]
    stored = one.to_json(ranges)
    np.testing.assert_allclose(stored["bias"], one.bias * ranges)


def test_no_measurable_noise_gives_no_bootstrap():
    data = _data()
    inp = data.inputs[0]
    still = np.tile(HOME_Q, (inp.n_ticks, 1))  # a recording without noise: σ at round-off
    quiet = replace(data, inputs=[replace(inp, q_ref=still, dq_ref=np.zeros_like(still))])
    assert recording_noise(quiet) is None
    assert bootstrap(LocalPool(quiet), quiet, TRUTH.to_vector(), np.ones((5600, 3)), seed=0) is None


def test_one_free_parameter_and_a_column_the_data_do_not_see():
    data = _data()
    x = TRUTH.to_vector()
    lo, hi = DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1]
    jac, _ = fd_jacobian(FitProblem(data).residuals, x, FREE, lo, hi)
    jac_z = jac * (hi - lo)[FREE]
    one = bootstrap(LocalPool(data), data, x, jac_z[:, :1], seed=1, draws=3)
    assert one.cov_loop.shape == (1, 1) and one.cov_loop[0, 0] > 0
    blind = np.hstack([jac_z, np.zeros((len(jac_z), 1))])  # a parameter no residual depends on
    res = bootstrap(LocalPool(data), data, x, blind, seed=1, draws=3)
    assert np.all(np.isfinite(res.bias)) and res.bias[3] == 0.0 and res.cov_loop[3, 3] == 0.0


def test_fit_show_names_the_loop_noise_term_with_its_widening():
    from twinlake.fit.core.covariance import method_line

    stored = {"method": "hac_bartlett_andrews", "bandwidth_ticks": 20, "dof": 500,
              "matrix": [[4.0, 0.0], [0.0, 9.0]],
              "alternatives": {"hac_without_loop_noise": {"stderr": [1.0, 2.0]}}}
    line = method_line(stored)
    assert "noisy replays at the optimum" in line and "1.8× the sandwich alone" in line  # median of 2 and 1.5
    del stored["alternatives"]["hac_without_loop_noise"]
    assert "noisy" not in method_line(stored)
