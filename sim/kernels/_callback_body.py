"""The compiled body of callback.py's control callback (numba), built for one MjData layout.

It reads the replay context as replay_context.py lays it out (the slot numbers it imports).

make_callback(offsets, magic, slots) → a numba cfunc `void(const mjModel*, mjData*)`; its
`.ctypes` is what mujoco.set_mjcb_control takes. Per call (one simulation, one tick k):
  1. skip unless the model has ≥ slots userdata and userdata[0] == magic;
  2. the Coriolis feed-forward into this candidate's feedforward row: qfrc_bias, with the
     configured load's velocity-product torque in place of the true payload's where the two
     differ (as load_dynamics.load_feedforward);
     the law, slew-limited into this candidate's tau_prev row: joint impedance
     (kernels._joint_law on q, dq — plus the candidate's controller noise of tick k when the
     context has it — and that feed-forward with tick k's spring target, gains and
     friction flag), or FrankaTwin's Cartesian law (_cartesian_command: the element-wise
     form of controllers.cartesian_impedance_torque and cartesian_clamp_and_slew, which agree
     with it to round-off, not bit for bit: numpy's einsum sums in its own order);
  3. at a sample tick: q, dq, τ into the outputs (samples mode) or the squared scaled errors
     into sum_sq (errors mode);
  4. the delay ring and qfrc_applied = τ_cmd(k − delay_j) (joint j's delay) + the friction law's torque, as
     kernels.apply_delayed_torque, then + the loads' gravity torque where the candidate has a
     load, as kernels.add_load_torque, then + the links' torque where the candidate has them, as
     link_dynamics.add_link_torque, then + the bias and Coulomb asymmetry, as
     kernels.add_joint_extras;
  5. counter += 1 (a simulation stepped past its interval's end is left alone).
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from ...contracts.kernel_cache import sources_digest
from ..fr3 import CART_TORQUE_LIMIT_NM
from .tick import _joint_law, friction_torque, joint_extra, load_joint_torque, load_point
from .link_dynamics import link_torque
from .load_dynamics import loads_equal, velocity_product_torque
from .replay_context import (  # the context table's slots and values
    CARTESIAN, CART_PARAMS, CART_PARAMS_SIZE, CART_TARGETS, CONTEXT_SIZE, CONTROLLER, CONTROLLER_NOISE, COUNTER, DELAYS,
    DOF_ADR, DQ_OUT, DQ_REF, EXTRAS, FEEDFORWARD, FRICTION_LAW, HOLD, INERTIA_ROWS, JNT_IDS, LINKS, LINK_BODIES,
    LINK_FIRMWARE, LOAD, N_LINK_BODIES, MODE, MODE_SAMPLES, NEG_BREAKAWAY, N_CANDIDATES, N_SAMPLES,
    N_TICKS, QPOS_ADR, Q_OUT, Q_REF, RING, RING_LENGTH, SAMPLE_OF_TICK, SCALES, SITE_ID, SPRINGS,
    SUM_SQ, TABLE, TAU_OUT, TAU_PREV,
)

_CART_LIMIT_NM = np.ascontiguousarray(CART_TORQUE_LIMIT_NM, dtype=np.float64)


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


@njit(inline="always")
def _quat_xyzw(m):
    """The unit xyzw quaternion (w ≥ 0) of row-major rotation m (9,), as
    controllers.mat_to_quat_xyzw."""
    w = 0.5 * np.sqrt(max(1.0 + m[0] + m[4] + m[8], 0.0))
    x = np.copysign(0.5 * np.sqrt(max(1.0 + m[0] - m[4] - m[8], 0.0)), m[7] - m[5])
    y = np.copysign(0.5 * np.sqrt(max(1.0 - m[0] + m[4] - m[8], 0.0)), m[2] - m[6])
    z = np.copysign(0.5 * np.sqrt(max(1.0 - m[0] - m[4] + m[8], 0.0)), m[3] - m[1])
    norm = np.sqrt(x * x + y * y + z * z + w * w)
    return x / norm, y / norm, z / norm, w / norm


@njit(inline="always")
def _jacobian_column(j, site, xanchor, xaxis, jnt_ids):
    """Column j of the site Jacobian, [axis × (site − anchor); axis] (6 scalars)."""
    a = 3 * jnt_ids[j]
    ax, ay, az = xaxis[a], xaxis[a + 1], xaxis[a + 2]
    lx, ly, lz = site[0] - xanchor[a], site[1] - xanchor[a + 1], site[2] - xanchor[a + 2]
    return ay * lz - az * ly, az * lx - ax * lz, ax * ly - ay * lx, ax, ay, az


@njit(inline="always")
def _cartesian_command(k, p, ctx, data_address, off, qvel, coriolis, dofadr, tau_prev):
    """FrankaTwin's Cartesian law for candidate p at tick k, clamped and slew-limited into
    tau_prev[p]. off: (site_xpos, site_xmat, xanchor, xaxis) offsets in mjData; coriolis (7,)
    the feed-forward."""
    n_ticks, population = ctx[N_TICKS], ctx[N_CANDIDATES]
    params = carray(_f64_at(ctx[CART_PARAMS]), CART_PARAMS_SIZE)
    hold = carray(_f64_at(ctx[HOLD]), (population, 7))
    jnt_ids = carray(_i64_at(ctx[JNT_IDS]), 7)
    site_id = ctx[SITE_ID]
    site = carray(_f64_at(_word(data_address + off[0]) + 24 * site_id), 3)
    mat = carray(_f64_at(_word(data_address + off[1]) + 72 * site_id), 9)
    xanchor = carray(_f64_at(_word(data_address + off[2])), 1 << 40)
    xaxis = carray(_f64_at(_word(data_address + off[3])), 1 << 40)
    qx, qy, qz, qw = _quat_xyzw(mat)
    if k == 0:  # the pose held during warm-up
        hold[p, 0], hold[p, 1], hold[p, 2] = site[0], site[1], site[2]
        hold[p, 3], hold[p, 4], hold[p, 5], hold[p, 6] = qx, qy, qz, qw
    target = hold[p] if k < params[6] else carray(_f64_at(ctx[CART_TARGETS]), (n_ticks, 7))[k]
    v0 = v1 = v2 = v3 = v4 = v5 = 0.0  # twist J·dq
    for j in range(7):
        c0, c1, c2, c3, c4, c5 = _jacobian_column(j, site, xanchor, xaxis, jnt_ids)
        dqj = qvel[dofadr[j]]
        v0, v1, v2, v3, v4, v5 = v0 + c0 * dqj, v1 + c1 * dqj, v2 + c2 * dqj, v3 + c3 * dqj, v4 + c4 * dqj, v5 + c5 * dqj
    # orientation error 2·vec(q_des ⊗ conj(q)), sign flipped for the shortest path
    tx, ty, tz, tw = target[3], target[4], target[5], target[6]
    cx, cy, cz, cw = -qx, -qy, -qz, qw
    ex = tw * cx + tx * cw + ty * cz - tz * cy
    ey = tw * cy - tx * cz + ty * cw + tz * cx
    ez = tw * cz + tx * cy - ty * cx + tz * cw
    sign = -2.0 if tw * cw - tx * cx - ty * cy - tz * cz < 0.0 else 2.0
    kp_pos, kp_ori, kd_pos, kd_ori, use_coriolis, slew = params[0], params[1], params[2], params[3], params[4], params[5]
    w0 = kp_pos * (target[0] - site[0]) - kd_pos * v0
    w1 = kp_pos * (target[1] - site[1]) - kd_pos * v1
    w2 = kp_pos * (target[2] - site[2]) - kd_pos * v2
    w3, w4, w5 = kp_ori * (ex * sign) - kd_ori * v3, kp_ori * (ey * sign) - kd_ori * v4, kp_ori * (ez * sign) - kd_ori * v5
    for j in range(7):  # τ = Jᵀ·wrench (+ C·dq), clamp, slew
        c0, c1, c2, c3, c4, c5 = _jacobian_column(j, site, xanchor, xaxis, jnt_ids)
        tau = c0 * w0 + c1 * w1 + c2 * w2 + c3 * w3 + c4 * w4 + c5 * w5
        if use_coriolis != 0.0:
            tau = tau + coriolis[j]
        tau = min(max(tau, -_CART_LIMIT_NM[j]), _CART_LIMIT_NM[j])
        if slew > 0.0:
            tau = tau_prev[p, j] + max(min(tau - tau_prev[p, j], slew), -slew)
        tau_prev[p, j] = tau


@njit(inline="always")
def _add_load_torque(p, ctx, data_address, off, applied, dofadr):
    """applied += candidate p's load gravity torque (kernels.add_load_torque, same order)."""
    load = carray(_f64_at(ctx[LOAD]), (ctx[N_CANDIDATES], 4))
    dm, w0, w1, w2 = load[p, 0], load[p, 1], load[p, 2], load[p, 3]
    if dm == 0.0 and w0 == 0.0 and w1 == 0.0 and w2 == 0.0:
        return
    site_id = ctx[SITE_ID]
    jnt_ids = carray(_i64_at(ctx[JNT_IDS]), 7)
    site = carray(_f64_at(_word(data_address + off[0]) + 24 * site_id), 3)
    mat = carray(_f64_at(_word(data_address + off[1]) + 72 * site_id), 9)
    xanchor = carray(_f64_at(_word(data_address + off[2])), 1 << 40)
    xaxis = carray(_f64_at(_word(data_address + off[3])), 1 << 40)
    wx, wy = load_point(dm, w0, w1, w2, site, mat)
    for j in range(7):
        a = 3 * jnt_ids[j]
        applied[dofadr[j]] = applied[dofadr[j]] + load_joint_torque(dm, wx, wy, xanchor[a], xanchor[a + 1],
                                                                    xaxis[a], xaxis[a + 1])


