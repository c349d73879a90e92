"""The robot side of the test plant: fr3_stack's joint impedance law and the firmware's
compensation, written from fr3_stack's documented behaviour (its `controllers_common.hpp`
limits, `joint_impedance.yaml` defaults and the daemon's per-tick order), not from twinlake.

Per 1 kHz tick, from the **measured** state (q_m, q̇_m):

1. EMA of the target: `ema = (1 − α)·ema + α·q_target` (α is the weight on the new target).
2. Torque: `τ = K∘(ema − q_m) − D∘q̇_m + C(q_m, q̇_m)·q̇_m + repulsion(q_m)`, plus
   `fp1·tanh(fp2·q̇_m) + fp3·q̇_m` when friction compensation is on. No velocity
   feed-forward, no gravity (the robot adds it).
3. Slew limit: `τ_out = τ_prev + clip(τ − τ_prev, ±1 N·m)`; `τ_out` is the CSV's `tau_cmd`.

The Coriolis term C·q̇ and the gravity the robot adds on top of `tau_cmd` come from the
payload-free firmware model evaluated at the measured state (`FirmwareModel.sense`), as
`franka::Model` does for a robot whose payload was never configured.
"""

from __future__ import annotations

import mujoco
import numpy as np

from .independent import JOINTS, PlantModels

Q_MIN = np.array([-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159])
Q_MAX = np.array([2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159])
"""fr3_stack daemon joint limits [rad] (its repulsion zone uses them)."""
LIMIT_MARGIN = 0.1
LIMIT_MAX_TAU_NM = 10.0
FRICTION_FP1_NM = np.array([0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.2])
FRICTION_FP2_S_RAD = 50.0
FRICTION_FP3_NMS_RAD = 0.05
SLEW_NM_PER_TICK = 1.0
DEFAULT_KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
"""fr3_stack `joint_impedance.yaml` stiffness [N·m/rad]."""
DEFAULT_KD = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)
"""fr3_stack `joint_impedance.yaml` damping [N·m·s/rad]."""
DEFAULT_FILTER_ALPHA = 0.05


def joint_limit_repulsion_nm(q_rad: np.ndarray) -> np.ndarray:
    """±10·depth/margin inside the 10 % margin of Q_MIN/Q_MAX, capped at ±10 N·m; (7,)."""
    margin = LIMIT_MARGIN * (Q_MAX - Q_MIN)
    upper, lower = Q_MAX - margin, Q_MIN + margin
    tau = np.where(q_rad > upper, -LIMIT_MAX_TAU_NM * (q_rad - upper) / margin, 0.0)
    tau = np.where(q_rad < lower, LIMIT_MAX_TAU_NM * (lower - q_rad) / margin, tau)
    return np.clip(tau, -LIMIT_MAX_TAU_NM, LIMIT_MAX_TAU_NM)


def friction_compensation_nm(dq_rad_s: np.ndarray) -> np.ndarray:
    """fr3_stack's optional joint friction compensation from the raw measured q̇; (7,)."""
    return FRICTION_FP1_NM * np.tanh(FRICTION_FP2_S_RAD * dq_rad_s) + FRICTION_FP3_NMS_RAD * dq_rad_s


class FirmwareModel:
    """Gravity, Coriolis and the flange pose the firmware computes at the measured state,
    from the payload-free model (recursive Newton-Euler, `mj_rne`)."""

    def __init__(self, models: PlantModels) -> None:
        self.model = models.firmware
        self.data = mujoco.MjData(self.model)
        self.qpos_adr, self.dof_adr = models.qpos_adr, models.dof_adr
        self.site = models.flange_site
        self._bias = np.zeros(self.model.nv)
        self._quat_wxyz = np.zeros(4)

    def sense(self, q_meas: np.ndarray, dq_meas: np.ndarray):
        """`(gravity (7,), coriolis (7,), ee_pos (3,), ee_quat_xyzw (4,))` at (q_meas, dq_meas):
        gravity = the torque that holds the payload-free arm still [N·m]; coriolis = C·q̇ [N·m]."""
        m, d = self.model, self.data
        d.qpos[self.qpos_adr] = q_meas
        d.qvel[:] = 0.0
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        mujoco.mj_rne(m, d, 0, self._bias)
        gravity = self._bias[self.dof_adr].copy()
        d.qvel[self.dof_adr] = dq_meas
        mujoco.mj_comVel(m, d)
        mujoco.mj_rne(m, d, 0, self._bias)
        coriolis = self._bias[self.dof_adr] - gravity
        mujoco.mju_mat2Quat(self._quat_wxyz, d.site_xmat[self.site])
        w, x, y, z = self._quat_wxyz
        return gravity, coriolis, d.site_xpos[self.site].copy(), np.array([x, y, z, w])


class JointImpedanceLaw:
    """fr3_stack's joint impedance controller with its EMA and slew-limiter state.

    kp [N·m/rad], kd [N·m·s/rad]: (7,); filter_alpha: EMA weight per tick; use_friction:
    add the friction compensation. `reset(q_meas)` is the switch into joint impedance."""

    def __init__(self, kp, kd, filter_alpha: float, use_friction: bool = False) -> None:
        self.kp = _gains("kp", kp)
        self.kd = _gains("kd", kd)
        self.filter_alpha = float(filter_alpha)
        if not np.isfinite(self.filter_alpha):
            raise ValueError(f"filter_alpha: expected a finite number, got {filter_alpha!r}")
        self.use_friction = bool(use_friction)
        self.ema = np.zeros(JOINTS)
        self.tau_prev = np.zeros(JOINTS)
        self.reset_count = 0

    def reset(self, q_meas: np.ndarray) -> None:
        """Entering joint impedance: the EMA restarts at the measured q."""
        self.ema = np.array(q_meas, dtype=float)
        self.reset_count += 1

    def compute(self, q_target: np.ndarray, q_meas: np.ndarray, dq_meas: np.ndarray,
                coriolis_nm: np.ndarray) -> np.ndarray:
        """One tick: EMA, torque, slew limit. Returns τ_out (7,) [N·m] (a new array)."""
        a = self.filter_alpha
        self.ema = (1.0 - a) * self.ema + a * q_target
        tau = self.kp * (self.ema - q_meas) - self.kd * dq_meas + coriolis_nm \
            + joint_limit_repulsion_nm(q_meas)
        if self.use_friction:
            tau = tau + friction_compensation_nm(dq_meas)
        out = self.tau_prev + np.clip(tau - self.tau_prev, -SLEW_NM_PER_TICK, SLEW_NM_PER_TICK)
        self.tau_prev = out
        return out


def _gains(name: str, values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 1:
        arr = np.repeat(arr, JOINTS)
    if arr.size != JOINTS or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: expected 1 or {JOINTS} finite numbers, got {values!r}")
    return arr
