"""Replay: the per-tick controller shared by both engines, and the reference engine.

The reference engine (one model, one MjData, a plain loop per candidate) is the definition
of correct; population.PopulationEngine must agree with it. Sim state is never overwritten
with recorded data: the recording provides only the initial state and the targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np

from ..arm_model.controllers import (
    cartesian_clamp_and_slew,
    cartesian_impedance_torque,
    mat_to_quat_xyzw,
    site_jacobian,
)
from ..kernels.tick import population_control
from ..arm_model.model import load_model
from ..arm_model.params import DynamicsParams
from ..arm_model.plant import Plant
from .replay_input import CARTESIAN_IMPEDANCE, ReplayInput


# warnings after which MuJoCo resets a simulation (non-finite or huge qpos/qvel/qacc)
_INSTABILITY = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC)


@dataclass
class ReplayResult:
    """One candidate's replay at the input's samples (S rows).

    q [rad], dq [rad/s], tau_cmd [N·m] (S, 7); flange pose ee_pos [m] (S, 3), ee_quat_xyzw (S, 4);
    flange twist ee_linvel [m/s], ee_angvel [rad/s] (S, 3), base frame. If the simulation went
    unstable (MuJoCo reset it), q, dq and tau_cmd are NaN.
    """

    q: np.ndarray
    dq: np.ndarray
    tau_cmd: np.ndarray
    ee_pos: np.ndarray
    ee_quat_xyzw: np.ndarray
    ee_linvel: np.ndarray
    ee_angvel: np.ndarray


@dataclass
class Kinematics:
    """Arm kinematics at the current state for a population: site pos (P,3), site xmat (P,9),
    joint anchors (P,7,3) and axes (P,7,3)."""

    site_pos: np.ndarray
    site_xmat: np.ndarray
    xanchor: np.ndarray
    xaxis: np.ndarray


def joint_tick_table(inp: ReplayInput) -> np.ndarray:
    """Per-tick joint-impedance inputs of `inp` as one (T, 30) array, the row layout of
    kernels.population_control: [1 − α, use_friction, α·q_target (7), q_target (7), K (7), D (7)].

    1 − α and α·q_target are the products SimFR3 forms once per command, so the replay's EMA
    and the daemon's agree bit for bit.
    """
    alpha = np.asarray(inp.filter_alpha, dtype=np.float64)
    q_target = np.asarray(inp.q_target, dtype=np.float64)
    table = np.empty((inp.n_ticks, 30))
    table[:, 0] = 1.0 - alpha
    table[:, 1] = np.asarray(inp.use_friction, dtype=bool)
    np.multiply(q_target, alpha[:, None], out=table[:, 2:9])
    table[:, 9:16] = q_target
    table[:, 16:23] = inp.k_nm_per_rad
    table[:, 23:30] = inp.d_nms_per_rad
    return table


class TickController:
    """The controller of one ReplayInput for a population of P candidates (state: EMA, τ_prev)."""

    def __init__(self, inp: ReplayInput, population: int):
        self.inp = inp
        self.tau_prev = np.tile(np.asarray(inp.tau_prev0, dtype=np.float64), (population, 1))
        if inp.controller != CARTESIAN_IMPEDANCE:
            # the EMA is the same for every candidate (it sees only the targets): one (7,) state
            self.ema = np.asarray(inp.ema0 if inp.ema0 is not None else inp.q0, dtype=np.float64).copy()
            self.table = joint_tick_table(inp)
            self.torque = self._joint_torque
        self._gains = inp.cartesian.resolved()
        self._hold_pos: np.ndarray | None = None
        self._hold_quat: np.ndarray | None = None

    @property
    def needs_kinematics(self) -> bool:
        return self.inp.controller == CARTESIAN_IMPEDANCE

    def torque(self, k: int, q: np.ndarray, dq: np.ndarray, coriolis: np.ndarray,
               kin: Kinematics | None = None) -> np.ndarray:
        """Commanded torque of tick k after the slew limiter, (P, 7); updates EMA and τ_prev.

        q, dq, coriolis (P, 7); kin is needed by the Cartesian law only.
        """
        return self._cartesian(k, dq, coriolis, kin)

    def _joint_torque(self, k: int, q: np.ndarray, dq: np.ndarray, coriolis: np.ndarray,
                      kin: Kinematics | None = None) -> np.ndarray:
        population_control(k, q, dq, coriolis, self.table, bool(self.inp.use_ema), self.ema, self.tau_prev)
        return self.tau_prev

    def _cartesian(self, k: int, dq: np.ndarray, coriolis: np.ndarray, kin: Kinematics) -> np.ndarray:
        inp = self.inp
        quat = mat_to_quat_xyzw(kin.site_xmat)
        if self._hold_pos is None:  # initial pose, held during warm-up
            self._hold_pos, self._hold_quat = kin.site_pos.copy(), quat.copy()
        if k < inp.warmup_ticks:
            tpos, tquat = self._hold_pos, self._hold_quat
        else:
            tpos, tquat = inp.target_pos[k], inp.target_quat_xyzw[k]
        jac = site_jacobian(kin.xanchor, kin.xaxis, kin.site_pos)
        tau = cartesian_impedance_torque(jac, dq, kin.site_pos, quat, tpos, tquat, self._gains,
                                         coriolis if inp.cartesian.use_coriolis else None)
        self.tau_prev = cartesian_clamp_and_slew(tau, self.tau_prev, inp.cartesian.max_torque_rate_nm_s)
        return self.tau_prev


def _plant_kinematics(plant: Plant) -> Kinematics:
    d, arm = plant.data, plant.arm
    return Kinematics(
        site_pos=d.site_xpos[arm.ee_site][None].copy(),
        site_xmat=d.site_xmat[arm.ee_site][None].copy(),
        xanchor=d.xanchor[arm.jnt_ids][None].copy(),
        xaxis=d.xaxis[arm.jnt_ids][None].copy(),
    )


def replay_reference(inp: ReplayInput, params: DynamicsParams, model: mujoco.MjModel | None = None,
                     progress: Callable[[int], None] | None = None, friction_law: str = "stribeck") -> ReplayResult:
    """Replay one interval with one parameter set in a plain MjModel/MjData loop.

    friction_law: the plant's friction law (plant.FRICTION_LAWS).
    progress: called with the number of ticks done, every 1000 ticks and at the end.
    """
    model = load_model() if model is None else model
    plant = Plant(model, params, inp.q0, inp.dq0, inp.tau_prev0, inp.tau_history, inp.configured_load, friction_law)
    ctrl = TickController(inp, 1)
    n_s = inp.n_samples
    widths = (("q", 7), ("dq", 7), ("tau_cmd", 7), ("ee_pos", 3), ("ee_quat_xyzw", 4), ("ee_linvel", 3), ("ee_angvel", 3))
    out = {name: np.empty((n_s, w)) for name, w in widths}
    is_sample = np.zeros(inp.n_ticks, dtype=bool)
    is_sample[inp.sample_ticks] = True
    s = 0
    for k in range(inp.n_ticks):
        plant.begin_tick()
        q, dq = plant.q[None], plant.dq[None]
        kin = _plant_kinematics(plant) if (ctrl.needs_kinematics or is_sample[k]) else None
        tau = ctrl.torque(k, q, dq, plant.coriolis()[None], kin)
        if is_sample[k]:
            out["q"][s], out["dq"][s], out["tau_cmd"][s] = q[0], dq[0], tau[0]
            out["ee_pos"][s] = kin.site_pos[0]
            out["ee_quat_xyzw"][s] = mat_to_quat_xyzw(kin.site_xmat)[0]
            twist = site_jacobian(kin.xanchor, kin.xaxis, kin.site_pos)[0] @ dq[0]
            out["ee_linvel"][s], out["ee_angvel"][s] = twist[:3], twist[3:]
            s += 1
        plant.end_tick(tau[0])
        if progress is not None and (k + 1) % 1000 == 0:
            progress(k + 1)
    if progress is not None:
        progress(inp.n_ticks)
    if any(plant.data.warning[w].number > 0 for w in _INSTABILITY):  # MuJoCo reset the simulation
        for name in ("q", "dq", "tau_cmd"):
            out[name][:] = np.nan
    return ReplayResult(**out)


__all__ = ["Kinematics", "ReplayResult", "TickController", "joint_tick_table", "replay_reference"]
