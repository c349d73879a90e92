"""One shard of a population replay: a persistent single-threaded `mujoco.batch.Batch` over a
slice of the candidates, with its bound model and data fields (`PopulationShard`), what one
replay carries from tick to tick (`ReplayState`) and where its samples go (`ReplaySink`).

`PopulationEngine` (population.py) splits the candidates into shards and drives each from its
own worker thread. The shard runs each replay in one of the two loops (`PopulationShard._replay`:
the compiled control callback, or the generic per-tick loop) described there.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco.batch import Batch

from ..arm_model.model import TIMESTEP_S, ArmIndex
from ..arm_model.params import LAYOUT, joint_delay_ticks
from ..arm_model.plant import DelayLine, breakaway_level, dof_span, friction_law_id, friction_model, joint_extras
from ..kernels import callback
from ..kernels.tick import add_joint_extras, add_load_torque, add_square_errors, ema_springs
from ..arm_model.load import load_inertia_rows, load_row, loads_differ
from ..kernels.link_dynamics import add_link_torque
from ..arm_model.links import firmware_row, link_chain, link_rows, links_active, set_link_bodies
from ..kernels.load_dynamics import load_feedforward
from .reference import Kinematics, TickController
from .replay_input import ReplayInput

_VEL = mujoco.mjtStage.mjSTAGE_VEL.value
_NONE = mujoco.mjtStage.mjSTAGE_NONE.value
# warnings after which MuJoCo resets a simulation (non-finite or huge qpos/qvel/qacc)
_INSTABILITY = [int(w) for w in (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
                                 mujoco.mjtWarning.mjWARN_BADQACC)]



class PopulationShard:
    """One persistent Batch over a slice of the population, with its bound fields."""

    def __init__(self, model: mujoco.MjModel, arm: ArmIndex, size: int, need_kin: bool, nthread: int,
                 friction_law: str = "stribeck"):
        self.arm, self.size, self.friction_law = arm, size, friction_law
        self.batch = Batch(model, nsim=size, nthread=nthread, persistent=True)
        b = self.batch
        self.f = {
            "qpos": b.bind("qpos"), "qvel": b.bind("qvel"),
            "qfrc_applied": b.bind("qfrc_applied"), "qfrc_bias": b.bind("qfrc_bias"),
            "armature": b.expand("dof_armature"), "damping": b.expand("dof_damping"),
            "frictionloss": b.expand("dof_frictionloss"), "userdata": b.bind("userdata"),
            "body_mass": b.expand("body_mass"), "body_ipos": b.expand("body_ipos"),
            "body_inertia": b.expand("body_inertia"),
        }
        # kinematics: the Cartesian law, the EE samples and the loads' gravity torque read them
        for name in ("site_xpos", "site_xmat", "xanchor", "xaxis", "xipos"):
            self.f[name] = b.bind(name)
        self.chain = link_chain(model, arm)  # the links as the firmware knows them (the model's)
        self.jnt_ids = arm.jnt_ids.astype(np.int64)
        self.use_callback = False  # set per call by PopulationEngine._fan_out
        self._sample_buffers: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.dofs, self.qadr = dof_span(arm.dof_adr), dof_span(arm.qpos_adr)
        self.live = isinstance(self.dofs, slice) and isinstance(self.qadr, slice)  # views, not copies

    def set_params(self, matrix: np.ndarray) -> None:
        self.f["armature"][:, self.dofs] = LAYOUT.take(matrix, "armature")
        self.f["damping"][:, self.dofs] = LAYOUT.take(matrix, "mu_viscous")
        self.f["frictionloss"][:, self.dofs] = breakaway_level(self.friction_law, LAYOUT.take(matrix, "mu_static"))
        body = self.arm.payload_body
        if body < 0:
            check_no_payload(matrix)
        else:
            self._set_payload(matrix, body)
        set_link_bodies(self.f["body_mass"], self.f["body_inertia"], matrix, self.chain)
        self.batch.set_const()
        self.matrix = matrix

    def _set_payload(self, matrix: np.ndarray, body: int) -> None:
        """The candidates' true payloads into the payload body's expanded fields."""
        self.f["body_mass"][:, body] = LAYOUT.take(matrix, "payload_mass")
        for axis, name in enumerate(("payload_com_x", "payload_com_y", "payload_com_z")):
            self.f["body_ipos"][:, body, axis] = LAYOUT.take(matrix, name)
        for axis, name in enumerate(("payload_ixx", "payload_iyy", "payload_izz")):
            self.f["body_inertia"][:, body, axis] = LAYOUT.take(matrix, name)

    def kinematics(self) -> Kinematics:
        f, arm = self.f, self.arm
        return Kinematics(site_pos=f["site_xpos"][:, arm.ee_site], site_xmat=f["site_xmat"][:, arm.ee_site],
                          xanchor=f["xanchor"][:, arm.jnt_ids], xaxis=f["xaxis"][:, arm.jnt_ids])

    def _start(self, inp: ReplayInput) -> ReplayState:
        """Reset the batch to `inp`'s initial state and make the state of one replay."""
        f, m = self.f, self.matrix
        self.batch.reset(stage=_NONE)
        f["qpos"][:, self.qadr] = inp.q0
        f["qvel"][:, self.dofs] = inp.dq0
        self.batch.forward(stage=_VEL)
        sample_of_tick = np.full(inp.n_ticks, -1, dtype=np.int64)
        sample_of_tick[inp.sample_ticks] = np.arange(inp.n_samples)
        com = np.stack([LAYOUT.take(m, f"payload_com_{axis}") for axis in "xyz"], axis=-1)
        load = load_row(LAYOUT.take(m, "payload_mass"), com, inp.configured_load)
        inertia_rows = load_inertia_rows(LAYOUT.take(m, "payload_mass"), com, np.stack(
            [LAYOUT.take(m, f"payload_i{a}{a}") for a in "xyz"], axis=-1), inp.configured_load)
        extras = joint_extras(LAYOUT.take(m, "tau_bias"), LAYOUT.take(m, "coulomb_asymmetry"), self.friction_law,
                              LAYOUT.take(m, "mu_static"), LAYOUT.take(m, "sigmoid_phi2"), LAYOUT.take(m, "sigmoid_phi3"))
        links = link_rows(m, self.chain)
        return ReplayState(
            load=load if np.any(load != 0.0) else None,
            links=links if links_active(links) else None,
            link_firmware=firmware_row(self.chain, inp.configured_load),
            inertia_rows=inertia_rows if loads_differ(inertia_rows) else None,
            extras=extras if np.any(extras[:, :21] != 0.0) else None,
            delay=DelayLine(joint_delay_ticks(m), inp.tau_prev0, inp.tau_history,
                            friction_law_id(self.friction_law)),
            neg_breakaway=friction_model(self.friction_law, LAYOUT.take(m, "mu_static"),
                                         LAYOUT.take(m, "dynamic_ratio")).coef,
            sample_of_tick=sample_of_tick,
            tau_prev=np.tile(np.asarray(inp.tau_prev0, dtype=np.float64), (self.size, 1)),
            ema=np.asarray(inp.ema0 if inp.ema0 is not None else inp.q0, dtype=np.float64).copy(),
        )

    def _diverged(self) -> np.ndarray:
        """(size,) True where MuJoCo reset the simulation mid-run: its replay is invalid."""
        return (self.batch.warning[:, _INSTABILITY, 1] > 0).any(axis=1)

    def _buffers(self, index: int, n_samples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Time-major (S, P, 7) q, dq, τ buffers of input `index`, kept across runs (each
        tick writes contiguous rows; transposed into the results at the end)."""
        bufs = self._sample_buffers.get(index)
        if bufs is None or bufs[0].shape[0] != n_samples:
            bufs = tuple(np.zeros((n_samples, self.size, 7)) for _ in range(3))
            self._sample_buffers[index] = bufs
        return bufs

    def run(self, index: int, inp: ReplayInput, table: np.ndarray | None, out: dict, rows: slice,
            record_ee: bool, noise: np.ndarray | None = None) -> None:
        """Replay input `index` (`inp`) for this shard's candidates, writing q, dq, tau_cmd (and
        with record_ee the EE pose) into out[name][rows]; NaN where a candidate diverged.

        table: joint_tick_table(inp) for a joint-impedance input, None for the Cartesian law.
        noise: None, or (size, T, 14) offsets the joint law reads on q, dq (controller_noise.py).
        """
        bufs = self._buffers(index, inp.n_samples)
        ee = (out["ee_pos"][rows], out["ee_mat"][rows]) if record_ee else ()
        diverged = self._replay(inp, table, ReplaySink(outputs=bufs, ee=ee), noise)
        for name, buf in zip(("q", "dq", "tau_cmd"), bufs):
            out[name][rows] = buf.transpose(1, 0, 2)
        if diverged.any():
            for name in ("q", "dq", "tau_cmd"):
                out[name][rows][diverged] = np.nan

    def run_errors(self, index: int, inp: ReplayInput, table: np.ndarray | None,
                   scales: tuple[float, float], noise: np.ndarray | None = None) -> np.ndarray:
        """Replay input `index` (`inp`) keeping only the error sums: (size, 2) mean squares of
        (q − q_ref)/q_scale and (dq − dq_ref)/dq_scale over samples and joints; NaN if diverged.
        Summed tick by tick, in the same order in either loop. table as run()."""
        q_ref, dq_ref = np.ascontiguousarray(inp.q_ref, dtype=np.float64), np.ascontiguousarray(inp.dq_ref, dtype=np.float64)
        sum_sq = np.zeros((self.size, 2))
        scales_arr = np.array([scales[0], scales[1]], dtype=np.float64)
        diverged = self._replay(inp, table, ReplaySink(errors=(q_ref, dq_ref, scales_arr, sum_sq)), noise)
        sum_sq /= max(1, inp.n_samples) * 7
        sum_sq[diverged] = np.nan
        return sum_sq

    def _replay(self, inp: ReplayInput, table: np.ndarray | None, sink: ReplaySink,
                noise: np.ndarray | None = None) -> np.ndarray:
        """Replay `inp` from its initial state into `sink`; returns (size,) True where MuJoCo
        reset a candidate. The one choice of loop: the compiled one when this call installed
        the control callback and no EE pose is asked for, else the generic loop."""
        if noise is not None and table is None:
            raise ValueError("controller noise: only the joint-impedance law reads q and dq (a Cartesian input)")
        state = self._start(inp)
        if self.use_callback and not sink.ee:
            self._run_compiled(inp, table, state, sink, noise)
        else:
            self._run_ticks(inp, state, sink, noise)
        return self._diverged()

    def _state_views(self):
        """(q, dq, coriolis, applied) (P, 7): views of the bound rows (they never move) when
        the addresses are contiguous (`live`), else copies."""
        f = self.f
        return f["qpos"][:, self.qadr], f["qvel"][:, self.dofs], f["qfrc_bias"][:, self.dofs], f["qfrc_applied"][:, self.dofs]

    def _law_arrays(self, inp: ReplayInput, table: np.ndarray | None, state: ReplayState) -> dict:
        """The control law's arrays for a ReplayContext: the joint springs and table, or the
        Cartesian targets, gains and the warm-up hold."""
        if table is not None:
            springs = np.empty((inp.n_ticks, 7))
            ema_springs(table, bool(inp.use_ema), state.ema, springs)
            return {"springs": springs, "table": table}
        gains, cart = inp.cartesian.resolved(), inp.cartesian
        slew = cart.max_torque_rate_nm_s * TIMESTEP_S if cart.max_torque_rate_nm_s > 0 else 0.0
        return {"cart_targets": np.ascontiguousarray(np.hstack([inp.target_pos, inp.target_quat_xyzw]), dtype=np.float64),
                "cart_params": np.array([*gains, float(bool(cart.use_coriolis)), slew, float(inp.warmup_ticks), 0.0]),
                "hold": np.zeros((self.size, 7)), "jnt_ids": self.arm.jnt_ids.astype(np.int64),
                "site_id": int(self.arm.ee_site)}

    def _run_compiled(self, inp: ReplayInput, table: np.ndarray | None, state: ReplayState, sink: ReplaySink,
                      noise: np.ndarray | None = None) -> None:
        """The compiled loop: one batch call, the control callback runs every tick (callback.py)."""
        law = self._law_arrays(inp, table, state)
        if state.load is not None or state.inertia_rows is not None or state.links is not None:
            law.setdefault("jnt_ids", self.jnt_ids)
            law.setdefault("site_id", int(self.arm.ee_site))
        if state.links is not None:
            law.update(links=state.links, link_bodies=self.chain.table, link_firmware=state.link_firmware)
        context = callback.ReplayContext(
            sample_of_tick=state.sample_of_tick,
            tau_prev=state.tau_prev, ring=state.delay.ring, delays=np.ascontiguousarray(state.delay.delays, dtype=np.int64),
            neg_breakaway=np.ascontiguousarray(state.neg_breakaway), qpos_adr=self.arm.qpos_adr.astype(np.int64),
            dof_adr=self.arm.dof_adr.astype(np.int64), load=state.load, extras=state.extras, inertia_rows=state.inertia_rows,
            friction_law=state.delay.law, controller_noise=noise, **law,
            outputs=sink.outputs, errors=sink.errors)
        self.f["userdata"][:, : callback.USERDATA_SLOTS] = context.userdata_rows()
        try:
            if inp.n_ticks:
                self.batch.step(nstep=inp.n_ticks, stage=_VEL)
        finally:
            self.f["userdata"][:] = 0.0  # the context's arrays die with this call

    def _run_ticks(self, inp: ReplayInput, state: ReplayState, sink: ReplaySink, noise: np.ndarray | None = None) -> None:
        """The generic loop, any law: per tick the controller (TickController: the joint law's
        kernel, or the Cartesian law in numpy), the sample into `sink`, the delayed torque and
        sliding relief into qfrc_applied (kernels.apply_delayed_torque), plus the loads' gravity
        torque (kernels.add_load_torque) when a candidate carries a load, the links' torque
        (link_dynamics.add_link_torque) when a candidate's links differ, and the bias and Coulomb
        asymmetry (kernels.add_joint_extras) when a candidate has them, one batch step. With
        `noise` (P, T, 14) the law reads q + noise[:, k, :7] and dq + noise[:, k, 7:]."""
        ctrl = TickController(inp, self.size)
        need_kin = ctrl.needs_kinematics or bool(sink.ee)
        q, dq, cor, applied = self._state_views()
        f, step, live, samples = self.f, self.batch.step, self.live, state.sample_of_tick.tolist()
        delay, neg_breakaway, record, load, extras = state.delay, state.neg_breakaway, sink.record, state.load, state.extras
        site, jnt_ids, rows = int(self.arm.ee_site), self.jnt_ids, state.inertia_rows
        links, chain_table = state.links, self.chain.table
        feedforward = np.empty((self.size, 7))
        for k in range(inp.n_ticks):
            if not live:  # non-contiguous addresses: gather copies, scatter the torque back
                q, dq, cor, applied = self._state_views()
            kin = self.kinematics() if need_kin else None
            if rows is not None:  # the firmware's Coriolis feed-forward (configured load, not the payload)
                load_feedforward(rows, f["site_xpos"], f["site_xmat"], f["xanchor"], f["xaxis"], site, jnt_ids, dq, cor, feedforward)
            q_law, dq_law = (q, dq) if noise is None else (q + noise[:, k, :7], dq + noise[:, k, 7:])
            tau = ctrl.torque(k, q_law, dq_law, cor if rows is None else feedforward, kin)
            if samples[k] >= 0:
                record(samples[k], q, dq, tau, kin)
            delay.push_apply(tau, dq, neg_breakaway, applied)
            if load is not None:
                add_load_torque(load, f["site_xpos"], f["site_xmat"], f["xanchor"], f["xaxis"], site, jnt_ids, applied)
            if links is not None:
                add_link_torque(links, chain_table, state.link_firmware, f["xipos"], f["xanchor"], f["xaxis"],
                                f["site_xpos"], f["site_xmat"], site, jnt_ids, delay.ring, k, delay.delays, dq, applied)
            if extras is not None:
                add_joint_extras(dq, extras, applied)
            if not live:
                f["qfrc_applied"][:, self.dofs] = applied
            step(stage=_VEL)


def check_no_payload(matrix: np.ndarray) -> None:
    """ValueError when a candidate has a payload but the model has no payload body."""
    names = ("payload_mass", "payload_ixx", "payload_iyy", "payload_izz")
    if any(np.any(LAYOUT.take(matrix, n) != 0.0) for n in names):
        raise ValueError("a payload needs the model's 'payload' body: load the model with load_model")


@dataclass
class ReplaySink:
    """Where one replay's samples go: time-major (S, P, 7) q, dq, τ buffers (`outputs`) and,
    if asked, the EE pose (`ee`: (P, S, 3) positions, (P, S, 9) rotation matrices); or a fit's
    error sums (`errors`: q_ref, dq_ref (S, 7), scales (2,) [q_scale, dq_scale], sum_sq (P, 2))."""

    outputs: tuple[np.ndarray, ...] = ()
    ee: tuple[np.ndarray, ...] = ()
    errors: tuple[np.ndarray, ...] = ()

    def record(self, s: int, q: np.ndarray, dq: np.ndarray, tau: np.ndarray, kin: Kinematics | None) -> None:
        """Sample s: the state q, dq and command tau (P, 7) before the tick's torque is applied."""
        if self.errors:
            q_ref, dq_ref, scales, sum_sq = self.errors
            add_square_errors(s, q, dq, q_ref, dq_ref, scales[0], scales[1], sum_sq)
            return
        q_buf, dq_buf, tau_buf = self.outputs
        q_buf[s], dq_buf[s], tau_buf[s] = q, dq, tau
        if self.ee:
            self.ee[0][:, s], self.ee[1][:, s] = kin.site_pos, kin.site_xmat


