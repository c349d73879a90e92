"""The plant shared by every engine: friction, delay line, parameter writes, one-arm physics.

Friction (FrankaTwin's parameterisation: static breakaway, dynamic Coulomb, viscous), a
Stribeck curve   F(dq) = mu_d + (mu_s − mu_d)·exp(−(dq/v_s)²),  mu_d = dynamic_ratio·mu_s,
v_s = 0.02 rad/s, built from two parts so that no model field changes during a replay:
  * MuJoCo's `dof_frictionloss` constraint at the breakaway level mu_s: a bounded friction
    torque solved implicitly, so sticking is exact and stable at 1 ms with small armature;
  * an explicit joint torque along the motion, (mu_s − mu_d)·(1 − exp(−(dq/v_s)²))·sign(dq),
    from the velocity the step starts from, which lowers the sliding level to F(dq). It is
    smaller than mu_s, so it can never break stiction by itself, and it is continuous in dq.
  * viscous: `dof_damping` = mu_viscous, integrated implicitly (`implicitfast`).
The friction law is a choice (FRICTION_LAWS): the Stribeck law above (FrankaTwin's, the
default), or a smooth one, "tanh": Coulomb smoothed, F(dq) = mu_c·tanh(dq/v_t) with
mu_c = mu_static (dynamic_ratio has no effect), v_t = 0.02 rad/s, as an explicit torque (no
`dof_frictionloss` constraint), plus the same viscous damping. Smooth in dq (no stiction: a
torque below mu_c moves the joint slowly), which gradient-based refinement likes.
(Writing a per-tick level into `dof_frictionloss` instead would do the same physics but makes
`mujoco.batch` recompute the position/velocity stages every step: measured ~1.5× slower.)
Armature: `dof_armature`; `mj_setConst` follows it so the friction constraint scaling agrees.
Delay: the commanded torque of tick k is applied at tick k + motor_delay_ms (DelayLine), per
joint k + clip(motor_delay_ms + motor_delay_offset_ms_j, 0, MAX_DELAY_MS) (params.joint_delay_ticks).
Loads (load.py): the true payload is the `payload` body's mass, centre of mass and inertia
(so it is in the mass matrix and the Coriolis term), and its weight minus the firmware's
compensation of the configured load is an explicit joint torque at the tick's kinematics
(kernels.add_load_torque; load.load_gravity_torque is its readable form), added after the
delayed command and the sliding relief; with no load nothing is added. The Coriolis
feed-forward is the firmware's: qfrc_bias minus the true payload's velocity-product torque
plus the configured load's (load_dynamics.load_feedforward; qfrc_bias itself when the two
loads are equal). Links (links.py): link j's mass and inertia are link_mass_scale_j times the
model's, and the weight the firmware does not compensate plus the load-dependent Coulomb friction
are one explicit torque after the loads' (link_dynamics.add_link_torque).
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np

from .model import ArmIndex, arm_index
from ..kernels.tick import NEG_INV_STRIBECK_VELOCITY_SQ as _NEG_INV_VS2
from ..kernels.tick import FRICTION_SIGMOID, FRICTION_STRIBECK, FRICTION_TANH, INV_TANH_VELOCITY, STRIBECK_VELOCITY_RAD_S, TANH_VELOCITY_RAD_S
from ..kernels.tick import add_joint_extras, add_load_torque, apply_delayed_torque
from .load import NO_LOAD, EndLoad, load_inertia_rows, load_row, loads_differ
from ..kernels.link_dynamics import add_link_torque
from .links import LinkChain, firmware_row, link_chain, link_rows, links_active, set_link_bodies
from ..kernels.load_dynamics import load_feedforward
from .params import MAX_DELAY_MS, DynamicsParams


FRICTION_LAWS = {"stribeck": FRICTION_STRIBECK, "tanh": FRICTION_TANH, "sigmoid": FRICTION_SIGMOID}  # name -> number


def friction_law_id(name: str) -> int:
    """The kernels' number of a friction law name; ValueError listing the laws otherwise."""
    try:
        return FRICTION_LAWS[name]
    except (KeyError, TypeError):
        raise ValueError(f"friction law {name!r}: expected one of {', '.join(FRICTION_LAWS)}") from None


