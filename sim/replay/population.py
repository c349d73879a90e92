"""PopulationEngine: many candidate parameter sets replayed at once with `mujoco.batch`.

The population is split into `nthread` shards; each is a persistent single-threaded
`mujoco.batch.Batch` over its share of the candidates, driven by its own worker thread (the
batch step releases the GIL). Shards never wait for each other: one Batch with nthread
threads synchronises its threads at every call, and on a loaded machine one descheduled
thread stalls all of them (measured 1.4× slower than shards on the shared 2-core machine).
Per-candidate model fields (armature, damping, breakaway level, and the payload body's mass,
centre of mass and inertia) are `expand`-ed once per generation and never written during a
replay. The loads' gravity torque (true payload − the input's configured load) is added to
qfrc_applied in either loop only for candidates that carry a load (kernels.add_load_torque);
the Coriolis feed-forward is the firmware's where the loads differ (load_dynamics.py).

Two loops, chosen per replay in one place (PopulationShard._replay):
- compiled (the default where callback.compiled_loop_error(model) is None): the tick, under
  either law, is MuJoCo's control callback (callback.py), so one `batch.step(nstep=T)`
  replays the whole interval per candidate with no Python between ticks;
- generic (any model, when another mjcb_control is installed, and for replays that record
  the EE pose): per tick the controller on views of qpos/qvel/qfrc_bias (replay's
  TickController: the joint law's compiled kernel, or the Cartesian law in numpy), the
  sample, the delay line and sliding-friction relief into qfrc_applied, then
  `batch.step(stage=mjSTAGE_VEL)`.
Both sum a fit's errors tick by tick in the same order. Joint impedance agrees with the
reference engine (replay.replay_reference, the definition of correct) bit for bit in both
loops; the compiled Cartesian law agrees with the numpy one to round-off (≤ 1e-9 rad tested).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass

import mujoco
import numpy as np

from ..arm_model.controllers import mat_to_quat_xyzw
from ..arm_model.model import arm_index, load_model
from ..arm_model.params import params_matrix
from ..arm_model.plant import friction_law_id
from ..kernels import callback
from .reference import joint_tick_table
from .controller_noise import ControllerNoise
from .replay_input import JOINT_IMPEDANCE, ReplayInput
from .shard import PopulationShard

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


class PopulationEngine:
    """Replays `inputs` for a population of parameter sets; reusable across generations.

    model: an MjModel from load_model (ours if None); nthread: worker threads (default: CPUs),
    each driving one single-threaded batch over its share of the candidates; record_ee: also
    return the EE pose per sample; compiled_loop: run replays through the control callback
    when the model allows (`compiled_loop_error` says why not), False for the generic loop;
    friction_law: the plant's friction law for every candidate (plant.FRICTION_LAWS).
    Call close() (or use `with`) to stop the workers early.
    """

    def __init__(self, inputs: list[ReplayInput], model: mujoco.MjModel | None = None,
                 nthread: int | None = None, record_ee: bool = False, compiled_loop: bool = True,
                 friction_law: str = "stribeck"):
        friction_law_id(friction_law)  # a clear error for an unknown law, before any work
        self.friction_law = friction_law
        self.inputs = list(inputs)
        self.model = load_model() if model is None else model
        self.arm = arm_index(self.model)
        self.nthread = max(1, int(nthread) if nthread is not None else (os.cpu_count() or 1))
        self.record_ee = record_ee
        self.need_kin = record_ee or any(i.controller != JOINT_IMPEDANCE for i in self.inputs)
        self._shards: list[PopulationShard] = []
        self._rows: list[slice] = []
        self._population = 0
        self._pool: ThreadPoolExecutor | None = None
        self._joint_tables: list[np.ndarray | None] | None = None
        self.compiled_loop_error = callback.compiled_loop_error(self.model) if compiled_loop else "turned off"

    def _ensure_shards(self, population: int) -> None:
        if self._population == population:
            return
        count = min(self.nthread, population)
        edges = np.linspace(0, population, count + 1).round().astype(int)
        self._rows = [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
        self._shards = [PopulationShard(self.model, self.arm, r.stop - r.start, self.need_kin, 1, self.friction_law)
                        for r in self._rows]
        self._population = population
        if count > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.nthread, thread_name_prefix="twinlake-sim")

    def _fan_out(self, matrix: np.ndarray, work) -> None:
        """Call work(shard, rows) for every shard (its parameters set), on the worker threads."""
        self._ensure_shards(matrix.shape[0])

        def one(i: int) -> None:  # one shard: all inputs, no per-tick sync with other shards
            shard, rows = self._shards[i], self._rows[i]
            shard.set_params(matrix[rows])
            work(shard, rows)

        wanted = self.compiled_loop_error is None
        with callback.installed() if wanted else nullcontext(False) as compiled:
            for shard in self._shards:
                shard.use_callback = compiled
            if self._pool is None or len(self._shards) == 1:
                for i in range(len(self._shards)):
                    one(i)
            else:
                for future in [self._pool.submit(one, i) for i in range(len(self._shards))]:
                    future.result()

    def _tables(self) -> list[np.ndarray | None]:
        if self._joint_tables is None:
            self._joint_tables = [joint_tick_table(i) if i.controller == JOINT_IMPEDANCE else None for i in self.inputs]
        return self._joint_tables

    def run(self, params, noise: ControllerNoise | None = None) -> list[PopulationResult]:
        """Replay every input for params (P, N) (or a DynamicsParams list); one result per input.
        `noise`: the joint law reads each candidate's seeded measurement noise (one seed per row)."""
        matrix = params_matrix(params)
        population = matrix.shape[0]
        outs = []
        for inp in self.inputs:
            n_s = inp.n_samples
            out = {name: np.empty((population, n_s, 7)) for name in ("q", "dq", "tau_cmd")}
            if self.record_ee:
                out["ee_pos"], out["ee_mat"] = np.empty((population, n_s, 3)), np.empty((population, n_s, 9))
            outs.append(out)
        tables = self._tables()
        _check_noise(noise, population)

        def work(shard: PopulationShard, rows: slice) -> None:
            for index, (inp, table, out) in enumerate(zip(self.inputs, tables, outs)):
                shard.run(index, inp, table, out, rows, self.record_ee, _block(noise, rows, index, inp))

        self._fan_out(matrix, work)
        return [
            PopulationResult(q=o["q"], dq=o["dq"], tau_cmd=o["tau_cmd"], ee_pos=o.get("ee_pos"),
                             ee_quat_xyzw=mat_to_quat_xyzw(o["ee_mat"]) if self.record_ee else None)
            for o in outs
        ]

    def mean_square_errors(self, params, q_scale: float, dq_scale: float,
                           noise: ControllerNoise | None = None) -> np.ndarray:
        """(P, B, 2): per input, the mean over samples and joints of ((q − q_ref)/q_scale)² and
        of ((dq − dq_ref)/dq_scale)² (inputs need q_ref, dq_ref); NaN for a diverged candidate.

        What a fit needs of a replay, without keeping the trajectories: either loop sums the
        errors tick by tick, so no (P, S, 7) arrays are made. `noise` as run().
        """
        matrix = params_matrix(params)
        out = np.empty((matrix.shape[0], len(self.inputs), 2))
        tables = self._tables()
        for b, inp in enumerate(self.inputs):
            if inp.q_ref is None or inp.dq_ref is None:
                raise ValueError(f"input {b}: q_ref and dq_ref are needed for errors")
        _check_noise(noise, matrix.shape[0])

        def work(shard: PopulationShard, rows: slice) -> None:
            for b, (inp, table) in enumerate(zip(self.inputs, tables)):
                out[rows, b] = shard.run_errors(b, inp, table, (q_scale, dq_scale), _block(noise, rows, b, inp))

        self._fan_out(matrix, work)
        return out

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


def _check_noise(noise: ControllerNoise | None, population: int) -> None:
    if noise is not None and len(noise.seeds) != population:
        raise ValueError(f"controller noise: {len(noise.seeds)} seeds for {population} candidates")


def _block(noise: ControllerNoise | None, rows: slice, index: int, inp: ReplayInput) -> np.ndarray | None:
    """The shard's (rows, T, 14) controller noise on input `index`, None without noise."""
    return None if noise is None else noise.rows(rows).block(index, inp.n_ticks)


__all__ = ["PopulationEngine", "PopulationResult"]