@dataclass
class ReplayState:
    """What one replay of one input carries from tick to tick, for a shard of P candidates."""

    delay: DelayLine  # commanded torques by tick, per-candidate and per-joint delays
    neg_breakaway: np.ndarray  # (P, 7) the friction law's coefficient [N·m]: −(mu_s − mu_d) (Stribeck), −mu_c (tanh)
    sample_of_tick: np.ndarray  # (T,) int64 sample index of each tick, −1 for none (the generic loop iterates a list of it)
    tau_prev: np.ndarray  # (P, 7) slew-limiter state [N·m]
    ema: np.ndarray  # (7,) the EMA of the targets, shared by every candidate [rad]
    load: np.ndarray | None = None  # (P, 4) load rows (load.load_row), None when all are zero
    inertia_rows: np.ndarray | None = None  # (P, 14) load.load_inertia_rows, None when every candidate's two loads are equal
    extras: np.ndarray | None = None  # (P, 35) joint extras (plant.joint_extras), None when bias, asymmetry and φ1 are all zero
    links: np.ndarray | None = None  # (P, B + 7) links.link_rows, None when every candidate's links are the model's
    link_firmware: np.ndarray | None = None  # (B + 4,) links.firmware_row of the input's configured load


__all__ = ["PopulationShard", "ReplaySink", "ReplayState", "check_no_payload"]
