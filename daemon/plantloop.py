"""One tick of the simulated robot as the daemon and the offline recorder both run it.

`RobotTicker` wraps `twinlake.sim.SimFR3` with measurement noise and fills a CSV v2 frame:
measure (true state + noise) → `SimFR3.tick` (pending command, EMA, torque, slew) →
`physics_step` → frame. The EE pose is the flange pose at the tick's true state, read from
the plant's position stage of this step (computed before integration), so it costs nothing.
"""

from __future__ import annotations

import mujoco
import numpy as np

from twinlake.sim import DynamicsParams, IdleCommand, JointImpedanceCommand, JointImpedanceConfig, SimFR3

from . import csv_v2 as C
from .noise import NoiseConfig, NoiseSource
from .wire import CONTROLLER_IDLE, CONTROLLER_JOINT, DecodedCommand
from .wire import IdleCommand as WireIdle
from .wire import JointImpedanceCommand as WireJoint

TICK_S = 0.001


def quat_xyzw_from_mat(mat: np.ndarray) -> np.ndarray:
    """A rotation matrix (9,) or (3, 3) → unit quaternion (4,) xyzw with w ≥ 0."""
    wxyz = np.empty(4)
    mujoco.mju_mat2Quat(wxyz, np.ascontiguousarray(mat, dtype=np.float64).reshape(9))
    if wxyz[0] < 0:
        wxyz = -wxyz
    return wxyz[[1, 2, 3, 0]]


def to_sim_command(cmd: DecodedCommand):
    """A decoded wire command → the sim's command object (None for controllers we lack)."""
    if cmd.controller == CONTROLLER_JOINT and isinstance(cmd.config, WireJoint):
        c = cmd.config
        return JointImpedanceCommand(c.q_target, JointImpedanceConfig(c.k_joint, c.d_joint, c.filter_alpha,
                                                                      c.use_friction))
    if cmd.controller == CONTROLLER_IDLE and isinstance(cmd.config, WireIdle):
        return IdleCommand(cmd.config.use_friction)
    return None


class RobotTicker:
    """The plant (true params) + controller + noise; `step(command)` fills `self.frame`."""

    def __init__(self, params: DynamicsParams, noise: NoiseConfig, seed: int, q0=None) -> None:
        self.sim = SimFR3(params, q0=q0)
        self.noise = NoiseSource(noise, seed)
        self.frame = C.empty_frames(1)[0]
        self.tick_index = 0
        self.q_meas = self.sim.q
        self.dq_meas = self.sim.dq
        self.out = None
        self._data = self.sim.plant.data
        self._site = self.sim.plant.arm.ee_site

    def measure(self) -> None:
        """Sample this tick's measured q, dq, tau_J (true state + noise)."""
        nq, ndq, ntau = self.noise.next()
        self.q_meas = self.sim.q + nq
        self.dq_meas = self.sim.dq + ndq
        self.tau_j_meas = self.sim.tau_J() + ntau

    def step(self, command=None, control_period_s: float = TICK_S) -> np.ndarray:
        """Run one 1 ms tick with an optional sim command; returns the frame (seq/t_s unset)."""
        self.measure()
        out = self.sim.tick(self.q_meas, self.dq_meas, command)
        self.sim.physics_step()
        self.out = out
        f = self.frame
        f[C.Q] = self.q_meas
        f[C.DQ] = self.dq_meas
        f[C.TAU_J] = self.tau_j_meas
        f[C.TAU_CMD] = out.tau_cmd
        f[C.EE_POSE.start:C.EE_POSE.start + 3] = self._data.site_xpos[self._site]
        f[C.EE_POSE.start + 3:C.EE_POSE.stop] = quat_xyzw_from_mat(self._data.site_xmat[self._site])
        f[C.CONTROLLER] = out.controller
        f[C.JOINT_TARGET_VALID] = out.joint_target_valid
        f[C.Q_TARGET] = out.q_target
        f[C.Q_TARGET_FILTERED] = out.q_target_filtered
        f[C.K_JOINT] = out.k_nm_per_rad
        f[C.D_JOINT] = out.d_nms_per_rad
        f[C.FILTER_ALPHA] = out.filter_alpha
        f[C.JOINT_USE_FRICTION] = int(out.use_friction)
        f[C.JOINT_RESET_COUNT] = out.reset_count
        f[C.ROBOT_TIME_S] = self.tick_index * TICK_S
        f[C.CONTROL_PERIOD_S] = control_period_s
        self.tick_index += 1
        return f

    @property
    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """EE position [m] (3,) and quaternion xyzw (4,) of the last frame."""
        f = self.frame
        return f[C.EE_POSE.start:C.EE_POSE.start + 3].copy(), f[C.EE_POSE.start + 3:C.EE_POSE.stop].copy()
