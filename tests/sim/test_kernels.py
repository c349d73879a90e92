"""The compiled tick kernels against the numpy definitions in controllers.py and plant.py."""

import numpy as np
import pytest

from twinlake.sim import Q_MAX, Q_MIN
from twinlake.sim.arm_model.controllers import JOINT_SLEW_NM_PER_TICK, joint_impedance_torque, slew_limit
from twinlake.sim.kernels.tick import add_square_errors, apply_delayed_torque, joint_impedance_tick, population_control
from twinlake.sim.arm_model.plant import DelayLine, StribeckFriction


def _population(rng, count=40):
    """States spread over the whole range: mid-range, inside the 10 % margins, beyond the limits."""
    span = Q_MAX - Q_MIN
    q = Q_MIN - 0.05 * span + rng.uniform(size=(count, 7)) * 1.1 * span
    dq = rng.normal(scale=0.5, size=(count, 7))
    dq[::5] = 0.0  # exactly at rest: the friction terms' sign cases
    cor = rng.normal(scale=0.2, size=(count, 7))
    return q, dq, cor


@pytest.mark.parametrize("use_friction", [False, True])
def test_joint_impedance_kernel_equals_the_numpy_law_then_slew(use_friction):
    rng = np.random.default_rng(3)
    q, dq, cor = _population(rng)
    spring = 0.5 * (Q_MIN + Q_MAX) + rng.normal(scale=0.3, size=7)
    k, d = rng.uniform(10, 600, 7), rng.uniform(1, 50, 7)
    tau_prev = rng.normal(scale=3.0, size=q.shape)
    expected = slew_limit(joint_impedance_torque(q, dq, spring, k, d, cor, use_friction), tau_prev, JOINT_SLEW_NM_PER_TICK)
    got = tau_prev.copy()
    joint_impedance_tick(q, dq, spring, k, d, cor, use_friction, got)
    # the cases the population covers: slew active and not, repulsion inside the margin and capped
    pre = joint_impedance_torque(q, dq, spring, k, d, cor, use_friction)
    assert (np.abs(pre - tau_prev) > 1.0).any() and (np.abs(pre - tau_prev) < 1.0).any()
    if use_friction:  # tanh from two libraries: equal to the last bits
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)
    else:
        np.testing.assert_array_equal(got, expected)


def test_joint_impedance_kernel_takes_strided_views_of_batch_rows():
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(6, 9))  # 9 dofs a row, the arm's 7 first: as mujoco.batch binds qpos
    q, dq, cor = rows[:, :7], rows[:, 1:8] * 0.1, rows[:, 2:9] * 0.01
    spring, k, d = np.zeros(7), np.full(7, 100.0), np.full(7, 5.0)
    got, expected = np.zeros((6, 7)), np.zeros((6, 7))
    joint_impedance_tick(q, dq, spring, k, d, cor, False, got)
    joint_impedance_tick(np.ascontiguousarray(q), np.ascontiguousarray(dq), spring, k, d, np.ascontiguousarray(cor), False, expected)
    np.testing.assert_array_equal(got, expected)


def test_delay_and_relief_kernel_equals_delay_line_push_plus_stribeck_relief():
    rng = np.random.default_rng(5)
    count, ticks = 6, 40
    delays = np.array([0, 1, 2, 5, 13, 30])
    history = rng.normal(size=(8, 7))
    mu_s = rng.uniform(0.1, 1.0, (count, 7))
    friction = StribeckFriction(mu_s, 0.7 * mu_s)
    numpy_line = DelayLine(delays, np.full(7, 0.25), history)
    kernel_line = DelayLine(delays, np.full(7, 0.25), history)
    applied, relief = np.empty((count, 7)), np.empty((count, 7))
    for tick in range(ticks):
        tau = rng.normal(size=(count, 7))
        dq = rng.normal(scale=0.03, size=(count, 7))  # around the Stribeck velocity
        dq[0, 0] = 0.0
        expected = np.add(friction.sliding_relief(dq, relief), numpy_line.push(tau))
        kernel_line.push_apply(tau, dq, friction.neg_breakaway, applied)
        np.testing.assert_allclose(applied, expected, rtol=0, atol=1e-15)
    assert kernel_line.tick == ticks


