import mujoco
import numpy as np
import pytest

from twinlake.sim import (
    HOME_Q,
    Q_MAX,
    Q_MIN,
    DynamicsParams,
    JointImpedanceCommand,
    JointImpedanceConfig,
    ReplayInput,
    SimFR3,
)
from twinlake.sim.arm_model.controllers import (
    cartesian_clamp_and_slew,
    ema_update,
    friction_compensation,
    joint_impedance_torque,
    joint_limit_repulsion,
    mat_to_quat_xyzw,
    orientation_error,
    site_jacobian,
    slew_limit,
)

ZERO = np.zeros((1, 7))


def test_ema_weights_the_new_target_by_alpha():
    ema = np.full((1, 7), 1.0)
    ema_update(ema, np.full(7, 2.0), 0.05, out=ema)
    np.testing.assert_allclose(ema, 0.95 * 1.0 + 0.05 * 2.0)


def test_reset_on_entry_then_ema_then_spring_uses_the_filtered_target():
    arm = SimFR3(DynamicsParams.nominal())
    q = arm.q
    cfg = JointImpedanceConfig(filter_alpha=0.1)
    target = q + 0.01
    out = arm.tick(q, np.zeros(7), JointImpedanceCommand(target, cfg))
    assert out.reset_count == 1 and out.controller == 2 and out.joint_target_valid == 1
    # reset: ema = measured q, then this tick's EMA: 0.9·q + 0.1·target (the 10 mm → 1 mm case of fr3_stack's TODO)
    np.testing.assert_allclose(out.q_target_filtered, 0.9 * q + 0.1 * target, atol=1e-15)
    spring = cfg.k_nm_per_rad * (out.q_target_filtered - q)
    np.testing.assert_allclose(out.tau_cmd, np.clip(spring, -1, 1), atol=1e-12)
    # staying in joint impedance does not reset; a new target continues the filter
    out2 = arm.tick(q, np.zeros(7), JointImpedanceCommand(target, cfg))
    assert out2.reset_count == 1
    np.testing.assert_allclose(out2.q_target_filtered, 0.9 * out.q_target_filtered + 0.1 * target, atol=1e-15)


def test_slew_limits_a_torque_step_to_one_newton_metre_per_tick():
    tau_prev = np.zeros((1, 7))
    step = np.array([[5.0, -5.0, 0.5, 0.0, 2.5, -0.2, 3.0]])
    seen = []
    for _ in range(6):
        tau_prev = slew_limit(step, tau_prev, 1.0)
        seen.append(tau_prev[0].copy())
    np.testing.assert_allclose(seen[0], [1, -1, 0.5, 0, 1, -0.2, 1])
    np.testing.assert_allclose(seen[2], [3, -3, 0.5, 0, 2.5, -0.2, 3])
    np.testing.assert_allclose(seen[5], step[0])
    with pytest.raises(ValueError, match="alias"):
        slew_limit(step, tau_prev, 1.0, out=tau_prev)


def test_replay_controller_slews_a_target_step_one_newton_metre_per_tick():
    from twinlake.sim.replay.reference import TickController

    n = 5
    k = np.full(7, 100.0)
    inp = ReplayInput(controller="joint_impedance", q0=HOME_Q, dq0=np.zeros(7), tau_prev0=np.full(7, 0.5),
                      tau_history=np.zeros((0, 7)), sample_ticks=np.arange(n), n_ticks=n,
                      q_target=np.tile(HOME_Q + 0.03, (n, 1)), use_ema=False, k_nm_per_rad=np.tile(k, (n, 1)),
                      d_nms_per_rad=np.zeros((n, 7)))
    ctrl = TickController(inp, 2)
    got = [ctrl.torque(t, np.tile(HOME_Q, (2, 1)), np.zeros((2, 7)), np.zeros((2, 7)))[:, 0].copy() for t in range(5)]
    # spring 100·0.03 = 3 N·m from τ_prev = 0.5: 1.5, 2.5, 3, 3, 3 (both candidates)
    np.testing.assert_allclose(got, np.repeat([[1.5], [2.5], [3.0], [3.0], [3.0]], 2, axis=1))


def test_repulsion_inside_the_margin_is_linear_and_capped():
    margin = 0.1 * (Q_MAX - Q_MIN)
    q = (0.5 * (Q_MIN + Q_MAX))[None].copy()
    np.testing.assert_array_equal(joint_limit_repulsion(q), 0.0)
    depth = 0.3
    q_up = (Q_MAX - margin + depth * margin)[None]
    np.testing.assert_allclose(joint_limit_repulsion(q_up), -10.0 * depth)
    q_low = (Q_MIN + margin - depth * margin)[None]
    np.testing.assert_allclose(joint_limit_repulsion(q_low), +10.0 * depth)
    beyond = (Q_MAX + 0.5)[None]
    np.testing.assert_allclose(joint_limit_repulsion(beyond), -10.0)
    # J4 hand value: range 2.8903, margin 0.28903, upper −0.44083; q = −0.4 → −10·0.04083/0.28903
    q4 = q.copy()
    q4[0, 3] = -0.4
    assert joint_limit_repulsion(q4)[0, 3] == pytest.approx(-10 * (-0.4 + 0.44083) / 0.28903, rel=1e-9)


