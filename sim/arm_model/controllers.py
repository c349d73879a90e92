"""Matched controllers, vectorised over a leading population axis.

Every function takes arrays shaped (P, 7) for joints (or (P, 3)/(P, 4) for poses) and writes
into a caller-provided `out` array where one is given, so a replay loop allocates nothing per
tick. The reference engine calls the same functions with P = 1, so both engines share every
floating-point operation. The constants (limits, gains, clamps) live in fr3.py.

Joint impedance (fr3_stack's daemon), per tick in this order:
    ema   = (1 − α)·ema + α·q_target                       (reset: ema = measured q)
    τ     = K∘(ema − q) − D∘dq + C(q,dq)·dq + repulsion(q) [+ fp1·tanh(fp2·dq) + fp3·dq]
    τ_out = τ_prev + clip(τ − τ_prev, ±1 N·m)              (slew limit per 1 ms tick)
Cartesian impedance (FrankaTwin's osc_shm.cpp):
    F = [kp·(x_des − x) − kd·v ; kp_ori·2·vec(q_des ⊗ q̄) − kd_ori·ω],  τ = Jᵀ F + C·dq
    clip to ±[87,87,87,87,12,12,12] N·m, then slew ≤ 800 N·m/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..fr3 import (
    CART_MAX_TORQUE_RATE_NM_S,
    CART_TORQUE_LIMIT_NM,
    FRICTION_FP1_NM,
    FRICTION_FP2_S_PER_RAD,
    FRICTION_FP3_NMS_PER_RAD,
    JOINT_LIMIT_MAX_TAU_NM,
    JOINT_SLEW_NM_PER_TICK,
    REPULSION_GAIN_NM_PER_RAD as _REPULSION_GAIN,
    REPULSION_LOWER_RAD as _LOWER,
    REPULSION_UPPER_RAD as _UPPER,
)


@dataclass
class JointImpedanceConfig:
    """Joint impedance settings; defaults are fr3_stack's configs/joint_impedance.yaml."""

    k_nm_per_rad: np.ndarray = field(default_factory=lambda: np.array([600.0, 600, 600, 600, 250, 150, 50]))
    d_nms_per_rad: np.ndarray = field(default_factory=lambda: np.array([50.0, 50, 50, 50, 30, 25, 15]))
    filter_alpha: float = 0.05
    use_friction: bool = False

    def __post_init__(self) -> None:
        for name in ("k_nm_per_rad", "d_nms_per_rad"):
            arr = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            if arr.shape != (7,):
                raise ValueError(f"{name}: expected 7 values, got {arr.size}")
            setattr(self, name, arr)
        self.filter_alpha = float(self.filter_alpha)
        self.use_friction = bool(self.use_friction)


@dataclass
class CartesianGains:
    """FrankaTwin Cartesian gains (scalar on all 3 axes); kd ≤ 0 means critical, 2·√kp."""

    kp_pos: float = 200.0  # [N/m]
    kp_ori: float = 20.0  # [N·m/rad]
    kd_pos: float = 0.0  # [N·s/m]
    kd_ori: float = 0.0  # [N·m·s/rad]
    use_coriolis: bool = True
    max_torque_rate_nm_s: float = CART_MAX_TORQUE_RATE_NM_S  # ≤ 0 disables the slew limiter

    def resolved(self) -> tuple[float, float, float, float]:
        """(kp_pos, kp_ori, kd_pos, kd_ori) with non-positive damping replaced by 2·√kp."""
        kd_pos = self.kd_pos if self.kd_pos > 0 else 2.0 * np.sqrt(self.kp_pos)
        kd_ori = self.kd_ori if self.kd_ori > 0 else 2.0 * np.sqrt(self.kp_ori)
        return float(self.kp_pos), float(self.kp_ori), float(kd_pos), float(kd_ori)


def ema_update(ema: np.ndarray, target: np.ndarray, alpha, out: np.ndarray | None = None,
               scratch: np.ndarray | None = None) -> np.ndarray:
    """ema ← (1 − α)·ema + α·target; α scalar or (P, 1). Returns `out` (may be `ema`).

    `scratch`, shaped like `out`, avoids a temporary (it must not alias `ema` or `out`).
    """
    out = ema.copy() if out is None else out
    np.multiply(ema, 1.0 - alpha, out=out)
    out += np.multiply(target, alpha, out=scratch)
    return out


