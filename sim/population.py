"""PopulationEngine: many candidate parameter sets replayed at once with `mujoco.batch`.

The population is split into `nthread` shards; each is a persistent single-threaded
`mujoco.batch.Batch` over its share of the candidates, driven by its own worker thread (the
batch step releases the GIL). Shards never wait for each other per tick: one Batch with
nthread threads synchronises its threads 1000 times per simulated second, and on a loaded
machine one descheduled thread stalls all of them (measured 1.4× slower than shards on the
shared 2-core machine). Per-candidate model fields (armature, damping,
breakaway level) are `expand`-ed once per generation and never written during a replay; the
controller runs once per tick for the whole population in numpy with preallocated arrays.
Each tick: read qpos/qvel/qfrc_bias (current: every step ends with the position/velocity
stages), controller → delay line → qfrc_applied (+ the sliding-friction relief of plant.py),
`batch.step(stage=mjSTAGE_VEL)`. The arithmetic is the reference
engine's, so both agree to round-off (in practice bit for bit).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco.batch import Batch

from .controllers import mat_to_quat_xyzw
from .model import ArmIndex, arm_index, load_model
from .params import delay_ticks, params_matrix
from .plant import DelayLine, StribeckFriction, dof_span
from .replay import Kinematics, TickController
from .replay_input import JOINT_IMPEDANCE, ReplayInput

_VEL = mujoco.mjtStage.mjSTAGE_VEL.value
_NONE = mujoco.mjtStage.mjSTAGE_NONE.value
# warnings after which MuJoCo resets a simulation (non-finite or huge qpos/qvel/qacc)
_INSTABILITY = [int(w) for w in (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
                                 mujoco.mjtWarning.mjWARN_BADQACC)]


@dataclass
class PopulationResult:
    """One input's replay for P candidates at its S samples: q, dq, tau_cmd (P, S, 7); EE (P, S, 3|4) or None.

    A candidate whose simulation went unstable (MuJoCo reset it) has NaN in q, dq and tau_cmd.
    """

    q: np.ndarray
    dq: np.ndarray
    tau_cmd: np.ndarray
    ee_pos: np.ndarray | None = None
    ee_quat_xyzw: np.ndarray | None = None


class _Shard:
    """One persistent Batch over a slice of the population, with its bound fields."""

    def __init__(self, model: mujoco.MjModel, arm: ArmIndex, size: int, need_kin: bool, nthread: int):
        self.arm, self.size = arm, size
        self.batch = Batch(model, nsim=size, nthread=nthread, persistent=True)
        b = self.batch
        self.f = {
            "qpos": b.bind("qpos"), "qvel": b.bind("qvel"),
            "qfrc_applied": b.bind("qfrc_applied"), "qfrc_bias": b.bind("qfrc_bias"),
            "armature": b.expand("dof_armature"), "damping": b.expand("dof_damping"),
            "frictionloss": b.expand("dof_frictionloss"),
        }
        if need_kin:
            for name in ("site_xpos", "site_xmat", "xanchor", "xaxis"):
                self.f[name] = b.bind(name)
        self.need_kin = need_kin
        self.dofs, self.qadr = dof_span(arm.dof_adr), dof_span(arm.qpos_adr)

    def set_params(self, matrix: np.ndarray) -> None:
        self.f["armature"][:, self.dofs] = matrix[:, 0:7]
        self.f["damping"][:, self.dofs] = matrix[:, 21:28]
        self.f["frictionloss"][:, self.dofs] = matrix[:, 7:14]
        self.batch.set_const()
        self.matrix = matrix

    def kinematics(self) -> Kinematics:
        f, arm = self.f, self.arm
        return Kinematics(site_pos=f["site_xpos"][:, arm.ee_site], site_xmat=f["site_xmat"][:, arm.ee_site],
                          xanchor=f["xanchor"][:, arm.jnt_ids], xaxis=f["xaxis"][:, arm.jnt_ids])

    def reset(self, inp: ReplayInput) -> None:
        f = self.f
        self.batch.reset(stage=_NONE)
        f["qpos"][:, self.qadr] = inp.q0
        f["qvel"][:, self.dofs] = inp.dq0
        self.batch.forward(stage=_VEL)

    def run(self, inp: ReplayInput, out: dict, rows: slice, record_ee: bool) -> None:
        """Replay `inp` for this shard's candidates, writing into out[name][rows]."""
        m, size, f, dofs = self.matrix, self.size, self.f, self.dofs
        friction = StribeckFriction(m[:, 7:14], m[:, 14:21] * m[:, 7:14])
        relief = np.empty((size, 7))
        self.reset(inp)
        ctrl = TickController(inp, size)
        delay = DelayLine(delay_ticks(m[:, 28]), inp.tau_prev0, inp.tau_history)
        n_s = inp.n_samples
        # time-major buffers: each tick writes contiguous rows; transposed into `out` at the end
        q_buf, dq_buf, tau_buf = (np.empty((n_s, size, 7)) for _ in range(3))
        is_sample = np.zeros(inp.n_ticks, dtype=bool)
        is_sample[inp.sample_ticks] = True
        is_sample = is_sample.tolist()
        qpos, qvel, bias = f["qpos"], f["qvel"], f["qfrc_bias"]
        applied, step, qadr, need_kin = f["qfrc_applied"], self.batch.step, self.qadr, self.need_kin
        applied_view = applied[:, dofs] if isinstance(dofs, slice) else None
        torque, sliding_relief, push = ctrl.torque, friction.sliding_relief, delay.push
        s = 0
        # contiguous addresses: live views of the state rows and of the bias output (bound
        # arrays never move); otherwise copies, taken every tick
        live = isinstance(qadr, slice) and isinstance(dofs, slice)
        q, dq, cor = qpos[:, qadr], qvel[:, dofs], bias[:, dofs]
        for k in range(inp.n_ticks):
            if not live:
                q, dq, cor = qpos[:, qadr], qvel[:, dofs], bias[:, dofs]
            kin = self.kinematics() if need_kin else None
            tau = torque(k, q, dq, cor, kin)
            if is_sample[k]:
                q_buf[s], dq_buf[s], tau_buf[s] = q, dq, tau
                if record_ee:
                    out["ee_pos"][rows, s], out["ee_mat"][rows, s] = kin.site_pos, kin.site_xmat
                s += 1
            sliding_relief(dq, relief)
            if applied_view is not None:
                np.add(relief, push(tau), out=applied_view)  # relief + delayed, as the reference engine
            else:
                relief += push(tau)
                applied[:, dofs] = relief
            step(stage=_VEL)
        for name, buf in (("q", q_buf), ("dq", dq_buf), ("tau_cmd", tau_buf)):
            out[name][rows] = buf.transpose(1, 0, 2)
        diverged = (self.batch.warning[:, _INSTABILITY, 1] > 0).any(axis=1)
        if diverged.any():  # MuJoCo reset these simulations mid-run: their replay is invalid
            for name in ("q", "dq", "tau_cmd"):
                out[name][rows][diverged] = np.nan


