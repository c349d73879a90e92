"""The replay tick as MuJoCo's control callback: a whole interval in one batch call.

MuJoCo calls `mjcb_control(m, d)` inside every `mj_step`, after the position and velocity
stages (qpos, qvel, qfrc_bias, the site pose, joint anchors and axes current) and before
actuation and acceleration: exactly where the population engine's generic loop computes
the control. Installed as a C function (a numba `cfunc`, as mujoco.batch asks of physics
callbacks), it runs on the batch's own worker threads with no Python and no GIL in the loop,
so `Batch.step(nstep=T)` replays a T-tick interval for every candidate in one call, as
`mujoco.rollout` steps open loop. Joint impedance uses the generic loop's arithmetic
(kernels._joint_law, kernels.sliding_relief, the springs of kernels.ema_springs), bit for
bit; FrankaTwin's Cartesian law is written out element by element (_callback_body.py) and
agrees with the numpy law to round-off (tests/sim/test_callback.py).

How the callback finds its data. Each simulation's userdata (load_model reserves
USERDATA_SLOTS) holds [MAGIC, address of its replay's context table, candidate row]; the
context (ReplayContext, laid out in replay_context.py) is an int64 table of the addresses and
sizes of that replay's numpy arrays. Any other MjData stepped while the callback is installed
lacks the magic (or the userdata) and is left alone. MjData's arrays are reached through
their pointer fields: MuJoCo's own introspection gives the field order (every field from
`buffer` on is one 8-byte pointer), and the offset of `buffer` is found and checked against a
live MjData's array addresses. If that check fails (a MuJoCo whose layout differs) compiled_loop_error()
says why and the engine keeps its generic loop.

The cfunc is compiled once per machine (~10 s) and cached on disk by numba (~1 s to load in a
fresh process, a Ray actor or a CLI run). The cache is keyed on the closure's values: the
offsets (a MuJoCo with another layout compiles afresh) and a digest of the sim sources the body
inlines (_callback_body.source_digest; numba itself stamps only the body's own file).

Public API:
  USERDATA_SLOTS                       userdata entries a model needs (load_model reserves them)
  compiled_loop_error(model) -> str | None   why the callback cannot drive `model` (None: it can)
  installed()                          context manager → bool: the callback installed
                                       process-wide (nested and thread-safe; False when another
                                       callback is installed, which is left in place)
  ReplayContext                        one shard's replay of one input: its arrays and table
                                       (from replay_context.py, with USERDATA_SLOTS)
"""

from __future__ import annotations

import ctypes
import functools
import threading
from contextlib import contextmanager

import mujoco

from ._callback_body import make_callback
from .replay_context import MAGIC, MODE_ERRORS, MODE_SAMPLES, USERDATA_SLOTS, ReplayContext

_DATA_FIELDS = ("qpos", "qvel", "qfrc_bias", "qfrc_applied", "userdata", "site_xpos", "site_xmat", "xanchor", "xaxis",
                "xipos")
_SCAN_LIMIT_BYTES = 1 << 22


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
    return make_callback(offsets, MAGIC, USERDATA_SLOTS)


__all__ = ["MODE_ERRORS", "MODE_SAMPLES", "USERDATA_SLOTS", "ReplayContext", "compiled_loop_error", "installed"]
