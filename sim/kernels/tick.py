"""Compiled per-tick kernels: the joint-impedance law and the plant's torque assembly.

The arithmetic of one 1 kHz tick, compiled with numba and shared by every engine (reference,
population, SimFR3), so that they agree bit for bit. Each loop runs over a (P, 7) population
and computes every element in the same order as the numpy forms in controllers.py and
plant.py (the readable definitions, checked against these in tests/sim/test_kernels.py);
the constants come from fr3.py.
The kernels keep the GIL (see _JIT below and population.py).
Compiled on first use and cached on disk (numba's cache). Shapes: P candidates × 7 joints;
float64.

Public API:
  joint_impedance_tick(q, dq, spring, k, d, coriolis, use_friction, tau_prev)
  arm_tick(...)                measurement noise + EMA + the law, for one arm (SimFR3)
  arm_step(...)                arm_tick + the outputs + the delayed torque (the recorders' tick)
  apply_delayed_torque(ring, tick, delays, tau_cmd, dq, neg_breakaway, applied, law=0)
  sliding_relief(dq_j, neg_breakaway_j)  one joint's Stribeck relief (inlined where used)
  friction_torque(law, dq_j, coef_j)     the law's explicit friction torque of one joint
  add_joint_extras(dq, extras, applied)  the torque bias and the Coulomb asymmetry
  population_control(k, q, dq, coriolis, table, use_ema, ema, tau_prev)  EMA + the law, one tick
  ema_springs(table, use_ema, ema, springs)  a whole interval's spring targets
  add_square_errors(sample, q, dq, q_ref, dq_ref, q_scale, dq_scale, sum_sq)  a fit's error sums
  add_load_torque(load, site_xpos, site_xmat, xanchor, xaxis, site_id, jnt_ids, applied)
                               the end-effector loads' gravity torque (true payload − configured)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...contracts.kernel_cache import register as _register_kernel_cache
from ..fr3 import (
    FRICTION_FP1_NM,
    FRICTION_FP2_S_PER_RAD,
    FRICTION_FP3_NMS_PER_RAD,
    JOINT_LIMIT_MAX_TAU_NM,
    JOINT_SLEW_NM_PER_TICK,
    REPULSION_GAIN_NM_PER_RAD,
    REPULSION_LOWER_RAD,
    REPULSION_UPPER_RAD,
)

GRAVITY_M_S2 = 9.81  # as load.GRAVITY_M_S2 (load.py imports numpy only; kept equal by a test)
STRIBECK_VELOCITY_RAD_S = 0.02  # the plant's Stribeck velocity v_s (plant.py)
NEG_INV_STRIBECK_VELOCITY_SQ = -1.0 / STRIBECK_VELOCITY_RAD_S**2
TANH_VELOCITY_RAD_S = 0.02  # the smooth law's velocity scale v_t (plant.TanhFriction)
INV_TANH_VELOCITY = 1.0 / TANH_VELOCITY_RAD_S
FRICTION_STRIBECK, FRICTION_TANH, FRICTION_SIGMOID = 0, 1, 2  # the friction law's number (plant.FRICTION_LAWS)
EXTRAS_WIDTH = 35  # add_joint_extras' row: tau_bias | coulomb_asymmetry | φ1 | φ2 | φ3, 7 each

# IEEE arithmetic exactly as written (no fast-math, no contraction into FMAs); cached on disk.
# The GIL is kept: a kernel takes microseconds, and every release is a chance for another
# thread (the daemon's CSV writer, the other population shard) to take the GIL for up to the
# interpreter's switch interval while the 1 kHz loop waits for it.
_register_kernel_cache()  # before the decorators: each cached kernel is stamped with every source it inlines
_JIT = dict(nogil=False, cache=True, fastmath=False, error_model="numpy", boundscheck=False)

_LOWER_RAD = np.ascontiguousarray(REPULSION_LOWER_RAD, dtype=np.float64)
_UPPER_RAD = np.ascontiguousarray(REPULSION_UPPER_RAD, dtype=np.float64)
_GAIN_NM_PER_RAD = np.ascontiguousarray(REPULSION_GAIN_NM_PER_RAD, dtype=np.float64)
_FP1_NM = np.ascontiguousarray(FRICTION_FP1_NM, dtype=np.float64)
_FP2 = float(FRICTION_FP2_S_PER_RAD)
_FP3 = float(FRICTION_FP3_NMS_PER_RAD)
_CAP_NM = float(JOINT_LIMIT_MAX_TAU_NM)
_SLEW_NM = float(JOINT_SLEW_NM_PER_TICK)


@njit(**_JIT, inline="always")
def _joint_law(j, qj, dqj, spring_j, k_j, d_j, coriolis_j, use_friction, tau_prev_j):
    """Joint j of one tick: the slew-limited command [N·m] from the previous one (scalars)."""
    tau = (spring_j - qj) * k_j
    tau = tau - d_j * dqj
    tau = tau + coriolis_j
    penetration = min(max(qj, _LOWER_RAD[j]), _UPPER_RAD[j]) - qj  # 0 outside the margin
    if penetration != 0.0:
        tau = tau + max(min(penetration * _GAIN_NM_PER_RAD[j], _CAP_NM), -_CAP_NM)
    if use_friction:
        tau = tau + (math.tanh(_FP2 * dqj) * _FP1_NM[j] + _FP3 * dqj)
    step = max(min(tau - tau_prev_j, _SLEW_NM), -_SLEW_NM)
    return tau_prev_j + step


@njit(**_JIT)
def joint_impedance_tick(q, dq, spring, k, d, coriolis, use_friction, tau_prev):
    """fr3_stack's joint impedance for one tick, slew-limited into tau_prev in place.

    τ = K∘(spring − q) − D∘dq + C·dq + repulsion(q) [+ fp1·tanh(fp2·dq) + fp3·dq], then
    τ_prev ← τ_prev + clip(τ − τ_prev, ±1 N·m). q, dq, coriolis, tau_prev (P, 7);
    spring (post-EMA target [rad]), k [N·m/rad], d [N·m·s/rad] (7,); use_friction bool.
    """
    for p in range(q.shape[0]):
        for j in range(7):
            tau_prev[p, j] = _joint_law(j, q[p, j], dq[p, j], spring[j], k[j], d[j], coriolis[p, j],
                                        use_friction, tau_prev[p, j])


@njit(**_JIT)
def arm_tick(q_true, dq_true, tau_j, offsets, measured, coriolis, joint_mode, ema, keep, alpha_target,
             k, d, use_friction, tau_prev):
    """One arm's controller tick on its measured state, as fr3_stack's RT callback runs it.

    measured (21,) ← [q_true | dq_true | tau_j] + offsets (measurement noise, (21,)); then under
    joint impedance (joint_mode) ema ← keep·ema + alpha_target and the law on the measured
    q, dq; otherwise (idle) a zero command. Both through the slew limiter into tau_prev (7,).
    q_true, dq_true, tau_j, coriolis, ema, alpha_target, k, d (7,); keep = 1 − α.
    """
    for j in range(7):
        measured[j] = q_true[j] + offsets[j]
        measured[7 + j] = dq_true[j] + offsets[7 + j]
        measured[14 + j] = tau_j[j] + offsets[14 + j]
    for j in range(7):
        if joint_mode:
            ema[j] = ema[j] * keep + alpha_target[j]
            tau_prev[j] = _joint_law(j, measured[j], measured[7 + j], ema[j], k[j], d[j], coriolis[j],
                                     use_friction, tau_prev[j])
        else:
            tau_prev[j] = tau_prev[j] + max(min(0.0 - tau_prev[j], _SLEW_NM), -_SLEW_NM)


@njit(**_JIT)
def arm_step(q_true, dq_true, tau_j, offsets, measured, coriolis, joint_mode, ema, keep, alpha_target,
             k, d, use_friction, tau_prev, ring, tick, delays, neg_breakaway, applied, tau_out, ema_out, law=0):
    """arm_tick, then the command into tau_out (7,) and the EMA (zeros when idle) into
    ema_out (7,), then apply_delayed_torque for the one arm (ring (L, 1, 7), delays (1, 7),
    neg_breakaway (1, 7), applied (7,) the arm's qfrc_applied): a recorder's whole tick up to
    the integration, in one call."""
    arm_tick(q_true, dq_true, tau_j, offsets, measured, coriolis, joint_mode, ema, keep, alpha_target,
             k, d, use_friction, tau_prev)
    for j in range(7):
        tau_out[j] = tau_prev[j]
        ema_out[j] = ema[j] if joint_mode else 0.0
    apply_delayed_torque(ring, tick, delays, tau_prev.reshape((1, 7)), dq_true.reshape((1, 7)), neg_breakaway,
                         applied.reshape((1, 7)), law)


@njit(**_JIT)
def apply_delayed_torque(ring, tick, delays, tau_cmd, dq, neg_breakaway, applied, law=0):
    """Push tick `tick`'s commanded torque into the delay ring and write the joint torque to
    apply now: τ_cmd of tick − delay (per joint) plus the friction law's explicit torque at dq.

    ring (L, P, 7) commands by tick mod L; delays (P, 7) int64 ticks < L, per candidate and
    joint (params.joint_delay_ticks); tau_cmd, dq, applied
    (P, 7); neg_breakaway (P, 7) [N·m] the law's coefficient: under the Stribeck law (law 0)
    −(mu_s − mu_d), the relief −(mu_s − mu_d)·expm1(−dq²/v_s²)·sign(dq) as StribeckFriction;
    under the tanh law (1) −mu_c, the torque −mu_c·tanh(dq/v_t) as TanhFriction.
    """
    length = ring.shape[0]
    slot = tick % length
    for p in range(tau_cmd.shape[0]):
        for j in range(7):
            ring[slot, p, j] = tau_cmd[p, j]
        for j in range(7):
            source = (tick - delays[p, j]) % length
            applied[p, j] = friction_torque(law, dq[p, j], neg_breakaway[p, j]) + ring[source, p, j]


@njit(**_JIT, inline="always")
def sliding_relief(dqj, neg_breakaway_j):
    """StribeckFriction's sliding relief of one joint [N·m] at velocity dqj [rad/s]:
    −(mu_s − mu_d)·expm1(−dq²/v_s²)·sign(dq), with neg_breakaway_j = −(mu_s − mu_d)."""
    return math.copysign(math.expm1(dqj * dqj * NEG_INV_STRIBECK_VELOCITY_SQ) * neg_breakaway_j, dqj)


@njit(**_JIT, inline="always")
def friction_torque(law, dqj, coef_j):
    """The friction law's explicit torque of one joint [N·m]: the Stribeck relief (law 0,
    coef_j = −(mu_s − mu_d)) or the smooth Coulomb torque coef_j·tanh(dq/v_t) (law 1,
    coef_j = −mu_c)."""
    if law == FRICTION_TANH:
        return math.tanh(dqj * INV_TANH_VELOCITY) * coef_j
    if law == FRICTION_SIGMOID:  # its torque is one of the joint extras (add_joint_extras)
        return 0.0
    return sliding_relief(dqj, coef_j)


@njit(**_JIT, inline="always")
def population_control(k, q, dq, coriolis, table, use_ema, ema, tau_prev):
    """EMA (shared (7,) state) and the law of tick k for the population, slew-limited into
    tau_prev (P, 7). The per-tick controller of every joint-impedance replay (TickController).

    table (T, 30) per tick (replay.joint_tick_table): [1 − α, use_friction, α·q_target (7),
    q_target (7), K (7), D (7)]; ema (7,) the shared EMA state (every candidate sees the same
    targets); q, dq, coriolis (P, 7).
    """
    row = table[k]
    if use_ema:  # ema ← (1 − α)·ema + α·q_target, as SimFR3 forms it
        for j in range(7):
            ema[j] = ema[j] * row[0] + row[2 + j]
        spring = ema
    else:
        spring = row[9:16]
    joint_impedance_tick(q, dq, spring, row[16:23], row[23:30], coriolis, row[1] != 0.0, tau_prev)


@njit(**_JIT)
def ema_springs(table, use_ema, ema, springs):
    """springs (T, 7) ← each tick's spring target: the EMA after that tick's update (ema (7,),
    updated in place, as population_control does it) or, without the EMA, the target itself.
    The EMA sees only the targets, so a whole interval's springs can be formed up front."""
    for k in range(table.shape[0]):
        for j in range(7):
            if use_ema:
                ema[j] = ema[j] * table[k, 0] + table[k, 2 + j]
                springs[k, j] = ema[j]
            else:
                springs[k, j] = table[k, 9 + j]