class StribeckFriction:
    """Stribeck friction of a population: mu_static and mu_dynamic (P, 7) [N·m], constants precomputed."""

    law = FRICTION_STRIBECK

    def __init__(self, mu_static: np.ndarray, mu_dynamic: np.ndarray):
        self.mu_dynamic = np.ascontiguousarray(mu_dynamic, dtype=np.float64)
        self.breakaway = np.ascontiguousarray(mu_static, dtype=np.float64) - self.mu_dynamic
        self.neg_breakaway = -self.breakaway  # −(mu_s − mu_d), the kernels' input
        self.coef = self.neg_breakaway  # the kernels' coefficient of this law

    def sliding_relief(self, dq: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Explicit torque (mu_s − mu_d)·(1 − exp(−(dq/v_s)²))·sign(dq) [N·m] into out (P, 7).

        Evaluated as −(mu_s − mu_d)·expm1(−dq²/v_s²) (five in-place operations).
        """
        np.multiply(dq, dq, out=out)
        out *= _NEG_INV_VS2
        np.expm1(out, out=out)
        out *= self.neg_breakaway
        np.copysign(out, dq, out=out)
        return out


class TanhFriction:
    """Smooth Coulomb friction of a population: level mu_c (P, 7) [N·m], explicit torque
    −mu_c·tanh(dq/v_t); no breakaway constraint (`breakaway_level` is 0)."""

    law = FRICTION_TANH

    def __init__(self, mu_coulomb: np.ndarray):
        self.mu_coulomb = np.ascontiguousarray(mu_coulomb, dtype=np.float64)
        self.coef = -self.mu_coulomb  # the kernels' coefficient of this law

    def sliding_relief(self, dq: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The explicit friction torque −mu_c·tanh(dq/v_t) [N·m] into out (P, 7)."""
        np.multiply(dq, INV_TANH_VELOCITY, out=out)
        np.tanh(out, out=out)
        out *= self.coef
        return out


def joint_extras(tau_bias: np.ndarray, coulomb_asymmetry: np.ndarray, law: str = "stribeck",
                 mu_static: np.ndarray | None = None, phi2: np.ndarray | None = None,
                 phi3: np.ndarray | None = None) -> np.ndarray:
    """(P, 35) [tau_bias | coulomb_asymmetry | φ1 | φ2 | φ3], the kernels' input
    (add_joint_extras); φ1 = 2·mu_static under the sigmoid law (so mu_static is its Coulomb
    level at φ3 = 0), else 0 (no sigmoid term)."""
    bias = np.atleast_2d(np.asarray(tau_bias, dtype=np.float64))
    zeros = np.zeros_like(bias)
    sigmoid = friction_law_id(law) == FRICTION_SIGMOID
    phi1 = 2.0 * np.atleast_2d(mu_static) if sigmoid else zeros
    parts = [bias, np.atleast_2d(coulomb_asymmetry), phi1,
             zeros if phi2 is None else np.atleast_2d(phi2), zeros if phi3 is None else np.atleast_2d(phi3)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float64)


def joint_extra_torque(dq: np.ndarray, extras: np.ndarray) -> np.ndarray:
    """The readable form of kernels.add_joint_extras [N·m], (P, 7): bias − asym·tanh²(dq/v_t)
    − [φ1/(1 + e^(−φ2(dq + φ3))) − φ1/(1 + e^(−φ2·φ3))] (Gaz et al. 2019, RA-L 4(4))."""
    bias, asym, phi1, phi2, phi3 = (extras[:, 7 * i:7 * (i + 1)] for i in range(5))
    sigmoid = phi1 / (1.0 + np.exp(-phi2 * (dq + phi3))) - phi1 / (1.0 + np.exp(-phi2 * phi3))
    return bias - asym * np.tanh(dq * INV_TANH_VELOCITY) ** 2 - sigmoid


def friction_model(law: str, mu_static: np.ndarray, dynamic_ratio: np.ndarray):
    """The friction of a population under `law` ((P, 7) parameters)."""
    law_id = friction_law_id(law)
    if law_id == FRICTION_TANH:
        return TanhFriction(mu_static)
    if law_id == FRICTION_SIGMOID:  # its torque is a joint extra (joint_extras); none here
        model = TanhFriction(np.zeros_like(mu_static))
        model.law = FRICTION_SIGMOID
        return model
    return StribeckFriction(mu_static, dynamic_ratio * mu_static)


def breakaway_level(law: str, mu_static: np.ndarray) -> np.ndarray:
    """`dof_frictionloss` of a law: the breakaway level mu_s (Stribeck), 0 (tanh, sigmoid)."""
    return mu_static if friction_law_id(law) == FRICTION_STRIBECK else np.zeros_like(mu_static)


class DelayLine:
    """Per-candidate ring of commanded torques: push(τ_k) returns τ_{k−delay} per candidate and joint.

    delays: (P, 7) whole ticks in 0..MAX_DELAY_MS per candidate and joint
    (params.joint_delay_ticks), or (P,) one per candidate (every joint the same); kept as
    `delays` (P, 7) int64. history: (H, P, 7) or (H, 7) commanded
    torques of the ticks before tick 0 (oldest first), missing ticks filled with tau_prev0.
    """

    def __init__(self, delays: np.ndarray, tau_prev0: np.ndarray, history: np.ndarray | None = None,
                 law: int = FRICTION_STRIBECK):
        self.law = int(law)  # the friction law push_apply adds (kernels.friction_torque)
        given = np.asarray(delays, dtype=np.int64)
        count = given.shape[0] if given.ndim else 1
        self.delays = np.ascontiguousarray(np.broadcast_to(given.reshape(count, -1), (count, 7)))
        self.length = MAX_DELAY_MS + 1
        self.ring = np.empty((self.length, count, 7))
        self.ring[:] = np.broadcast_to(np.asarray(tau_prev0, dtype=np.float64), (count, 7))
        if history is not None and len(history):
            hist = np.asarray(history, dtype=np.float64)[-MAX_DELAY_MS:]
            for j in range(1, len(hist) + 1):  # tick −j goes to slot (−j) mod length
                self.ring[(-j) % self.length] = hist[-j]
        self.tick = 0
        self._flat = self.ring.reshape(-1)
        # flat index of candidate p's joint j delayed command at tick k: ((k − d_pj) mod L)·P·7 + p·7 + j
        cells = np.arange(count * 7).reshape(count, 7)
        self._index = [((k - self.delays) % self.length) * (count * 7) + cells for k in range(self.length)]
        self._uniform = bool(np.all(self.delays == self.delays.flat[0])) if count else True
        self._delay0 = int(self.delays.flat[0]) if count else 0
        self.out = np.empty((count, 7))

    def push(self, tau: np.ndarray) -> np.ndarray:
        """Store this tick's command (P, 7) and return the torque to apply now (P, 7).

        The result is a reused array or a view of the ring: use it before the next push.
        """
        slot = self.tick % self.length
        self.ring[slot] = tau
        self.tick += 1
        if self._uniform:  # a view of the ring: valid until the next push
            return self.ring[(self.tick - 1 - self._delay0) % self.length]
        self._flat.take(self._index[slot], out=self.out)
        return self.out

    def push_apply(self, tau: np.ndarray, dq: np.ndarray, neg_breakaway: np.ndarray, applied: np.ndarray) -> None:
        """Store this tick's command (P, 7) and write the torque to apply now into `applied`
        (P, 7): the delayed command plus the friction law's explicit torque at dq (P, 7), where
        neg_breakaway is the law's coefficient (P, 7) (`.coef`: −(mu_s − mu_d) for Stribeck).
        One compiled pass (kernels.apply_delayed_torque)."""
        apply_delayed_torque(self.ring, self.tick, self.delays, tau, dq, neg_breakaway, applied, self.law)
        self.tick += 1


def dof_span(adr: np.ndarray) -> slice | np.ndarray:
    """A slice when the addresses are contiguous (indexing then gives views), else the index array."""
    adr = np.asarray(adr)
    start = int(adr[0])
    return slice(start, start + adr.size) if np.array_equal(adr, np.arange(start, start + adr.size)) else adr


def apply_params(model: mujoco.MjModel, arm: ArmIndex, params: DynamicsParams, friction_law: str = "stribeck",
                 chain: LinkChain | None = None) -> None:
    """Write armature, viscous damping and the law's breakaway level into the arm's dofs, the
    links' masses and inertias (link_mass_scale × `chain`'s, the model's own when None), and
    the true payload into the `payload` body (mass, centre of mass, diagonal inertia)."""
    model.dof_armature[arm.dof_adr] = params.armature
    model.dof_damping[arm.dof_adr] = params.mu_viscous
    model.dof_frictionloss[arm.dof_adr] = breakaway_level(friction_law, params.mu_static)
    chain = link_chain(model, arm) if chain is None else chain
    set_link_bodies(model.body_mass[None], model.body_inertia[None], params.to_vector()[None], chain)
    payload = params.payload
    if arm.payload_body < 0:
        if payload.mass_kg != 0.0 or any(payload.inertia_kgm2):
            raise ValueError("a payload needs the model's 'payload' body: load the model with load_model")
        return
    model.body_mass[arm.payload_body] = payload.mass_kg
    model.body_ipos[arm.payload_body] = payload.com_m
    model.body_inertia[arm.payload_body] = payload.inertia_kgm2


class Plant:
    """One simulated arm: its own model copy with `params` applied, one MjData, a delay line.

    Per tick: `begin_tick()` (Coulomb level from the current velocity, then
    position/velocity stages: qfrc_bias = C(q,dq)·dq, site pose), the caller computes the
    commanded torque, `end_tick(tau_cmd)` applies the delayed torque (+ the loads' gravity
    torque: the true payload's weight minus the compensation of `configured_load`) and
    integrates 1 ms. friction_law: a name of FRICTION_LAWS.
    """

    def __init__(self, model: mujoco.MjModel, params: DynamicsParams, q0, dq0=None,
                 tau_prev0=None, tau_history=None, configured_load: EndLoad = NO_LOAD,
                 friction_law: str = "stribeck"):
        self.model = copy.copy(model)
        self.arm = arm_index(self.model)
        self.params = params
        self.friction_law = friction_law
        self.chain = link_chain(model, self.arm)  # the links as the firmware knows them: the given model's
        apply_params(self.model, self.arm, params, friction_law, self.chain)
        self.data = mujoco.MjData(self.model)
        mujoco.mj_setConst(self.model, self.data)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.arm.qpos_adr] = np.asarray(q0, dtype=np.float64)
        self.data.qvel[self.arm.dof_adr] = 0.0 if dq0 is None else np.asarray(dq0, dtype=np.float64)
        tau_prev0 = np.zeros(7) if tau_prev0 is None else np.asarray(tau_prev0, dtype=np.float64)
        self.friction = friction_model(friction_law, params.mu_static[None], params.dynamic_ratio[None])  # (1, 7)
        self.delay = DelayLine(params.joint_delay_ms[None], tau_prev0,
                               None if tau_history is None else np.asarray(tau_history)[:, None, :], self.friction.law)
        self._applied = np.empty((1, 7))
        self.configured_load = configured_load
        self.load = load_row(params.payload_mass, np.array(params.payload.com_m), configured_load)  # (1, 4)
        self.loaded = bool(np.any(self.load != 0.0))
        self.inertia_rows = load_inertia_rows(params.payload_mass, np.array(params.payload.com_m),
                                              np.array(params.payload.inertia_kgm2), configured_load)  # (1, 14)
        self.coriolis_loaded = loads_differ(self.inertia_rows)  # the feed-forward is not qfrc_bias
        self._feedforward = np.zeros((1, 7))
        self.extras = joint_extras(params.tau_bias, params.coulomb_asymmetry, friction_law, params.mu_static,
                                   params.sigmoid_phi2, params.sigmoid_phi3)  # (1, 35)
        self.extra = bool(np.any(self.extras[:, :21] != 0.0))  # bias, asymmetry or a sigmoid φ1
        self.links = link_rows(params.to_vector()[None], self.chain)  # (1, B + 7)
        self.linked = links_active(self.links)  # links other than the model's, or load-dependent friction
        self._link_firmware = firmware_row(self.chain, configured_load)
        self._jnt_ids = self.arm.jnt_ids.astype(np.int64)
        self.dofs, self.qadr = dof_span(self.arm.dof_adr), dof_span(self.arm.qpos_adr)
        # live (1, 7) views of MjData rows (its buffers never move) when the dofs are contiguous
        self._live = (self.data.qvel[None, self.dofs], self.data.qfrc_applied[None, self.dofs]) \
            if isinstance(self.dofs, slice) else None

    @property
    def q(self) -> np.ndarray:
        """True joint position [rad], (7,) copy."""
        return self.data.qpos[self.arm.qpos_adr].copy()

    @property
    def dq(self) -> np.ndarray:
        """True joint velocity [rad/s], (7,) copy."""
        return self.data.qvel[self.arm.dof_adr].copy()

    def begin_tick(self) -> None:
        """Compute the position/velocity stages at the current state (qfrc_bias, site pose)."""
        mujoco.mj_step1(self.model, self.data)

    def coriolis(self) -> np.ndarray:
        """The firmware's Coriolis feed-forward C(q,dq)·dq [N·m] at the state (valid after
        begin_tick; gravity is off), (7,) copy: qfrc_bias, with the configured load in place of
        the true payload when they differ (feedforward())."""
        if self.coriolis_loaded:
            return self.feedforward()[0].copy()
        return self.data.qfrc_bias[self.arm.dof_adr].copy()

    def feedforward(self, data: mujoco.MjData | None = None, bias: np.ndarray | None = None) -> np.ndarray:
        """(1, 7) live buffer ← qfrc_bias − C_load(true payload) + C_load(configured load) [N·m]
        at `data`'s kinematics (this plant's MjData by default), from `bias` (nv,) (its
        qfrc_bias by default); load_dynamics.load_feedforward."""
        d = self.data if data is None else data
        adr = self.arm.dof_adr
        load_feedforward(self.inertia_rows, d.site_xpos[None], d.site_xmat[None], d.xanchor[None], d.xaxis[None],
                         self.arm.ee_site, self._jnt_ids, d.qvel[adr][None],
                         (d.qfrc_bias if bias is None else bias)[adr][None], self._feedforward)
        return self._feedforward

    def end_tick(self, tau_cmd: np.ndarray) -> None:
        """Push the commanded torque, (7,) or (1, 7), into the delay line, apply the delayed one
        plus the sliding friction relief, and integrate 1 ms."""
        tau_row = tau_cmd if tau_cmd.ndim == 2 else tau_cmd.reshape(1, 7)
        if self._live is not None:  # straight into MjData's qfrc_applied row
            self.delay.push_apply(tau_row, self._live[0], self.friction.coef, self._live[1])
            if self.loaded:
                self.add_load_torque(self._live[1])
            if self.linked:
                self.add_link_torque(self._live[0], self._live[1])
            if self.extra:
                add_joint_extras(self._live[0], self.extras, self._live[1])
        else:  # gathered dq, scattered torque
            self.delay.push_apply(tau_row, self.data.qvel[self.dofs][None], self.friction.coef, self._applied)
            if self.loaded:
                self.add_load_torque(self._applied)
            if self.linked:
                self.add_link_torque(self.data.qvel[self.dofs][None], self._applied)
            if self.extra:
                add_joint_extras(self.data.qvel[self.dofs][None], self.extras, self._applied)
            self.data.qfrc_applied[self.dofs] = self._applied[0]
        mujoco.mj_step2(self.model, self.data)

    def add_load_torque(self, applied: np.ndarray) -> None:
        """applied (1, 7) += the loads' gravity torque at this tick's kinematics (after begin_tick)."""
        d = self.data
        add_load_torque(self.load, d.site_xpos[None], d.site_xmat[None], d.xanchor[None], d.xaxis[None],
                        self.arm.ee_site, self._jnt_ids, applied)

    def add_link_torque(self, dq: np.ndarray, applied: np.ndarray) -> None:
        """applied (1, 7) += the links' torque (links.py) at this tick's kinematics, after the push."""
        d = self.data
        add_link_torque(self.links, self.chain.table, self._link_firmware, d.xipos[None], d.xanchor[None],
                        d.xaxis[None], d.site_xpos[None], d.site_xmat[None], self.arm.ee_site, self._jnt_ids,
                        self.delay.ring, self.delay.tick - 1, self.delay.delays, dq, applied)

    def link_torque(self) -> np.ndarray:
        """Torque that reached the links in the last step [N·m], (7,): delayed motor torque plus
        friction (constraint + sliding relief) and damping."""
        d, adr = self.data, self.arm.dof_adr
        return d.qfrc_applied[adr] + d.qfrc_passive[adr] + d.qfrc_constraint[adr]


__all__ = ["FRICTION_LAWS", "STRIBECK_VELOCITY_RAD_S", "TANH_VELOCITY_RAD_S", "DelayLine", "StribeckFriction", "Plant",
           "TanhFriction", "apply_params", "breakaway_level", "dof_span", "joint_extra_torque", "joint_extras", "friction_law_id", "friction_model"]