@njit(inline="always")
def _add_link_torque(p, k, ctx, data_address, off, off_xipos, qvel, applied, dofadr):
    """applied += candidate p's links' torque (link_dynamics.add_link_torque, same order)."""
    population, count = ctx[N_CANDIDATES], ctx[N_LINK_BODIES]
    rows = carray(_f64_at(ctx[LINKS]), (population, count + 7))
    bodies = carray(_i64_at(ctx[LINK_BODIES]), (count, 2))
    firmware = carray(_f64_at(ctx[LINK_FIRMWARE]), count + 4)
    site_id = ctx[SITE_ID]
    site = carray(_f64_at(_word(data_address + off[0]) + 24 * site_id), 3)
    mat = carray(_f64_at(_word(data_address + off[1]) + 72 * site_id), 9)
    xanchor = carray(_f64_at(_word(data_address + off[2])), (1 << 38, 3))
    xaxis = carray(_f64_at(_word(data_address + off[3])), (1 << 38, 3))
    xipos = carray(_f64_at(_word(data_address + off_xipos)), (1 << 38, 3))
    ring = carray(_f64_at(ctx[RING]), (ctx[RING_LENGTH], population, 7))
    delays = carray(_i64_at(ctx[DELAYS]), (population, 7))
    jnt_ids = carray(_i64_at(ctx[JNT_IDS]), 7)
    link_torque(rows[p], bodies, firmware, xipos, xanchor, xaxis, jnt_ids, site, mat, ring, k, delays, p, qvel,
                dofadr, applied)


