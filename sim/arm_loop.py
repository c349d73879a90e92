"""SimFR3's recorded ticks, many in one compiled call: the recorders' loop without Python per tick.

`run_recorded_ticks` repeats, for n ticks, exactly what `SimFR3.step_recorded` does for a tick
without a command (same kernels, same order, so the same bits): MuJoCo's `mj_step1`, the
flange pose into the outputs, the Coriolis feed-forward
(`load_dynamics.load_feedforward`: qfrc_bias itself unless the loads differ), `kernels.arm_step` (noise, EMA, the joint law and slew, the
delay line and friction law into `qfrc_applied`), the loads' gravity torque and the joint
extras when the plant has them, `mj_step2`, and the link torque of the step
(applied + passive + constraint). MuJoCo's two C functions are called through their
addresses in the loaded `libmujoco` (`step_functions()`), so the loop is an ordinary numba
function, cached on disk, and needs no control callback (no process-wide state).

`step_functions()` is None when the library or its symbols cannot be found, or its version
differs from the bindings'; SimFR3 then steps tick by tick.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import mujoco
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .kernels import _JIT, add_joint_extras, add_load_torque, arm_step
from .load_dynamics import load_feedforward


@intrinsic
def _call_step(typingctx, function, model, data):
    """Call `void function(const mjModel*, mjData*)` at int64 addresses."""
    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [pointer, pointer])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(fn, [builder.inttoptr(args[1], pointer), builder.inttoptr(args[2], pointer)])
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64), codegen


@functools.cache
def step_functions() -> tuple[int, int] | None:
    """Addresses of mj_step1 and mj_step2 in the libmujoco the bindings loaded, or None."""
    folder = os.path.dirname(mujoco.__file__)
    for path in sorted(glob.glob(os.path.join(folder, "libmujoco.so*")) + glob.glob(os.path.join(folder, "libmujoco*.dylib"))):
        try:
            lib = ctypes.CDLL(path)
            lib.mj_versionString.restype = ctypes.c_char_p
            if lib.mj_versionString().decode() != mujoco.mj_versionString():
                continue
            return (ctypes.cast(lib.mj_step1, ctypes.c_void_p).value, ctypes.cast(lib.mj_step2, ctypes.c_void_p).value)
        except (OSError, AttributeError):
            continue
    return None


@njit(**_JIT)
def run_recorded_ticks(step1, step2, model, data, offsets, measured, tau_out, ema_out, ee_pos_out, ee_xmat_out,
                       qpos, qvel, tau_j, bias, applied, passive, constraint, site_xpos, site_xmat, xanchor, xaxis,
                       site, jnt_ids, joint_mode, ema, keep, alpha_target, k, d, use_friction, tau_prev,
                       ring, tick, delays, coef, law, load, loaded, extras, extra, inertia_rows, feedforward):
    """n = len(offsets) recorded ticks; returns the delay line's tick after them.

    Per tick i: mj_step1; ee_pos_out[i] (3,), ee_xmat_out[i] (9,) ← the flange site's pose;
    kernels.arm_step with offsets[i] (21,) into measured[i] (21,), tau_out[i], ema_out[i] (7,);
    + the load torque (if loaded) and the joint extras (if extra); mj_step2; tau_j (7,) ←
    applied + passive + constraint. The law's Coriolis term is feedforward (1, 7) ← bias with
    the loads of inertia_rows (1, 14) (load.load_inertia_rows). qpos, qvel, bias, applied, passive, constraint: (7,) views
    of MjData's arm rows; site_xpos, site_xmat, xanchor, xaxis: (1, n, 3|9) views of MjData.
    step1, step2, model, data: addresses (step_functions(), MjModel/MjData `_address`).
    """
    qvel_row, applied_row = qvel.reshape((1, 7)), applied.reshape((1, 7))
    bias_row, coriolis = bias.reshape((1, 7)), feedforward[0]
    for i in range(offsets.shape[0]):
        _call_step(step1, model, data)
        for j in range(3):
            ee_pos_out[i, j] = site_xpos[0, site, j]
        for j in range(9):
            ee_xmat_out[i, j] = site_xmat[0, site, j]
        load_feedforward(inertia_rows, site_xpos, site_xmat, xanchor, xaxis, site, jnt_ids, qvel_row, bias_row, feedforward)
        arm_step(qpos, qvel, tau_j, offsets[i], measured[i], coriolis, joint_mode, ema, keep, alpha_target, k, d,
                 use_friction, tau_prev, ring, tick, delays, coef, applied, tau_out[i], ema_out[i], law)
        if loaded:
            add_load_torque(load, site_xpos, site_xmat, xanchor, xaxis, site, jnt_ids, applied_row)
        if extra:
            add_joint_extras(qvel_row, extras, applied_row)
        tick += 1
        _call_step(step2, model, data)
        for j in range(7):
            tau_j[j] = applied[j] + passive[j]
        for j in range(7):
            tau_j[j] = tau_j[j] + constraint[j]
    return tick


__all__ = ["run_recorded_ticks", "step_functions"]
