"""The compiled body of callback.py's control callback (numba), built for one MjData layout.

make_callback(offsets, magic, slots) → a numba cfunc `void(const mjModel*, mjData*)`; its
`.ctypes` is what mujoco.set_mjcb_control takes. Per call (one simulation, one tick k):
  1. skip unless the model has ≥ slots userdata and userdata[0] == magic;
  2. the law of kernels._joint_law on this candidate's q, dq and qfrc_bias with tick k's
     spring target, gains and friction flag, slew-limited into its tau_prev row;
  3. at a sample tick: q, dq, τ into the outputs (samples mode) or the squared scaled errors
     into sum_sq (errors mode);
  4. the delay ring and qfrc_applied = τ_cmd(k − delay) + sliding relief, as
     kernels.apply_delayed_torque;
  5. counter += 1 (a simulation stepped past its interval's end is left alone).
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from . import callback as cb
from .kernels import _joint_law, sliding_relief


@intrinsic
def _f64_at(typingctx, address):
    """int64 address → float64*."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.float64)))
    return types.CPointer(types.float64)(types.int64), codegen


@intrinsic
def _i64_at(typingctx, address):
    """int64 address → int64*."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))
    return types.CPointer(types.int64)(types.int64), codegen


@intrinsic
def _address_of(typingctx, pointer):
    """void* → int64 address."""
    def codegen(context, builder, signature, args):
        return builder.ptrtoint(args[0], context.get_value_type(types.int64))
    return types.int64(types.voidptr), codegen


@njit(inline="always")
def _word(address):
    return carray(_i64_at(address), 1)[0]


def make_callback(offsets: dict[str, int], magic: float, slots: int):
    """The cfunc for a layout: offsets of qpos, qvel, qfrc_bias, qfrc_applied and userdata in
    mjData and of nuserdata in mjModel (callback._pointer_offsets)."""
    off_qpos, off_qvel, off_bias = offsets["qpos"], offsets["qvel"], offsets["qfrc_bias"]
    off_applied, off_userdata, off_nuserdata = offsets["qfrc_applied"], offsets["userdata"], offsets["nuserdata"]
    n_context = cb._CONTEXT_SIZE
    big = 1 << 40  # carray lengths for MjData's arrays: indexed only at the arm's addresses

    @cfunc(types.void(types.voidptr, types.voidptr), nopython=True, error_model="numpy", boundscheck=False)
    def control(m, d):
        model_address, data_address = _address_of(m), _address_of(d)
        if _word(model_address + off_nuserdata) < slots:
            return
        userdata = carray(_f64_at(_word(data_address + off_userdata)), slots)
        if userdata[0] != magic:
            return
        ctx = carray(_i64_at(np.int64(userdata[1])), n_context)
        p = np.int64(userdata[2])
        n_ticks, n_samples, population, ring_length = ctx[cb._T], ctx[cb._S], ctx[cb._P], ctx[cb._L]
        counter = carray(_i64_at(ctx[cb._COUNTER]), population)
        k = counter[p]
        if k >= n_ticks:
            return
        counter[p] = k + 1
        table = carray(_f64_at(ctx[cb._TABLE]), (n_ticks, 30))
        springs = carray(_f64_at(ctx[cb._SPRINGS]), (n_ticks, 7))
        tau_prev = carray(_f64_at(ctx[cb._TAU_PREV]), (population, 7))
        qadr = carray(_i64_at(ctx[cb._QADR]), 7)
        dofadr = carray(_i64_at(ctx[cb._DOFADR]), 7)
        qpos = carray(_f64_at(_word(data_address + off_qpos)), big)
        qvel = carray(_f64_at(_word(data_address + off_qvel)), big)
        bias = carray(_f64_at(_word(data_address + off_bias)), big)
        applied = carray(_f64_at(_word(data_address + off_applied)), big)
        use_friction = table[k, 1] != 0.0
        for j in range(7):
            tau_prev[p, j] = _joint_law(j, qpos[qadr[j]], qvel[dofadr[j]], springs[k, j], table[k, 16 + j],
                                        table[k, 23 + j], bias[dofadr[j]], use_friction, tau_prev[p, j])
        sample = carray(_i64_at(ctx[cb._SAMPLES]), n_ticks)[k]
        if sample >= 0:
            if ctx[cb._MODE] == cb.MODE_SAMPLES:
                q_out = carray(_f64_at(ctx[cb._Q_OUT]), (n_samples, population, 7))
                dq_out = carray(_f64_at(ctx[cb._DQ_OUT]), (n_samples, population, 7))
                tau_out = carray(_f64_at(ctx[cb._TAU_OUT]), (n_samples, population, 7))
                for j in range(7):
                    q_out[sample, p, j] = qpos[qadr[j]]
                    dq_out[sample, p, j] = qvel[dofadr[j]]
                    tau_out[sample, p, j] = tau_prev[p, j]
            else:
                q_ref = carray(_f64_at(ctx[cb._Q_REF]), (n_samples, 7))
                dq_ref = carray(_f64_at(ctx[cb._DQ_REF]), (n_samples, 7))
                scales = carray(_f64_at(ctx[cb._SCALES]), 2)
                sum_sq = carray(_f64_at(ctx[cb._SUM_SQ]), (population, 2))
                for j in range(7):
                    e_q = (qpos[qadr[j]] - q_ref[sample, j]) / scales[0]
                    e_dq = (qvel[dofadr[j]] - dq_ref[sample, j]) / scales[1]
                    sum_sq[p, 0] += e_q * e_q
                    sum_sq[p, 1] += e_dq * e_dq
        ring = carray(_f64_at(ctx[cb._RING]), (ring_length, population, 7))
        delays = carray(_i64_at(ctx[cb._DELAYS]), population)
        neg_breakaway = carray(_f64_at(ctx[cb._NEG_BREAKAWAY]), (population, 7))
        slot, source = k % ring_length, (k - delays[p]) % ring_length
        for j in range(7):
            ring[slot, p, j] = tau_prev[p, j]
        for j in range(7):
            applied[dofadr[j]] = sliding_relief(qvel[dofadr[j]], neg_breakaway[p, j]) + ring[source, p, j]

    return control
