"""The replay context: the data layout the compiled control callback (callback.py) reads.

One shard's replay of one input is a set of numpy arrays; the context table is an int64 array
of their sizes and addresses, in the slots below, and each simulation's userdata points at it:
[MAGIC, address of the context table, candidate row] (USERDATA_SLOTS entries, reserved by
model.load_model). Python writes this layout (ReplayContext), the callback body
(_callback_body.py) reads it; both take the slot numbers from here and nowhere else.

Shapes: T ticks, S samples, P candidates, L delay-ring length; float64 unless noted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

USERDATA_SLOTS = 3  # [MAGIC, context address, candidate row]
MAGIC = 7.254e301  # marks a simulation whose userdata the population engine wrote

# context table slots (int64): sizes and flags, then array addresses
MODE, N_TICKS, N_SAMPLES, N_CANDIDATES, RING_LENGTH = 0, 1, 2, 3, 4
SPRINGS, TABLE, SAMPLE_OF_TICK, TAU_PREV, RING, DELAYS, NEG_BREAKAWAY, COUNTER = 5, 6, 7, 8, 9, 10, 11, 12
Q_OUT, DQ_OUT, TAU_OUT, Q_REF, DQ_REF, SCALES, SUM_SQ, QPOS_ADR, DOF_ADR = 13, 14, 15, 16, 17, 18, 19, 20, 21
CONTROLLER, CART_TARGETS, CART_PARAMS, HOLD, JNT_IDS, SITE_ID = 22, 23, 24, 25, 26, 27
LOAD = SITE_ID + 1  # address of the (P, 4) load rows, 0 when no candidate carries a load
FRICTION_LAW = LOAD + 1  # the friction law's number (kernels.FRICTION_STRIBECK, FRICTION_TANH), a value
EXTRAS = FRICTION_LAW + 1  # address of the (P, 35) joint-extra rows (plant.joint_extras), 0 when all are zero
INERTIA_ROWS = EXTRAS + 1  # address of the (P, 14) loads' inertial rows (load.load_inertia_rows), 0 when the loads are equal
FEEDFORWARD = INERTIA_ROWS + 1  # address of the (P, 7) scratch of each candidate's Coriolis feed-forward
LINKS = FEEDFORWARD + 1  # address of the (P, B + 7) link rows (links.link_rows), 0 when every candidate's are zero
LINK_BODIES = LINKS + 1  # address of the (B, 2) int64 chain table (links.LinkChain.table)
LINK_FIRMWARE = LINK_BODIES + 1  # address of the (B + 4,) firmware row (links.firmware_row)
N_LINK_BODIES = LINK_FIRMWARE + 1  # B, a value
CONTROLLER_NOISE = N_LINK_BODIES + 1  # address of the (P, T, 14) offsets the joint law reads on q, dq; 0: none
CONTEXT_SIZE = CONTROLLER_NOISE + 1
# values of the MODE and CONTROLLER slots
MODE_SAMPLES, MODE_ERRORS = 0, 1
JOINT, CARTESIAN = 0, 1
# cart_params layout: [kp_pos, kp_ori, kd_pos, kd_ori, use_coriolis, slew N·m/tick (≤ 0: off), warmup_ticks, 0]
CART_PARAMS_SIZE = 8


@dataclass
class ReplayContext:
    """The arrays one shard's callback replay reads and writes, kept alive for the call.

    sample_of_tick (T,) int64 (−1: none); tau_prev (P, 7) [N·m]; ring (L, P, 7) [N·m]; delays
    (P, 7) int64 [ticks] per candidate and joint; neg_breakaway (P, 7) [N·m]; counter (P,) int64 ticks done; qpos_adr,
    dof_adr (7,) int64. The law: joint impedance with springs (T, 7) [rad] and table (T, 30)
    (replay.joint_tick_table) per tick, or the Cartesian law with cart_targets (T, 7) [m, xyzw]
    per tick, cart_params (CART_PARAMS_SIZE,), hold (P, 7) (the pose held during warm-up,
    written at tick 0), jnt_ids (7,) int64 and site_id (the `ee` site). Samples mode: q_out,
    dq_out, tau_out (S, P, 7). Errors mode: q_ref, dq_ref (S, 7), scales (2,) [q_scale,
    dq_scale], sum_sq (P, 2). inertia_rows (P, 14): the true payload and configured load of
    each candidate (the firmware's Coriolis feed-forward, load_dynamics.py), None when equal;
    feedforward (P, 7) [N·m] the callback's scratch for that feed-forward. links (P, B + 7),
    link_bodies (B, 2) int64, link_firmware (B + 4,): the links' torque (links.py), None when
    every candidate's links are the model's and no load-dependent friction is set.
    controller_noise (P, T, 14): [q | dq] offsets added to what the joint law reads at each
    tick (controller_noise.ControllerNoise), None for the noise-free state.
    """

    sample_of_tick: np.ndarray
    tau_prev: np.ndarray
    ring: np.ndarray
    delays: np.ndarray
    neg_breakaway: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    springs: np.ndarray | None = None
    table: np.ndarray | None = None
    cart_targets: np.ndarray | None = None
    cart_params: np.ndarray | None = None
    hold: np.ndarray | None = None
    jnt_ids: np.ndarray | None = None
    site_id: int = -1
    load: np.ndarray | None = None
    friction_law: int = 0
    extras: np.ndarray | None = None
    inertia_rows: np.ndarray | None = None
    links: np.ndarray | None = None
    link_bodies: np.ndarray | None = None
    link_firmware: np.ndarray | None = None
    controller_noise: np.ndarray | None = None
    outputs: tuple[np.ndarray, ...] = ()  # (q_out, dq_out, tau_out)
    errors: tuple[np.ndarray, ...] = ()  # (q_ref, dq_ref, scales, sum_sq)
    counter: np.ndarray = field(init=False)
    feedforward: np.ndarray = field(init=False)
    address_table: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        arrays = {name: getattr(self, name) for name in _SLOTS if getattr(self, name, None) is not None}
        arrays.update(zip(("q_out", "dq_out", "tau_out"), self.outputs))
        arrays.update(zip(("q_ref", "dq_ref", "scales", "sum_sq"), self.errors))
        for name, array in arrays.items():
            want = np.int64 if name in _INT_ARRAYS else np.float64
            if array.dtype != want or not array.flags.c_contiguous:
                raise ValueError(f"ReplayContext.{name}: expected a C-contiguous {np.dtype(want)} array")
        cartesian = self.cart_targets is not None
        if (self.springs is None or self.table is None) and not cartesian:
            raise ValueError("ReplayContext: springs and table (joint) or cart_targets (Cartesian) are needed")
        if (self.load is not None or self.inertia_rows is not None or self.links is not None) and (
                self.jnt_ids is None or self.site_id < 0):
            raise ValueError("ReplayContext: a load or the links need jnt_ids and site_id")
        if self.controller_noise is not None and (cartesian or self.controller_noise.shape != (
                self.tau_prev.shape[0], self.sample_of_tick.shape[0], 14)):
            raise ValueError("ReplayContext.controller_noise: expected (P, T, 14) under the joint law")
        if self.links is not None and (self.link_bodies is None or self.link_firmware is None):
            raise ValueError("ReplayContext: links need link_bodies and link_firmware")
        population = self.tau_prev.shape[0]
        if self.delays.shape != (population, 7):
            raise ValueError(f"ReplayContext.delays: expected shape ({population}, 7), got {self.delays.shape}")
        self.counter = np.zeros(population, dtype=np.int64)
        self.feedforward = np.zeros((population, 7))
        t = np.zeros(CONTEXT_SIZE, dtype=np.int64)
        t[MODE] = MODE_ERRORS if self.errors else MODE_SAMPLES
        t[CONTROLLER] = CARTESIAN if cartesian else JOINT
        t[N_TICKS], t[N_CANDIDATES], t[RING_LENGTH] = self.sample_of_tick.shape[0], population, self.ring.shape[0]
        t[N_SAMPLES] = (self.outputs or self.errors)[0].shape[0]
        t[SITE_ID] = self.site_id
        t[FRICTION_LAW] = self.friction_law
        t[N_LINK_BODIES] = 0 if self.link_bodies is None else self.link_bodies.shape[0]
        for name, array in arrays.items():
            t[_SLOTS[name]] = array.ctypes.data
        t[COUNTER] = self.counter.ctypes.data
        t[FEEDFORWARD] = self.feedforward.ctypes.data
        self.address_table = t

    def userdata_rows(self) -> np.ndarray:
        """(P, USERDATA_SLOTS) userdata that points each simulation at its row of this context
        (a float64 holds any user-space address exactly: they are below 2⁴⁸)."""
        rows = np.zeros((self.tau_prev.shape[0], USERDATA_SLOTS))
        rows[:, 0] = MAGIC
        rows[:, 1] = float(self.address_table.ctypes.data)
        rows[:, 2] = np.arange(self.tau_prev.shape[0])
        return rows


# where each array's address goes in the context table
_SLOTS = {"springs": SPRINGS, "table": TABLE, "sample_of_tick": SAMPLE_OF_TICK, "tau_prev": TAU_PREV, "ring": RING,
          "delays": DELAYS, "neg_breakaway": NEG_BREAKAWAY, "qpos_adr": QPOS_ADR, "dof_adr": DOF_ADR,
          "q_out": Q_OUT, "dq_out": DQ_OUT, "tau_out": TAU_OUT, "q_ref": Q_REF, "dq_ref": DQ_REF,
          "scales": SCALES, "sum_sq": SUM_SQ, "cart_targets": CART_TARGETS, "cart_params": CART_PARAMS,
          "hold": HOLD, "jnt_ids": JNT_IDS, "load": LOAD, "extras": EXTRAS, "inertia_rows": INERTIA_ROWS,
          "links": LINKS, "link_bodies": LINK_BODIES, "link_firmware": LINK_FIRMWARE,
          "controller_noise": CONTROLLER_NOISE}
_INT_ARRAYS = frozenset({"sample_of_tick", "delays", "qpos_adr", "dof_adr", "jnt_ids", "link_bodies"})


__all__ = ["CARTESIAN", "CART_PARAMS_SIZE", "CONTEXT_SIZE", "CONTROLLER_NOISE", "EXTRAS", "FEEDFORWARD", "FRICTION_LAW", "INERTIA_ROWS", "JOINT",
           "LINKS", "LINK_BODIES", "LINK_FIRMWARE", "LOAD", "N_LINK_BODIES", "MAGIC", "MODE_ERRORS", "MODE_SAMPLES",
           "USERDATA_SLOTS", "ReplayContext"]