@njit(**_JIT)
def add_square_errors(sample, q, dq, q_ref, dq_ref, q_scale, dq_scale, sum_sq):
    """A fit's error sums at one sample: sum_sq[p, 0] += Σ_j ((q − q_ref[sample]) / q_scale)²,
    sum_sq[p, 1] the same for dq, joint by joint in order (as the compiled loop sums them).

    q, dq (P, 7) the state at the sample; q_ref, dq_ref (S, 7) recorded [rad], [rad/s];
    q_scale [rad], dq_scale [rad/s]; sum_sq (P, 2).
    """
    for p in range(q.shape[0]):
        for j in range(7):
            e_q = (q[p, j] - q_ref[sample, j]) / q_scale
            e_dq = (dq[p, j] - dq_ref[sample, j]) / dq_scale
            sum_sq[p, 0] += e_q * e_q
            sum_sq[p, 1] += e_dq * e_dq


@njit(**_JIT, inline="always")
def load_point(dm, w0, w1, w2, site, mat):
    """The x, y of W = Δm·site + R·w [kg·m] (the loads' signed mass-weighted centre in the
    base frame); site (3,), mat (9,) row-major: the flange frame."""
    wx = dm * site[0] + (mat[0] * w0 + mat[1] * w1 + mat[2] * w2)
    wy = dm * site[1] + (mat[3] * w0 + mat[4] * w1 + mat[5] * w2)
    return wx, wy


