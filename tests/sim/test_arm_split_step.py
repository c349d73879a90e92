"""SimFR3's hot path: control() vs tick(), Coriolis from the tick's own mj_step1, tau_J timing."""

import numpy as np

from twinlake.sim import HOME_Q, DynamicsParams, JointImpedanceCommand, JointImpedanceConfig, SimFR3
from twinlake.sim.arm_model.controllers import joint_impedance_torque


def _targets(n: int) -> np.ndarray:
    t = np.arange(n)[:, None] * 1e-3
    return HOME_Q + 0.08 * np.sin(2 * np.pi * 1.7 * t + np.linspace(0, 3, 7))


def test_control_matches_tick_bit_for_bit_under_noise():
    params = DynamicsParams.nominal()
    a, b = SimFR3(params), SimFR3(params)
    rng = np.random.default_rng(3)
    cfg = JointImpedanceConfig(filter_alpha=0.1, use_friction=True)
    for k, target in enumerate(_targets(300)):
        noise = rng.normal(0, 1e-3, (2, 7))
        cmd = JointImpedanceCommand(target, cfg) if k % 7 == 0 else None
        out = a.tick(a.q + noise[0], a.dq + noise[1], cmd)
        tau = b.control(b.q + noise[0], b.dq + noise[1], cmd)
        np.testing.assert_array_equal(out.tau_cmd, tau)
        np.testing.assert_array_equal(out.q_target_filtered, b.ema)
        a.physics_step()
        b.physics_step()
        np.testing.assert_array_equal(a.tau_J(), b.tau_J())
    np.testing.assert_array_equal(a.q, b.q)
    assert np.abs(a.q - HOME_Q).max() > 1e-3  # the arm really moved


def test_coriolis_feed_forward_is_the_bias_at_the_true_state():
    arm = SimFR3(DynamicsParams.nominal())
    cfg = JointImpedanceConfig(filter_alpha=1.0)
    for target in _targets(200):  # spin up so that C(q,dq)·dq is not zero
        arm.tick(arm.q, arm.dq, JointImpedanceCommand(target, cfg))
        arm.physics_step()
    q_meas, dq_meas = arm.q + 1e-4, arm.dq + 0.05  # a measurement off the true state
    tau_prev = arm.tau_cmd.copy()
    target = arm.ema.copy()

    def law(coriolis):
        pre = joint_impedance_torque(q_meas, dq_meas, target, cfg.k_nm_per_rad, cfg.d_nms_per_rad, coriolis, False)
        return tau_prev + np.clip(pre - tau_prev, -1.0, 1.0)

    at_true, at_measured = law(arm.coriolis(arm.q, arm.dq)), law(arm.coriolis(q_meas, dq_meas))
    out = arm.tick(q_meas, dq_meas, JointImpedanceCommand(target, cfg))
    np.testing.assert_allclose(out.tau_cmd, at_true, rtol=0, atol=1e-12)
    assert np.abs(at_measured - at_true).max() > 1e-9  # the two states' Coriolis terms really differ


def test_tau_j_is_the_last_step_even_after_the_next_control():
    arm = SimFR3(DynamicsParams.nominal())
    cmd = JointImpedanceCommand(HOME_Q + 0.05)
    for _ in range(50):
        arm.tick(arm.q, arm.dq, cmd)
        arm.physics_step()
    before = arm.tau_J()
    arm.tick(arm.q, arm.dq)  # runs this tick's mj_step1, which refreshes qfrc_passive
    np.testing.assert_array_equal(arm.tau_J(), before)
    assert np.abs(before).max() > 0.1


def test_measured_coriolis_option_uses_the_measured_state():
    cfg = JointImpedanceConfig(filter_alpha=1.0)
    arm = SimFR3(DynamicsParams.nominal(), measured_coriolis=True)
    for target in _targets(200):
        arm.tick(arm.q, arm.dq, JointImpedanceCommand(target, cfg))
        arm.physics_step()
    q_meas, dq_meas, tau_prev, target = arm.q + 1e-4, arm.dq + 0.05, arm.tau_cmd.copy(), arm.ema.copy()
    pre = joint_impedance_torque(q_meas, dq_meas, target, cfg.k_nm_per_rad, cfg.d_nms_per_rad,
                                 arm.coriolis(q_meas, dq_meas), False)
    out = arm.tick(q_meas, dq_meas, JointImpedanceCommand(target, cfg))
    np.testing.assert_array_equal(out.tau_cmd, tau_prev + np.clip(pre - tau_prev, -1.0, 1.0))


def test_joint_law_adds_the_repulsion_only_inside_the_margins():
    from twinlake.sim.arm_model.controllers import joint_limit_repulsion
    from twinlake.sim.arm_model.model import Q_MAX, Q_MIN

    rng = np.random.default_rng(0)
    mid = 0.5 * (Q_MIN + Q_MAX)
    q = np.stack([mid, mid + 0.47 * (Q_MAX - Q_MIN), Q_MIN + 0.01 * (Q_MAX - Q_MIN)])  # free, upper zone, lower zone
    dq, spring, cor = rng.normal(size=(3, 7)), q + rng.normal(0, 0.1, (3, 7)), rng.normal(size=(3, 7))
    k, d = np.full(7, 600.0), np.full(7, 50.0)
    got = joint_impedance_torque(q, dq, spring, k, d, cor, False)
    explicit = k * (spring - q) - d * dq + cor + joint_limit_repulsion(q)
    np.testing.assert_allclose(got, explicit, rtol=1e-15, atol=1e-12)
    assert np.all(joint_limit_repulsion(q)[0] == 0) and np.all(joint_limit_repulsion(q)[1] < 0)
    assert np.all(joint_limit_repulsion(q)[2] > 0)
    free = joint_impedance_torque(q[:1], dq[:1], spring[:1], k, d, cor[:1], False)
    np.testing.assert_array_equal(free, got[:1])
