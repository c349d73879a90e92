"""PopulationEngine: many candidate parameter sets replayed at once with `mujoco.batch`.

One persistent Batch of P simulations (P = population size) runs on a thread pool; per-
candidate model fields (armature, damping, Coulomb level) are `expand`-ed; the controller is
computed once per tick for the whole population in numpy with preallocated arrays. Each tick:
read qpos/qvel/qfrc_bias (current: every step ends with the position/velocity stages),
controller → delay line → qfrc_applied, Coulomb level from this tick's dq, `batch.step(stage=mjSTAGE_VEL)`.
The arithmetic is the reference engine's, so both agree to round-off (in practice bit for bit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco.batch import Batch

from .controllers import mat_to_quat_xyzw
from .model import arm_index, load_model
from .params import params_matrix
from .plant import DelayLine, coulomb_level
from .replay import Kinematics, TickController
from .replay_input import ReplayInput

_VEL = mujoco.mjtStage.mjSTAGE_VEL.value


@dataclass
class PopulationResult:
    """One input's replay for P candidates at its S samples: q, dq (P, S, 7); EE (P, S, 3|4) or None."""

    q: np.ndarray
    dq: np.ndarray
    ee_pos: np.ndarray | None = None
    ee_quat_xyzw: np.ndarray | None = None


class PopulationEngine:
    """Replays `inputs` for a population of parameter sets; reusable across generations.

    model: an MjModel from load_model (ours if None); nthread: batch threads (default: CPUs);
    record_ee: also return EE pose per sample (costs a little per tick).
    """

    def __init__(self, inputs: list[ReplayInput], model: mujoco.MjModel | None = None,
                 nthread: int | None = None, record_ee: bool = False):
        self.inputs = list(inputs)
        self.model = load_model() if model is None else model
        self.arm = arm_index(self.model)
        self.nthread = os.cpu_count() or 1 if nthread is None else int(nthread)
        self.record_ee = record_ee
        self.need_kin = record_ee or any(i.controller != "joint_impedance" for i in self.inputs)
        self._batch: Batch | None = None
        self._population = 0
        contiguous = np.array_equal(self.arm.dof_adr, np.arange(self.arm.dof_adr[0], self.arm.dof_adr[0] + 7))
        d0 = int(self.arm.dof_adr[0])
        self._dofs = slice(d0, d0 + 7) if contiguous else self.arm.dof_adr
        q0 = int(self.arm.qpos_adr[0])
        same = np.array_equal(self.arm.qpos_adr, np.arange(q0, q0 + 7))
        self._qpos = slice(q0, q0 + 7) if same else self.arm.qpos_adr

    def _ensure_batch(self, population: int) -> Batch:
        if self._batch is not None and self._population == population:
            return self._batch
        batch = Batch(self.model, nsim=population, nthread=self.nthread, persistent=True)
        self._fields = {
            "qpos": batch.bind("qpos"), "qvel": batch.bind("qvel"),
            "qfrc_applied": batch.bind("qfrc_applied"), "qfrc_bias": batch.bind("qfrc_bias"),
            "qacc_warmstart": batch.bind("qacc_warmstart"),
            "armature": batch.expand("dof_armature"), "damping": batch.expand("dof_damping"),
            "frictionloss": batch.expand("dof_frictionloss"),
        }
        if self.need_kin:
            for name in ("site_xpos", "site_xmat", "xanchor", "xaxis"):
                self._fields[name] = batch.bind(name)
        self._batch, self._population = batch, population
        return batch

    def run(self, params) -> list[PopulationResult]:
        """Replay every input for params (P, 29) (or DynamicsParams list); one result per input."""
        matrix = params_matrix(params)
        batch = self._ensure_batch(matrix.shape[0])
        f = self._fields
        f["armature"][:, self._dofs] = matrix[:, 0:7]
        f["damping"][:, self._dofs] = matrix[:, 21:28]
        batch.set_const()
        return [self._run_one(inp, matrix) for inp in self.inputs]

    def _kinematics(self) -> Kinematics:
        f, arm = self._fields, self.arm
        return Kinematics(
            site_pos=f["site_xpos"][:, arm.ee_site], site_xmat=f["site_xmat"][:, arm.ee_site],
            xanchor=f["xanchor"][:, arm.jnt_ids], xaxis=f["xaxis"][:, arm.jnt_ids],
        )

    def _reset(self, inp: ReplayInput, mu_s: np.ndarray, mu_d: np.ndarray) -> None:
        batch, f = self._batch, self._fields
        batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        f["qpos"][:, self._qpos] = inp.q0
        f["qvel"][:, self._dofs] = inp.dq0
        f["frictionloss"][:, self._dofs] = coulomb_level(mu_s, mu_d, np.asarray(inp.dq0)[None])
        batch.forward(stage=_VEL)

    def _run_one(self, inp: ReplayInput, matrix: np.ndarray) -> PopulationResult:
        population = matrix.shape[0]
        mu_s = matrix[:, 7:14].copy()
        mu_d = matrix[:, 14:21] * mu_s
        delays = np.clip(np.rint(matrix[:, 28]), 0, 4).astype(np.int64)
        self._reset(inp, mu_s, mu_d)
        batch, f, dofs = self._batch, self._fields, self._dofs
        ctrl = TickController(inp, population)
        delay = DelayLine(delays, inp.tau_prev0, inp.tau_history)
        n_s = inp.n_samples
        q_out, dq_out = np.empty((population, n_s, 7)), np.empty((population, n_s, 7))
        ee_pos = np.empty((population, n_s, 3)) if self.record_ee else None
        ee_mat = np.empty((population, n_s, 9)) if self.record_ee else None
        is_sample = np.zeros(inp.n_ticks, dtype=bool)
        is_sample[inp.sample_ticks] = True
        qpos, qvel, bias = f["qpos"], f["qvel"], f["qfrc_bias"]
        applied, floss = f["qfrc_applied"], f["frictionloss"]
        q, dq, cor, level = (np.empty((population, 7)) for _ in range(4))
        s = 0
        for k in range(inp.n_ticks):
            np.copyto(q, qpos[:, self._qpos])
            np.copyto(dq, qvel[:, dofs])
            np.copyto(cor, bias[:, dofs])
            kin = self._kinematics() if self.need_kin else None
            tau = ctrl.torque(k, q, dq, cor, kin)
            if is_sample[k]:
                q_out[:, s], dq_out[:, s] = q, dq
                if ee_pos is not None:
                    ee_pos[:, s], ee_mat[:, s] = kin.site_pos, kin.site_xmat
                s += 1
            applied[:, dofs] = delay.push(tau)
            floss[:, dofs] = coulomb_level(mu_s, mu_d, dq, out=level)
            batch.step(stage=_VEL)
        quat = mat_to_quat_xyzw(ee_mat) if ee_mat is not None else None
        return PopulationResult(q=q_out, dq=dq_out, ee_pos=ee_pos, ee_quat_xyzw=quat)


__all__ = ["PopulationEngine", "PopulationResult"]