@njit(inline="always")
def _feedforward(p, ctx, data_address, off, qvel, bias, dofadr):
    """Candidate p's Coriolis feed-forward row (7,): qfrc_bias, − C_load(true payload) +
    C_load(configured load) where they differ (load_dynamics.load_feedforward, same order)."""
    out = carray(_f64_at(ctx[FEEDFORWARD]), (ctx[N_CANDIDATES], 7))[p]
    for j in range(7):
        out[j] = bias[dofadr[j]]
    if ctx[INERTIA_ROWS] == 0:
        return out
    row = carray(_f64_at(ctx[INERTIA_ROWS]), (ctx[N_CANDIDATES], 14))[p]
    if loads_equal(row):
        return out
    jnt_ids = carray(_i64_at(ctx[JNT_IDS]), 7)
    site = carray(_f64_at(_word(data_address + off[0]) + 24 * ctx[SITE_ID]), 3)
    mat = carray(_f64_at(_word(data_address + off[1]) + 72 * ctx[SITE_ID]), 9)
    xanchor = carray(_f64_at(_word(data_address + off[2])), (1 << 38, 3))
    xaxis = carray(_f64_at(_word(data_address + off[3])), (1 << 38, 3))
    velocity_product_torque(row, 0, site, mat, xanchor, xaxis, jnt_ids, qvel, dofadr, -1.0, out)
    velocity_product_torque(row, 7, site, mat, xanchor, xaxis, jnt_ids, qvel, dofadr, 1.0, out)
    return out