class PopulationEngine:
    """Replays `inputs` for a population of parameter sets; reusable across generations.

    model: an MjModel from load_model (ours if None); nthread: worker threads (default: CPUs),
    each driving one single-threaded batch over its share of the candidates; record_ee: also
    return the EE pose per sample. Call close() (or use `with`) to stop the workers early.
    """

    def __init__(self, inputs: list[ReplayInput], model: mujoco.MjModel | None = None,
                 nthread: int | None = None, record_ee: bool = False):
        self.inputs = list(inputs)
        self.model = load_model() if model is None else model
        self.arm = arm_index(self.model)
        self.nthread = max(1, int(nthread) if nthread is not None else (os.cpu_count() or 1))
        self.record_ee = record_ee
        self.need_kin = record_ee or any(i.controller != JOINT_IMPEDANCE for i in self.inputs)
        self._shards: list[_Shard] = []
        self._rows: list[slice] = []
        self._population = 0
        self._pool: ThreadPoolExecutor | None = None

    def _ensure_shards(self, population: int) -> None:
        if self._population == population:
            return
        count = min(self.nthread, population)
        edges = np.linspace(0, population, count + 1).round().astype(int)
        self._rows = [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
        self._shards = [_Shard(self.model, self.arm, r.stop - r.start, self.need_kin, 1) for r in self._rows]
        self._population = population
        if count > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.nthread, thread_name_prefix="twinlake-sim")

    def run(self, params) -> list[PopulationResult]:
        """Replay every input for params (P, 29) (or a DynamicsParams list); one result per input."""
        matrix = params_matrix(params)
        population = matrix.shape[0]
        self._ensure_shards(population)
        outs = []
        for inp in self.inputs:
            n_s = inp.n_samples
            out = {name: np.empty((population, n_s, 7)) for name in ("q", "dq", "tau_cmd")}
            if self.record_ee:
                out["ee_pos"], out["ee_mat"] = np.empty((population, n_s, 3)), np.empty((population, n_s, 9))
            outs.append(out)

        def work(i: int) -> None:  # one shard: all inputs, no per-tick sync with other shards
            shard, rows = self._shards[i], self._rows[i]
            shard.set_params(matrix[rows])
            for inp, out in zip(self.inputs, outs):
                shard.run(inp, out, rows, self.record_ee)

        if self._pool is None or len(self._shards) == 1:
            for i in range(len(self._shards)):
                work(i)
        else:
            for future in [self._pool.submit(work, i) for i in range(len(self._shards))]:
                future.result()
        return [
            PopulationResult(q=o["q"], dq=o["dq"], tau_cmd=o["tau_cmd"], ee_pos=o.get("ee_pos"),
                             ee_quat_xyzw=mat_to_quat_xyzw(o["ee_mat"]) if self.record_ee else None)
            for o in outs
        ]

    def close(self) -> None:
        """Stop the worker threads; a later run() starts new ones."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
            self._population = 0

    def __enter__(self) -> "PopulationEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["PopulationEngine", "PopulationResult"]