@njit(**_JIT, inline="always")
def load_joint_torque(dm, wx, wy, anchor_x, anchor_y, axis_x, axis_y):
    """One joint's torque [N·m] of the loads' weight: axis · ((W − Δm·anchor) × g), g = (0, 0, −g0)."""
    vx = wx - dm * anchor_x
    vy = wy - dm * anchor_y
    return GRAVITY_M_S2 * (axis_y * vx - axis_x * vy)


@njit(**_JIT)
def add_load_torque(load, site_xpos, site_xmat, xanchor, xaxis, site_id, jnt_ids, applied):
    """applied[p, j] += the end-effector loads' gravity torque of candidate p [N·m]: the true
    payload's weight minus the firmware's compensation of the configured load
    (load.load_gravity_torque is the readable form). Candidates whose load row is all zero are
    left untouched (bit for bit).

    load (P, 4) [Δm, w (3)] (load.load_row); site_xpos (P, nsite, 3), site_xmat (P, nsite, 9),
    xanchor, xaxis (P, njnt, 3): MjData's rows (kinematics of this tick); site_id the flange
    site; jnt_ids (7,) int64; applied (P, 7).
    """
    for p in range(applied.shape[0]):
        dm, w0, w1, w2 = load[p, 0], load[p, 1], load[p, 2], load[p, 3]
        if dm == 0.0 and w0 == 0.0 and w1 == 0.0 and w2 == 0.0:
            continue
        wx, wy = load_point(dm, w0, w1, w2, site_xpos[p, site_id], site_xmat[p, site_id])
        for j in range(7):
            a = jnt_ids[j]
            applied[p, j] = applied[p, j] + load_joint_torque(dm, wx, wy, xanchor[p, a, 0], xanchor[p, a, 1],
                                                              xaxis[p, a, 0], xaxis[p, a, 1])