@njit(inline="always")
def _add_joint_extras(p, ctx, qvel, applied, dofadr):
    """applied += candidate p's bias and Coulomb asymmetry (kernels.add_joint_extras, same order)."""
    extras = carray(_f64_at(ctx[EXTRAS]), (ctx[N_CANDIDATES], 35))
    active = False
    for i in range(21):
        if extras[p, i] != 0.0:
            active = True
    if not active:
        return
    for j in range(7):
        applied[dofadr[j]] = applied[dofadr[j]] + joint_extra(qvel[dofadr[j]], extras[p, j], extras[p, 7 + j],
                                                              extras[p, 14 + j], extras[p, 21 + j], extras[p, 28 + j])


def source_digest() -> int:
    """A 63-bit digest of the sources compiled into the callback: this module and every module
    of ours it imports, transitively (contracts/kernel_cache.py `sources_digest`; the kernels,
    the links' and loads' torques, the context layout, fr3.py's constants).

    A closure value of the cfunc, so its cache key changes with any of those files even where
    a cache locator other than ours stamps the cached callback."""
    return int(sources_digest(__file__)[:16], 16) >> 1 or 1


def make_callback(offsets: dict[str, int], magic: float, slots: int):
    """The cfunc for a layout: offsets of qpos, qvel, qfrc_bias, qfrc_applied, userdata,
    site_xpos, site_xmat, xanchor, xaxis and xipos in mjData and of nuserdata in mjModel
    (callback._pointer_offsets); magic, slots: replay_context.MAGIC and USERDATA_SLOTS."""
    off_qpos, off_qvel, off_bias = offsets["qpos"], offsets["qvel"], offsets["qfrc_bias"]
    off_applied, off_userdata, off_nuserdata = offsets["qfrc_applied"], offsets["userdata"], offsets["nuserdata"]
    off_kin = (offsets["site_xpos"], offsets["site_xmat"], offsets["xanchor"], offsets["xaxis"])
    off_xipos = offsets["xipos"]
    n_context = CONTEXT_SIZE
    big = 1 << 40  # carray lengths for MjData's arrays: indexed only at the arm's addresses
    digest = source_digest()

    @cfunc(types.void(types.voidptr, types.voidptr), nopython=True, error_model="numpy", boundscheck=False,
           cache=True)
    def control(m, d):
        if digest == 0:  # never: puts the sources' digest among the closure values numba's cache is keyed on
            return
        model_address, data_address = _address_of(m), _address_of(d)
        if _word(model_address + off_nuserdata) < slots:
            return
        userdata = carray(_f64_at(_word(data_address + off_userdata)), slots)
        if userdata[0] != magic:
            return
        ctx = carray(_i64_at(np.int64(userdata[1])), n_context)
        p = np.int64(userdata[2])
        n_ticks, n_samples = ctx[N_TICKS], ctx[N_SAMPLES]
        population, ring_length = ctx[N_CANDIDATES], ctx[RING_LENGTH]
        counter = carray(_i64_at(ctx[COUNTER]), population)
        k = counter[p]
        if k >= n_ticks:
            return
        counter[p] = k + 1
        tau_prev = carray(_f64_at(ctx[TAU_PREV]), (population, 7))
        qadr = carray(_i64_at(ctx[QPOS_ADR]), 7)
        dofadr = carray(_i64_at(ctx[DOF_ADR]), 7)
        qpos = carray(_f64_at(_word(data_address + off_qpos)), big)
        qvel = carray(_f64_at(_word(data_address + off_qvel)), big)
        bias = carray(_f64_at(_word(data_address + off_bias)), big)
        applied = carray(_f64_at(_word(data_address + off_applied)), big)
        coriolis = _feedforward(p, ctx, data_address, off_kin, qvel, bias, dofadr)
        if ctx[CONTROLLER] == CARTESIAN:
            _cartesian_command(k, p, ctx, data_address, off_kin, qvel, coriolis, dofadr, tau_prev)
        else:
            table = carray(_f64_at(ctx[TABLE]), (n_ticks, 30))
            springs = carray(_f64_at(ctx[SPRINGS]), (n_ticks, 7))
            use_friction = table[k, 1] != 0.0
            if ctx[CONTROLLER_NOISE] == 0:
                for j in range(7):
                    tau_prev[p, j] = _joint_law(j, qpos[qadr[j]], qvel[dofadr[j]], springs[k, j], table[k, 16 + j],
                                                table[k, 23 + j], coriolis[j], use_friction, tau_prev[p, j])
            else:  # the law acts on the state plus this candidate's measurement noise of tick k
                noise = carray(_f64_at(ctx[CONTROLLER_NOISE]), (population, n_ticks, 14))
                for j in range(7):
                    tau_prev[p, j] = _joint_law(j, qpos[qadr[j]] + noise[p, k, j], qvel[dofadr[j]] + noise[p, k, 7 + j],
                                                springs[k, j], table[k, 16 + j], table[k, 23 + j], coriolis[j],
                                                use_friction, tau_prev[p, j])
        sample = carray(_i64_at(ctx[SAMPLE_OF_TICK]), n_ticks)[k]
        if sample >= 0:
            if ctx[MODE] == MODE_SAMPLES:
                q_out = carray(_f64_at(ctx[Q_OUT]), (n_samples, population, 7))
                dq_out = carray(_f64_at(ctx[DQ_OUT]), (n_samples, population, 7))
                tau_out = carray(_f64_at(ctx[TAU_OUT]), (n_samples, population, 7))
                for j in range(7):
                    q_out[sample, p, j] = qpos[qadr[j]]
                    dq_out[sample, p, j] = qvel[dofadr[j]]
                    tau_out[sample, p, j] = tau_prev[p, j]
            else:
                q_ref = carray(_f64_at(ctx[Q_REF]), (n_samples, 7))
                dq_ref = carray(_f64_at(ctx[DQ_REF]), (n_samples, 7))
                scales = carray(_f64_at(ctx[SCALES]), 2)
                sum_sq = carray(_f64_at(ctx[SUM_SQ]), (population, 2))
                for j in range(7):
                    e_q = (qpos[qadr[j]] - q_ref[sample, j]) / scales[0]
                    e_dq = (qvel[dofadr[j]] - dq_ref[sample, j]) / scales[1]
                    sum_sq[p, 0] += e_q * e_q
                    sum_sq[p, 1] += e_dq * e_dq
        ring = carray(_f64_at(ctx[RING]), (ring_length, population, 7))
        delays = carray(_i64_at(ctx[DELAYS]), (population, 7))
        neg_breakaway = carray(_f64_at(ctx[NEG_BREAKAWAY]), (population, 7))
        slot = k % ring_length
        law = ctx[FRICTION_LAW]
        for j in range(7):
            ring[slot, p, j] = tau_prev[p, j]
        for j in range(7):
            source = (k - delays[p, j]) % ring_length
            applied[dofadr[j]] = friction_torque(law, qvel[dofadr[j]], neg_breakaway[p, j]) + ring[source, p, j]
        if ctx[LOAD] != 0:
            _add_load_torque(p, ctx, data_address, off_kin, applied, dofadr)
        if ctx[LINKS] != 0:
            _add_link_torque(p, k, ctx, data_address, off_kin, off_xipos, qvel, applied, dofadr)
        if ctx[EXTRAS] != 0:
            _add_joint_extras(p, ctx, qvel, applied, dofadr)

    return control