def _limit_penetration(q: np.ndarray, out: np.ndarray) -> np.ndarray:
    """clip(q, lower, upper) − q: +(lower − q) below the zone, −(q − upper) above, else 0."""
    np.maximum(q, _LOWER, out=out)
    np.minimum(out, _UPPER, out=out)
    out -= q
    return out


def _repulsion_from_penetration(out: np.ndarray) -> np.ndarray:
    out *= _REPULSION_GAIN
    np.minimum(out, JOINT_LIMIT_MAX_TAU_NM, out=out)
    np.maximum(out, -JOINT_LIMIT_MAX_TAU_NM, out=out)
    return out


def joint_limit_repulsion(q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """fr3_stack joint-limit repulsion [N·m] for q (P, 7): linear in the 10 % zone, capped ±10."""
    out = np.empty_like(q) if out is None else out
    return _repulsion_from_penetration(_limit_penetration(q, out))


def friction_compensation(dq: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """fr3_stack friction compensation fp1·tanh(fp2·dq) + fp3·dq [N·m] on raw dq (P, 7)."""
    out = np.empty_like(dq) if out is None else out
    np.tanh(FRICTION_FP2_S_PER_RAD * dq, out=out)
    out *= FRICTION_FP1_NM
    out += FRICTION_FP3_NMS_PER_RAD * dq
    return out


def slew_limit(tau: np.ndarray, tau_prev: np.ndarray, max_delta, out: np.ndarray | None = None) -> np.ndarray:
    """τ_prev + clip(τ − τ_prev, ±max_delta) [N·m]; max_delta scalar (per tick).

    `out` may be `tau` itself but not `tau_prev`.
    """
    if out is tau_prev:
        raise ValueError("slew_limit: out must not alias tau_prev")
    out = np.empty_like(tau) if out is None else out
    np.subtract(tau, tau_prev, out=out)
    np.minimum(out, max_delta, out=out)
    np.maximum(out, -max_delta, out=out)
    out += tau_prev
    return out


def slew_limit_inplace(tau: np.ndarray, tau_prev: np.ndarray, max_delta) -> np.ndarray:
    """τ_prev ← τ_prev + clip(τ − τ_prev, ±max_delta), in place; `tau` is used as scratch.

    Same arithmetic as slew_limit; returns `tau_prev`.
    """
    np.subtract(tau, tau_prev, out=tau)
    np.minimum(tau, max_delta, out=tau)
    np.maximum(tau, -max_delta, out=tau)
    tau_prev += tau
    return tau_prev


def joint_impedance_torque(
    q: np.ndarray,
    dq: np.ndarray,
    q_spring: np.ndarray,
    k: np.ndarray,
    d: np.ndarray,
    coriolis: np.ndarray,
    use_friction: bool,
    out: np.ndarray | None = None,
    scratch: np.ndarray | None = None,
) -> np.ndarray:
    """Pre-slew joint impedance torque [N·m], (P, 7); `q_spring` is the post-EMA target.

    `scratch` (P, 7) is an optional work array, so that a loop allocates nothing.
    """
    out = np.empty_like(q) if out is None else out
    scratch = np.empty_like(q) if scratch is None else scratch
    np.subtract(q_spring, q, out=out)
    out *= k
    np.multiply(d, dq, out=scratch)
    out -= scratch
    out += coriolis
    # joint_limit_repulsion, skipped while no joint is in its 10 % margin (it is exactly 0 there)
    if np.count_nonzero(_limit_penetration(q, scratch)):
        out += _repulsion_from_penetration(scratch)
    if use_friction:
        out += friction_compensation(dq, out=scratch)
    return out


def quat_mul_xyzw(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b of xyzw quaternions, (..., 4)."""
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def orientation_error(quat_des_xyzw: np.ndarray, quat_xyzw: np.ndarray) -> np.ndarray:
    """2·vec(q_des ⊗ conj(q)) with the sign flipped where w < 0 (shortest path), (..., 3) [rad]."""
    conj = quat_xyzw * np.array([-1.0, -1.0, -1.0, 1.0])
    err = quat_mul_xyzw(quat_des_xyzw, conj)
    sign = np.where(err[..., 3:4] < 0.0, -2.0, 2.0)
    return err[..., :3] * sign


def mat_to_quat_xyzw(mat: np.ndarray) -> np.ndarray:
    """Unit xyzw quaternion (w ≥ 0) of rotation matrices (..., 3, 3) or row-major (..., 9)."""
    m = np.asarray(mat).reshape(*np.shape(mat)[: -1 if np.shape(mat)[-1] == 9 else -2], 3, 3)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    w = 0.5 * np.sqrt(np.maximum(1.0 + m00 + m11 + m22, 0.0))
    x = 0.5 * np.sqrt(np.maximum(1.0 + m00 - m11 - m22, 0.0))
    y = 0.5 * np.sqrt(np.maximum(1.0 - m00 + m11 - m22, 0.0))
    z = 0.5 * np.sqrt(np.maximum(1.0 - m00 - m11 + m22, 0.0))
    x = np.copysign(x, m[..., 2, 1] - m[..., 1, 2])
    y = np.copysign(y, m[..., 0, 2] - m[..., 2, 0])
    z = np.copysign(z, m[..., 1, 0] - m[..., 0, 1])
    q = np.stack([x, y, z, w], axis=-1)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def site_jacobian(xanchor: np.ndarray, xaxis: np.ndarray, site_pos: np.ndarray) -> np.ndarray:
    """6×7 base-frame Jacobian of a site for a hinge chain, (P, 6, 7).

    xanchor, xaxis: (P, 7, 3) joint anchors and unit axes; site_pos (P, 3).
    Rows 0-2: axis × (site − anchor); rows 3-5: axis.
    """
    lever = site_pos[:, None, :] - xanchor
    jp = np.cross(xaxis, lever)
    return np.concatenate([jp.transpose(0, 2, 1), xaxis.transpose(0, 2, 1)], axis=1)


def cartesian_impedance_torque(
    jac: np.ndarray,
    dq: np.ndarray,
    pos: np.ndarray,
    quat_xyzw: np.ndarray,
    target_pos: np.ndarray,
    target_quat_xyzw: np.ndarray,
    gains: tuple[float, float, float, float],
    coriolis: np.ndarray | None,
) -> np.ndarray:
    """FrankaTwin's pre-clamp Cartesian torque Jᵀ[kp·e_p − kd·v; kp_o·e_o − kd_o·ω] + C·dq, (P, 7).

    jac (P, 6, 7), dq (P, 7), pos (P, 3), quat (P, 4) xyzw; targets broadcast against them.
    gains = (kp_pos, kp_ori, kd_pos, kd_ori) as resolved by CartesianGains.resolved().
    """
    kp_pos, kp_ori, kd_pos, kd_ori = gains
    twist = np.einsum("pij,pj->pi", jac, dq)
    wrench = np.empty_like(twist)
    wrench[:, :3] = kp_pos * (target_pos - pos) - kd_pos * twist[:, :3]
    wrench[:, 3:] = kp_ori * orientation_error(target_quat_xyzw, quat_xyzw) - kd_ori * twist[:, 3:]
    tau = np.einsum("pij,pi->pj", jac, wrench)
    if coriolis is not None:
        tau += coriolis
    return tau


def cartesian_clamp_and_slew(tau: np.ndarray, tau_prev: np.ndarray, max_rate_nm_s: float, dt_s: float = 1e-3) -> np.ndarray:
    """Clamp to ±[87×4, 12×3] N·m then slew-limit to max_rate·dt per tick (disabled if rate ≤ 0)."""
    clamped = np.clip(tau, -CART_TORQUE_LIMIT_NM, CART_TORQUE_LIMIT_NM)
    if max_rate_nm_s <= 0:
        return clamped
    return slew_limit(clamped, tau_prev, max_rate_nm_s * dt_s)


__all__ = [
    "CART_MAX_TORQUE_RATE_NM_S",
    "CART_TORQUE_LIMIT_NM",
    "CartesianGains",
    "JOINT_SLEW_NM_PER_TICK",
    "JointImpedanceConfig",
    "cartesian_clamp_and_slew",
    "cartesian_impedance_torque",
    "ema_update",
    "friction_compensation",
    "joint_impedance_torque",
    "joint_limit_repulsion",
    "mat_to_quat_xyzw",
    "orientation_error",
    "quat_mul_xyzw",
    "site_jacobian",
    "slew_limit",
    "slew_limit_inplace",
]
