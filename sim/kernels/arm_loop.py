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

`take_command` is the one definition of how a tick's controller takes a command (SimFR3's
`apply_command` and the daemon's commands call it too); `run_commanded_ticks` runs a stretch
of ticks whose commands are known up front (the offline recorder: a whole reference), taking
each at its tick and running `run_recorded_ticks` between them, in one compiled call.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import mujoco
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .tick import _JIT, add_joint_extras, add_load_torque, arm_step
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


# A command as a row of float64 (COMMAND_WIDTH): controller (fr3_stack ControllerType: 0 idle,
# 2 joint impedance) | q_target [rad] (7) | K [N·m/rad] (7) | D [N·m·s/rad] (7) | α | use_friction
COMMAND_WIDTH = 24
CMD_MODE, CMD_Q, CMD_K, CMD_D, CMD_ALPHA, CMD_FRICTION = 0, 1, 8, 15, 22, 23
# The controller's state besides the EMA, a row of float64 (STATE_WIDTH): mode | reset_count |
# keep = 1 − α | α | use_friction | q_target (7) | α·q_target (7) | K (7) | D (7)
STATE_WIDTH = 33
ST_MODE, ST_RESETS, ST_KEEP, ST_ALPHA, ST_FRICTION, ST_Q, ST_ALPHA_Q, ST_K, ST_D = 0, 1, 2, 3, 4, 5, 12, 19, 26
_IDLE, _JOINT = 0.0, 2.0


@njit(**_JIT)
def take_command(row, q_meas, ema, state):
    """A command row (COMMAND_WIDTH,) as fr3_stack's RT callback takes it before its law, on
    the tick's measured q (7,) [rad]: a switch into joint impedance resets the EMA (7,) to
    q_meas and counts a reset; under joint impedance the target, gains and α take effect
    (keep = 1 − α and α·q_target formed once, as the EMA uses them); idle changes the mode
    only. state (STATE_WIDTH,) is updated in place."""
    if row[CMD_MODE] == _JOINT:
        if state[ST_MODE] != _JOINT:
            for j in range(7):
                ema[j] = q_meas[j]
            state[ST_RESETS] += 1.0
        state[ST_MODE] = _JOINT
        alpha = row[CMD_ALPHA]
        state[ST_KEEP] = 1.0 - alpha
        state[ST_ALPHA] = alpha
        state[ST_FRICTION] = row[CMD_FRICTION]
        for j in range(7):
            state[ST_Q + j] = row[CMD_Q + j]
            state[ST_ALPHA_Q + j] = row[CMD_Q + j] * alpha
            state[ST_K + j] = row[CMD_K + j]
            state[ST_D + j] = row[CMD_D + j]
    elif row[CMD_MODE] == _IDLE:
        state[ST_MODE] = _IDLE


@njit(**{**_JIT, "nogil": True})  # offline only: another thread may format the previous stretch meanwhile
def run_commanded_ticks(step1, step2, model, data, first_tick, cmd_ticks, cmd_rows, cursor, last, state, states_out,
                        versions, offsets, measured, tau_out, ema_out, ee_pos_out, ee_xmat_out, qpos, qvel, tau_j, bias,
                        applied, passive, constraint, site_xpos, site_xmat, xanchor, xaxis, site, jnt_ids, ema,
                        tau_prev, ring, tick, delays, coef, law, load, loaded, extras, extra, inertia_rows,
                        feedforward):
    """n = len(offsets) recorded ticks numbered first_tick.., with the commands cmd_rows
    (C, COMMAND_WIDTH) due at cmd_ticks (C,) (ascending): at each tick the latest due command
    not yet taken (from index `cursor` on) goes through take_command on that tick's measured q
    (true q + offsets[i, :7]), its state is copied into states_out[c] (C, STATE_WIDTH), then
    run_recorded_ticks runs up to the next command's tick. versions[i] (n,) int64 ← the index
    of the command in force at tick i (`last` before the first taken here, −1 for none).
    Other arguments as run_recorded_ticks'. Returns (delay line tick, cursor, last)."""
    n = offsets.shape[0]
    q_meas = np.empty(7)
    i = 0
    while i < n:
        now = first_tick + i
        taken = -1
        while cursor < cmd_ticks.shape[0] and cmd_ticks[cursor] <= now:  # latest wins
            taken = cursor
            cursor += 1
        if taken >= 0:
            for j in range(7):
                q_meas[j] = qpos[j] + offsets[i, j]
            take_command(cmd_rows[taken], q_meas, ema, state)
            states_out[taken, :] = state
            last = taken
        end = n
        if cursor < cmd_ticks.shape[0]:
            end = min(n, max(i + 1, cmd_ticks[cursor] - first_tick))
        versions[i:end] = last
        tick = run_recorded_ticks(step1, step2, model, data, offsets[i:end], measured[i:end], tau_out[i:end],
                                  ema_out[i:end], ee_pos_out[i:end], ee_xmat_out[i:end], qpos, qvel, tau_j, bias,
                                  applied, passive, constraint, site_xpos, site_xmat, xanchor, xaxis, site, jnt_ids,
                                  state[ST_MODE] == _JOINT, ema, state[ST_KEEP], state[ST_ALPHA_Q:ST_ALPHA_Q + 7],
                                  state[ST_K:ST_K + 7], state[ST_D:ST_D + 7], state[ST_FRICTION] != 0.0, tau_prev,
                                  ring, tick, delays, coef, law, load, loaded, extras, extra, inertia_rows,
                                  feedforward)
        i = end
    return tick, cursor, last


__all__ = ["COMMAND_WIDTH", "STATE_WIDTH", "run_commanded_ticks", "run_recorded_ticks", "step_functions",
           "take_command"]
