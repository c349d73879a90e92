import numpy as np
import pytest

from twinlake.sim import (
    HOME_Q,
    DynamicsParams,
    IdleCommand,
    JointImpedanceCommand,
    JointImpedanceConfig,
    SimFR3,
)


def test_mode_switches_reset_the_filter_and_count_entries():
    arm = SimFR3(DynamicsParams.nominal())
    idle = arm.tick(arm.q, arm.dq)
    assert idle.controller == 0 and idle.joint_target_valid == 0 and idle.reset_count == 0
    np.testing.assert_array_equal(idle.tau_cmd, 0.0)
    np.testing.assert_array_equal(idle.q_target_filtered, 0.0)
    cmd = JointImpedanceCommand(HOME_Q + 0.05)
    for _ in range(30):
        out = arm.tick(arm.q, arm.dq, cmd)
        arm.physics_step()
    assert out.reset_count == 1 and out.controller == 2
    arm.tick(arm.q, arm.dq, IdleCommand())
    arm.physics_step()
    q_now = arm.q
    again = arm.tick(q_now, arm.dq, JointImpedanceCommand(HOME_Q + 0.05, JointImpedanceConfig(filter_alpha=0.2)))
    assert again.reset_count == 2 and again.filter_alpha == 0.2
    np.testing.assert_allclose(again.q_target_filtered, 0.8 * q_now + 0.2 * (HOME_Q + 0.05), atol=1e-15)


def test_idle_slews_the_torque_down_and_the_arm_moves_towards_the_target():
    arm = SimFR3(DynamicsParams.nominal())
    cmd = JointImpedanceCommand(HOME_Q + np.array([0.1, -0.1, 0.1, 0.1, -0.1, 0.1, 0.1]))
    for _ in range(400):
        arm.tick(arm.q, arm.dq, cmd)
        arm.physics_step()
    moved = arm.q - HOME_Q
    assert np.all(np.sign(moved) == np.sign(cmd.q_target - HOME_Q)) and np.abs(moved).min() > 0.02
    tau = arm.tau_cmd.copy()
    out = arm.tick(arm.q, arm.dq, IdleCommand())
    np.testing.assert_allclose(out.tau_cmd, tau - np.clip(tau, -1, 1), atol=1e-12)


def test_commanded_torque_reaches_the_links_after_the_delay():
    params = DynamicsParams.nominal()
    params.mu_static[:] = 0.0
    params.mu_viscous[:] = 0.0
    params.motor_delay_ms = 3
    arm = SimFR3(params)
    cmd = JointImpedanceCommand(HOME_Q + 0.2)
    seen = []
    for _ in range(6):
        out = arm.tick(arm.q, arm.dq, cmd)
        arm.physics_step()
        seen.append((out.tau_cmd.copy(), arm.tau_J().copy()))
    for k in range(3):
        np.testing.assert_allclose(seen[k][1], 0.0, atol=1e-12)  # nothing applied yet
    for k in range(3, 6):
        np.testing.assert_allclose(seen[k][1], seen[k - 3][0], atol=1e-9)  # frictionless: tau_J = delayed tau_cmd


def test_ee_pose_and_bad_commands():
    arm = SimFR3(DynamicsParams.nominal())
    pos, quat = arm.ee_pose()
    assert pos[0] == pytest.approx(0.5545, abs=1e-3) and np.linalg.norm(quat) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="qTarget: expected length 7, got 6"):
        JointImpedanceCommand(np.zeros(6))
    with pytest.raises(ValueError, match="k_nm_per_rad: expected 7 values"):
        JointImpedanceConfig(k_nm_per_rad=[1, 2, 3])
