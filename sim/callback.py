"""The replay tick as MuJoCo's control callback: a whole interval in one batch call.

MuJoCo calls `mjcb_control(m, d)` inside every `mj_step`, after the position and velocity
stages (qpos, qvel, qfrc_bias, the site pose, joint anchors and axes current) and before
actuation and acceleration: exactly where the population engine's per-tick loop computed
the control. Installed as a C function (a numba `cfunc`, as mujoco.batch asks of physics
callbacks), it runs on the batch's own worker threads with no Python and no GIL in the loop,
so `Batch.step(nstep=T)` replays a T-tick interval for every candidate in one call, as
`mujoco.rollout` steps open loop. Joint impedance uses the per-tick path's arithmetic
(kernels._joint_law, kernels.sliding_relief, the springs of kernels.ema_springs), bit for
bit; FrankaTwin's Cartesian law is written out element by element (_callback_body.py) and
agrees with the numpy law to round-off (tests/sim/test_callback.py).

How the callback finds its data. Each simulation's userdata (load_model reserves
USERDATA_SLOTS) holds [MAGIC, address of its replay's context table, candidate row]; the
context (ReplayContext) is an int64 table of the addresses and sizes of that replay's numpy
arrays. Any other MjData stepped while the callback is installed lacks the magic (or the
userdata) and is left alone. MjData's arrays are reached through their pointer fields:
MuJoCo's own introspection gives the field order (every field from `buffer` on is one
8-byte pointer), and the offset of `buffer` is found and checked against a live MjData's
array addresses. If that check fails (a MuJoCo whose layout differs) compiled_loop_error()
says why and the engine keeps its per-tick loop.

The cfunc is compiled on first use in each process (~3.5–4 s; not cached on disk, because the
offsets are compile-time constants that a MuJoCo upgrade would change under the cache).

Public API:
  USERDATA_SLOTS                       userdata entries a model needs (load_model reserves them)
  compiled_loop_error(model) -> str | None   why the callback cannot drive `model` (None: it can)
  installed()                          context manager → bool: the callback installed
                                       process-wide (nested and thread-safe; False when another
                                       callback is installed, which is left in place)
  ReplayContext                        one shard's replay of one input: its arrays and table
"""

from __future__ import annotations

import ctypes
import functools
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import mujoco
import numpy as np

USERDATA_SLOTS = 3  # [MAGIC, context address, candidate row]
MAGIC = 7.254e301  # marks a simulation whose userdata this module wrote
_DATA_FIELDS = ("qpos", "qvel", "qfrc_bias", "qfrc_applied", "userdata", "site_xpos", "site_xmat", "xanchor", "xaxis")
_SCAN_LIMIT_BYTES = 1 << 22

# context table layout (int64): sizes, then array addresses
_MODE, _T, _S, _P, _L = 0, 1, 2, 3, 4
_SPRINGS, _TABLE, _SAMPLES, _TAU_PREV, _RING, _DELAYS, _NEG_BREAKAWAY, _COUNTER = 5, 6, 7, 8, 9, 10, 11, 12
_Q_OUT, _DQ_OUT, _TAU_OUT, _Q_REF, _DQ_REF, _SCALES, _SUM_SQ, _QADR, _DOFADR = 13, 14, 15, 16, 17, 18, 19, 20, 21
_CONTROLLER, _CART_TARGETS, _CART_PARAMS, _HOLD, _JNT_IDS, _SITE_ID = 22, 23, 24, 25, 26, 27
_CONTEXT_SIZE = 28
MODE_SAMPLES, MODE_ERRORS = 0, 1
JOINT, CARTESIAN = 0, 1
# cart_params layout: [kp_pos, kp_ori, kd_pos, kd_ori, use_coriolis, slew N·m/tick (≤ 0: off), warmup_ticks, 0]
CART_PARAMS_SIZE = 8


def _pointer_offsets() -> dict[str, int]:
    """Byte offsets of MjData's pointer fields _DATA_FIELDS (and of mjModel.nuserdata under
    'nuserdata'), found and checked on live structs; RuntimeError if the layout is not as
    MuJoCo's introspection describes."""
    from mujoco.introspect import structs

    data_fields = [f.name for f in structs.STRUCTS["mjData"].fields]
    first_pointer = data_fields.index("buffer")
    relative = {name: 8 * (data_fields.index(name) - first_pointer) for name in _DATA_FIELDS}
    probe_xml = ('<mujoco><size nuserdata="{}"/><worldbody><body><joint/><geom size=".1"/><site/>'
                 "</body></worldbody></mujoco>")
    models = [mujoco.MjModel.from_xml_string(probe_xml.format(n)) for n in (USERDATA_SLOTS, 5)]
    datas = [mujoco.MjData(m) for m in models]
    base = _find_base(datas[0], relative)
    offsets = {name: base + rel for name, rel in relative.items()}
    model_fields = [f.name for f in structs.STRUCTS["mjModel"].fields]
    offsets["nuserdata"] = 8 * model_fields.index("nuserdata")  # the leading mjtSize counts
    for m, d in zip(models, datas):
        if not _layout_matches(m, d, offsets):
            raise RuntimeError("MjData/MjModel layout differs from mujoco.introspect's description")
    return offsets