@njit(**_JIT, inline="always")
def joint_extra(dqj, bias_j, asym_j, phi1_j, phi2_j, phi3_j):
    """One joint's extra torque [N·m]: the constant bias, minus the Coulomb asymmetry's even
    term asym·tanh²(dq/v_t) (0 at rest, asym when sliding either way), minus the sigmoid
    friction of Gaz et al. 2019, φ1/(1 + e^(−φ2(dq + φ3))) − φ1/(1 + e^(−φ2·φ3)), when φ1 ≠ 0."""
    t = math.tanh(dqj * INV_TANH_VELOCITY)
    out = bias_j - asym_j * (t * t)
    if phi1_j != 0.0:
        out = out - (phi1_j / (1.0 + math.exp(-phi2_j * (dqj + phi3_j))) - phi1_j / (1.0 + math.exp(-phi2_j * phi3_j)))
    return out


@njit(**_JIT)
def add_joint_extras(dq, extras, applied):
    """applied[p, j] += joint_extra of candidate p (plant.joint_extra_torque is the readable
    form); candidates whose bias, asymmetry and φ1 are all zero are left untouched (bit for bit).

    dq (P, 7) [rad/s] the velocity the step starts from; extras (P, 35) [tau_bias (7) |
    coulomb_asymmetry (7) | φ1 (7) [N·m] | φ2 (7) [s/rad] | φ3 (7) [rad/s]]; applied (P, 7)."""
    for p in range(applied.shape[0]):
        active = False
        for i in range(21):
            if extras[p, i] != 0.0:
                active = True
        if not active:
            continue
        for j in range(7):
            applied[p, j] = applied[p, j] + joint_extra(dq[p, j], extras[p, j], extras[p, 7 + j], extras[p, 14 + j],
                                                        extras[p, 21 + j], extras[p, 28 + j])