def test_population_tick_filters_the_target_and_applies_the_delayed_command():
    """The generic loop's tick: population_control (EMA + law) then apply_delayed_torque."""
    count, n = 3, 4
    q = np.zeros((count, 7))
    dq = np.zeros((count, 7))
    q[:] = 0.5 * (Q_MIN + Q_MAX)  # mid-range: no repulsion
    cor, applied = np.zeros((count, 7)), np.zeros((count, 7))
    alpha, target = 0.5, q[0] + 0.02
    table = np.zeros((n, 30))
    table[:, 0], table[:, 2:9], table[:, 9:16] = 1 - alpha, alpha * target, target
    table[:, 16:23], table[:, 23:30] = 100.0, 10.0
    ema, tau_prev = q[0].copy(), np.zeros((count, 7))
    ring = np.zeros((31, count, 7))
    delays = np.array([0, 1, 2])
    for k in range(n):
        population_control(k, q, dq, cor, table, True, ema, tau_prev)
        apply_delayed_torque(ring, k, np.repeat(delays[:, None], 7, axis=1), tau_prev, dq, np.zeros((count, 7)), applied)
        # EMA halves the distance to the target each tick: 0.01, 0.015, 0.0175, ... → 100·that
        spring_nm = 100.0 * 0.02 * (1 - 0.5 ** (k + 1))
        np.testing.assert_allclose(tau_prev, spring_nm, rtol=1e-12)
        # candidate c applies the command of tick k − c (zero before tick 0)
        for c, delay in enumerate(delays):
            want = 0.0 if k < delay else 100.0 * 0.02 * (1 - 0.5 ** (k - delay + 1))
            np.testing.assert_allclose(applied[c], want, rtol=1e-12, atol=1e-15)
    table[:, 9:16] = target + 0.1  # without the EMA the spring is the raw target
    population_control(0, q, dq, cor, table, False, ema, tau_prev)
    np.testing.assert_allclose(tau_prev, 100.0 * 0.02 * (1 - 0.5 ** n) + 1.0, rtol=1e-12)  # slew: +1 N·m


def test_square_errors_are_summed_sample_by_sample_joint_by_joint():
    rng = np.random.default_rng(8)
    count, n_samples = 4, 9
    q_ref, dq_ref = rng.normal(size=(n_samples, 7)), rng.normal(size=(n_samples, 7))
    states = [(rng.normal(size=(count, 7)), rng.normal(size=(count, 7))) for _ in range(n_samples)]
    sum_sq = np.zeros((count, 2))
    for s in (0, 3, 8):  # the sample ticks only
        add_square_errors(s, *states[s], q_ref, dq_ref, 1e-3, 1e-2, sum_sq)
    want = np.zeros((count, 2))
    for p in range(count):  # in order: the compiled loop's summation, bit for bit
        for s in (0, 3, 8):
            for j in range(7):
                e_q, e_dq = (states[s][0][p, j] - q_ref[s, j]) / 1e-3, (states[s][1][p, j] - dq_ref[s, j]) / 1e-2
                want[p, 0] += e_q * e_q
                want[p, 1] += e_dq * e_dq
    np.testing.assert_array_equal(sum_sq, want)
    assert sum_sq.min() > 0


def test_recorder_step_equals_measure_then_control_then_physics():
    from twinlake.sim import DEMO_PROFILE_PATH, HOME_Q, IdleCommand, JointImpedanceCommand, SimFR3, load_params

    params = load_params(DEMO_PROFILE_PATH)
    split, recorder = SimFR3(params), SimFR3(params)
    rng = np.random.default_rng(6)
    commands = {0: JointImpedanceCommand(HOME_Q + 0.05), 120: IdleCommand(), 150: JointImpedanceCommand(HOME_Q - 0.04)}
    want, rec_meas, rec_tau, rec_ema = np.empty(21), np.empty(21), np.empty(7), np.empty(7)
    for tick in range(300):
        offsets = rng.normal(scale=1e-3, size=21)
        command = commands.get(tick)
        meas = split.measured(offsets, want)
        tau_split = split.control(meas[0:7], meas[7:14], command).copy()
        recorder.step_recorded(offsets, rec_meas, rec_tau, rec_ema, command)  # the recorders' whole tick
        np.testing.assert_array_equal(rec_meas, want)
        np.testing.assert_array_equal(rec_tau, tau_split)
        np.testing.assert_array_equal(recorder.ema, split.ema)
        np.testing.assert_array_equal(rec_ema, split.ema if tick < 120 or tick >= 150 else 0.0)
        split.physics_step()
        np.testing.assert_array_equal(recorder.q, split.q)
        np.testing.assert_array_equal(recorder.tau_J(), split.tau_J())
    assert np.abs(rec_tau).max() > 0.1  # the arm was driven, not idle throughout