def _word(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


def _find_base(data: mujoco.MjData, relative: dict[str, int]) -> int:
    """Offset of `buffer` in the struct: where every field's pointer is its array's address.
    Reads only up to the first match of the earliest field, so it stays inside the struct."""
    start = data._address
    wanted = {name: getattr(data, name).ctypes.data for name in relative}
    first = min(relative, key=relative.get)
    for base in range(0, _SCAN_LIMIT_BYTES, 8):
        if _word(start + base + relative[first]) != wanted[first]:
            continue
        if all(_word(start + base + relative[n]) == wanted[n] for n in relative):
            return base
    raise RuntimeError("MjData's array pointers were not found where mujoco.introspect puts them")


def _layout_matches(model: mujoco.MjModel, data: mujoco.MjData, offsets: dict[str, int]) -> bool:
    pointers = all(_word(data._address + offsets[n]) == getattr(data, n).ctypes.data for n in _DATA_FIELDS)
    return pointers and _word(model._address + offsets["nuserdata"]) == model.nuserdata


@functools.cache
def _offsets_or_error() -> tuple[dict[str, int] | None, str | None]:
    try:
        return _pointer_offsets(), None
    except (RuntimeError, ValueError, KeyError, AttributeError) as exc:
        return None, f"MuJoCo {mujoco.__version__}: {exc}"


def compiled_loop_error(model: mujoco.MjModel) -> str | None:
    """None if the compiled callback can drive `model`, else why not (the engine then steps
    tick by tick)."""
    offsets, error = _offsets_or_error()
    if error is not None:
        return error
    if model.nuserdata < USERDATA_SLOTS:
        return f"the model has nuserdata {model.nuserdata} < {USERDATA_SLOTS} (load_model reserves them)"
    if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_ACTUATION:
        return "the model disables actuation, and with it the control callback"
    if not _layout_matches(model, mujoco.MjData(model), offsets):
        return "the model's MjData does not have the expected layout"
    return None


@dataclass
class ReplayContext:
    """The arrays one shard's callback replay reads and writes, kept alive for the call.

    sample_of_tick (T,) int64 (−1: none); tau_prev (P, 7) [N·m]; ring (L, P, 7) [N·m]; delays
    (P,) int64 [ticks]; neg_breakaway (P, 7) [N·m]; counter (P,) int64 ticks done; qpos_adr,
    dof_adr (7,) int64. The law: joint impedance with springs (T, 7) [rad] and table (T, 30)
    (replay.joint_tick_table) per tick, or the Cartesian law with cart_targets (T, 7) [m, xyzw]
    per tick, cart_params (CART_PARAMS_SIZE,), hold (P, 7) (the pose held during warm-up,
    written at tick 0), jnt_ids (7,) int64 and site_id (the `ee` site). Samples mode: q_out,
    dq_out, tau_out (S, P, 7). Errors mode: q_ref, dq_ref (S, 7), scales (2,) [q_scale,
    dq_scale], sum_sq (P, 2).
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
    outputs: tuple[np.ndarray, ...] = ()  # (q_out, dq_out, tau_out)
    errors: tuple[np.ndarray, ...] = ()  # (q_ref, dq_ref, scales, sum_sq)
    counter: np.ndarray = field(init=False)
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
        population = self.tau_prev.shape[0]
        self.counter = np.zeros(population, dtype=np.int64)
        t = np.zeros(_CONTEXT_SIZE, dtype=np.int64)
        t[_MODE] = MODE_ERRORS if self.errors else MODE_SAMPLES
        t[_CONTROLLER] = CARTESIAN if cartesian else JOINT
        t[_T], t[_P], t[_L] = self.sample_of_tick.shape[0], population, self.ring.shape[0]
        t[_S] = (self.outputs or self.errors)[0].shape[0]
        t[_SITE_ID] = self.site_id
        for name, array in arrays.items():
            t[_SLOTS[name]] = array.ctypes.data
        t[_COUNTER] = self.counter.ctypes.data
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
_SLOTS = {"springs": _SPRINGS, "table": _TABLE, "sample_of_tick": _SAMPLES, "tau_prev": _TAU_PREV, "ring": _RING,
          "delays": _DELAYS, "neg_breakaway": _NEG_BREAKAWAY, "qpos_adr": _QADR, "dof_adr": _DOFADR,
          "q_out": _Q_OUT, "dq_out": _DQ_OUT, "tau_out": _TAU_OUT, "q_ref": _Q_REF, "dq_ref": _DQ_REF,
          "scales": _SCALES, "sum_sq": _SUM_SQ, "cart_targets": _CART_TARGETS, "cart_params": _CART_PARAMS,
          "hold": _HOLD, "jnt_ids": _JNT_IDS}
_INT_ARRAYS = frozenset({"sample_of_tick", "delays", "qpos_adr", "dof_adr", "jnt_ids"})

_install_lock = threading.Lock()
_install_count = 0


@contextmanager
def installed():
    """Install the control callback for the duration (nested and thread-safe); yields True
    when it is installed, False when another mjcb_control is in place (left untouched)."""
    global _install_count
    with _install_lock:  # also makes the first compile happen once when threads race to it
        pointer = _callback().ctypes
        current = mujoco.get_mjcb_control()
        ours = current is None or current is pointer
        if ours:
            if _install_count == 0:
                mujoco.set_mjcb_control(pointer)
            _install_count += 1
    try:
        yield ours
    finally:
        if ours:
            with _install_lock:
                _install_count -= 1
                if _install_count == 0 and mujoco.get_mjcb_control() is pointer:
                    mujoco.set_mjcb_control(None)  # one installed meanwhile by someone else stays


@functools.cache
def _callback():
    """Compile the callback for this process's MuJoCo layout (the numba cfunc)."""
    offsets, error = _offsets_or_error()
    if error is not None:
        raise RuntimeError(error)
    from ._callback_body import make_callback

    return make_callback(offsets, MAGIC, USERDATA_SLOTS)


__all__ = ["MODE_ERRORS", "MODE_SAMPLES", "USERDATA_SLOTS", "ReplayContext", "compiled_loop_error", "installed"]