def warm_up() -> None:
    """Load (or compile) every kernel for the one-arm signatures SimFR3 uses, so that the first
    real tick is not the one that pays numba's start-up (~0.5 s once per process)."""
    row, vec = np.zeros((1, 7)), np.zeros(7)
    joint_impedance_tick(row, row, vec, vec, vec, row, False, np.zeros((1, 7)))
    arm_tick(vec, vec, vec, np.zeros(21), np.zeros(21), vec, True, np.zeros(7), 1.0, vec, vec, vec, False, np.zeros(7))
    apply_delayed_torque(np.zeros((2, 1, 7)), 0, np.zeros((1, 7), dtype=np.int64), row, row, row, np.zeros((1, 7)), 0)
    arm_step(vec, vec, vec, np.zeros(21), np.zeros(21), vec, True, np.zeros(7), 1.0, vec, vec, vec, False,
             np.zeros(7), np.zeros((2, 1, 7)), 0, np.zeros((1, 7), dtype=np.int64), row, np.zeros(7), np.zeros(7), np.zeros(7), 0)


__all__ = ["add_joint_extras", "joint_extra", "EXTRAS_WIDTH", "FRICTION_SIGMOID", "FRICTION_STRIBECK", "FRICTION_TANH", "GRAVITY_M_S2", "STRIBECK_VELOCITY_RAD_S", "TANH_VELOCITY_RAD_S",
           "friction_torque", "add_load_torque", "add_square_errors", "apply_delayed_torque", "arm_step", "arm_tick", "ema_springs",
           "joint_impedance_tick", "population_control", "sliding_relief", "warm_up"]