def test_joint_law_and_friction_compensation_by_hand():
    q = (0.5 * (Q_MIN + Q_MAX))[None]  # mid-range: no repulsion
    dq = np.full((1, 7), 0.02)
    spring = q + 0.05
    k, d = np.arange(1.0, 8.0), np.full(7, 2.0)
    cor = np.full((1, 7), 0.3)
    tau = joint_impedance_torque(q, dq, spring, k, d, cor, use_friction=False)
    np.testing.assert_allclose(tau[0], k * 0.05 - 2.0 * 0.02 + 0.3, atol=1e-12)
    tau_f = joint_impedance_torque(q, dq, spring, k, d, cor, use_friction=True)
    fp1 = np.array([0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.2])
    np.testing.assert_allclose((tau_f - tau)[0], fp1 * np.tanh(50 * 0.02) + 0.05 * 0.02, atol=1e-12)
    np.testing.assert_allclose(friction_compensation(-dq)[0], -(fp1 * np.tanh(1.0) + 0.001), atol=1e-12)


def test_coriolis_term_is_mujocos_bias_without_gravity(model):
    data = mujoco.MjData(model)
    rng = np.random.default_rng(1)
    q, dq = HOME_Q + rng.uniform(-0.3, 0.3, 7), rng.uniform(-1.5, 1.5, 7)
    data.qpos[:], data.qvel[:] = q, dq
    mujoco.mj_forward(model, data)
    rne = np.zeros(7)
    mujoco.mj_rne(model, data, 0, rne)
    arm = SimFR3(DynamicsParams.nominal(), model=model)
    cor = arm.coriolis(q, dq)
    np.testing.assert_allclose(cor, rne, atol=1e-12)
    assert np.abs(cor).max() > 0.05  # velocity-dependent, not a gravity leftover
    np.testing.assert_allclose(arm.coriolis(q, np.zeros(7)), 0.0, atol=1e-12)
    np.testing.assert_allclose(arm.coriolis(q, 2 * dq), 4 * cor, rtol=1e-9, atol=1e-12)  # quadratic in dq


def test_orientation_error_is_two_vec_with_shortest_path_sign():
    angle = 0.2
    q_des = np.array([0.0, 0.0, np.sin(angle / 2), np.cos(angle / 2)])
    ident = np.array([0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(orientation_error(q_des, ident), [0, 0, 2 * np.sin(angle / 2)])
    np.testing.assert_allclose(orientation_error(-q_des, ident), [0, 0, 2 * np.sin(angle / 2)])
    big = 2 * np.pi - 0.3  # a 330° rotation about z is a −30° error
    q_big = np.array([0.0, 0.0, np.sin(big / 2), np.cos(big / 2)])
    assert orientation_error(q_big, ident)[2] == pytest.approx(-2 * np.sin(0.15))


def test_jacobian_and_quaternion_match_mujoco(model):
    data = mujoco.MjData(model)
    data.qpos[:] = HOME_Q + np.linspace(-0.2, 0.2, 7)
    mujoco.mj_forward(model, data)
    site = model.site("ee").id
    jacp, jacr = np.zeros((3, 7)), np.zeros((3, 7))
    mujoco.mj_jacSite(model, data, jacp, jacr, site)
    jac = site_jacobian(data.xanchor[None], data.xaxis[None], data.site_xpos[site][None])[0]
    np.testing.assert_allclose(jac[:3], jacp, atol=1e-12)
    np.testing.assert_allclose(jac[3:], jacr, atol=1e-12)
    quat_wxyz = np.zeros(4)
    mujoco.mju_mat2Quat(quat_wxyz, data.site_xmat[site])
    quat = mat_to_quat_xyzw(data.site_xmat[site][None])[0]
    expected = np.roll(quat_wxyz, -1) * np.sign(quat_wxyz[0])
    np.testing.assert_allclose(quat, expected, atol=1e-12)


def test_cartesian_clamp_then_800_nm_per_s_slew():
    tau = np.array([[100.0, -100.0, 1.0, 0.0, 20.0, -20.0, 0.3]])
    out = cartesian_clamp_and_slew(tau, np.zeros((1, 7)), 800.0)
    np.testing.assert_allclose(out, [[0.8, -0.8, 0.8, 0.0, 0.8, -0.8, 0.3]])
    np.testing.assert_allclose(cartesian_clamp_and_slew(tau, np.zeros((1, 7)), 0.0), [[87, -87, 1, 0, 12, -12, 0.3]])
