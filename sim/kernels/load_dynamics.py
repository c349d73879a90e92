"""The flange loads' velocity-product torque, compiled: the firmware's Coriolis feed-forward.

The FR3's firmware computes the Coriolis feed-forward C(q, q̇)·q̇ from its own arm model plus
the configured load (libfranka `Model::coriolis` with the load of `Robot::setLoad`), not from
the load the arm really carries. The sim's `qfrc_bias` (the model has zero gravity: C·q̇) is
that of the model with the true payload in its `payload` body. So every engine feeds forward

    qfrc_bias − C_load(true payload) + C_load(configured load)          (load_feedforward)

where C_load is one rigid load's velocity-product (Coriolis + centripetal) joint torque
(velocity_product_torque), and qfrc_bias itself, bit for bit, for a candidate whose true
payload and configured load are equal (in particular: none and none). load.load_coriolis_torque
is the readable numpy form; tests/sim/test_load_dynamics.py checks both against MuJoCo
(qfrc_bias with the payload body minus qfrc_bias without it).

From MuJoCo's data after its velocity stage, for a serial chain of 7 revolute joints from a
fixed base: anchors o_j (`xanchor`) and axes z_j (`xaxis`), the flange frame (`site_xpos`,
`site_xmat` row-major), q̇; the load: mass m [kg], centre of mass [m] and diagonal inertia
about it [kg·m²] in the flange frame. With c the centre of mass in the base frame,
r_j = c − o_j, ω = Σ z_j q̇_j, ż_j = ω_j × z_j (ω_j of joint j's body), v_o_j the velocity of
anchor o_j: v_c = Σ z_j × r_j q̇_j, a_c = Σ [ż_j × r_j + z_j × (v_c − v_o_j)] q̇_j,
α = Σ ż_j q̇_j; F = m·a_c, N = I_w α + ω × (I_w ω), I_w = R I Rᵀ; τ_j = z_j · (N + r_j × F).

Public API:
  velocity_product_torque(load, first, site, mat, anchors, axes, jnt_ids, qvel, dofadr, sign, out)
                        out[j] += sign·τ_j of one load (inlined where used; the callback too)
  load_feedforward(rows, site_xpos, site_xmat, xanchor, xaxis, site_id, jnt_ids, dq, bias, out)
                        the population's feed-forward (P, 7)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .tick import _JIT

_DOFS = np.arange(7, dtype=np.int64)  # the (P, 7) rows' own joint order


@njit(**_JIT, inline="always")
def velocity_product_torque(load, first, site, mat, anchors, axes, jnt_ids, qvel, dofadr, sign, out):
    """out[j] += sign·τ_j [N·m], the velocity-product torque of the load load[first:first + 7]
    = [m, c (3), I (3)]; nothing when m and I are zero. site (3,), mat (9,) the flange frame;
    anchors, axes (njnt, 3) rows jnt_ids[j] (7,) of the arm's joints; qvel[dofadr[j]] their
    velocities [rad/s]; out (7,)."""
    m, ixx, iyy, izz = load[first], load[first + 4], load[first + 5], load[first + 6]
    if m == 0.0 and ixx == 0.0 and iyy == 0.0 and izz == 0.0:
        return
    lx, ly, lz = load[first + 1], load[first + 2], load[first + 3]
    cx = site[0] + (mat[0] * lx + mat[1] * ly + mat[2] * lz)
    cy = site[1] + (mat[3] * lx + mat[4] * ly + mat[5] * lz)
    cz = site[2] + (mat[6] * lx + mat[7] * ly + mat[8] * lz)
    wx = wy = wz = 0.0  # ω
    vx = vy = vz = 0.0  # v_c
    for j in range(7):
        a, dqj = jnt_ids[j], qvel[dofadr[j]]
        zx, zy, zz = axes[a, 0], axes[a, 1], axes[a, 2]
        rx, ry, rz = cx - anchors[a, 0], cy - anchors[a, 1], cz - anchors[a, 2]
        wx, wy, wz = wx + zx * dqj, wy + zy * dqj, wz + zz * dqj
        vx, vy, vz = vx + (zy * rz - zz * ry) * dqj, vy + (zz * rx - zx * rz) * dqj, vz + (zx * ry - zy * rx) * dqj
    bx = by = bz = 0.0  # ω of the body before joint j
    ux = uy = uz = 0.0  # that body's linear velocity at the base origin
    ax = ay = az = 0.0  # a_c
    px = py = pz = 0.0  # α
    for j in range(7):
        a, dqj = jnt_ids[j], qvel[dofadr[j]]
        zx, zy, zz = axes[a, 0], axes[a, 1], axes[a, 2]
        ox, oy, oz = anchors[a, 0], anchors[a, 1], anchors[a, 2]
        rx, ry, rz = cx - ox, cy - oy, cz - oz
        dx, dy, dz = by * zz - bz * zy, bz * zx - bx * zz, bx * zy - by * zx  # ż_j = ω_j × z_j
        ex = vx - (ux + (by * oz - bz * oy))  # v_c − v_o_j
        ey = vy - (uy + (bz * ox - bx * oz))
        ez = vz - (uz + (bx * oy - by * ox))
        ax = ax + ((dy * rz - dz * ry) + (zy * ez - zz * ey)) * dqj
        ay = ay + ((dz * rx - dx * rz) + (zz * ex - zx * ez)) * dqj
        az = az + ((dx * ry - dy * rx) + (zx * ey - zy * ex)) * dqj
        px, py, pz = px + dx * dqj, py + dy * dqj, pz + dz * dqj
        ux, uy, uz = ux - (zy * oz - zz * oy) * dqj, uy - (zz * ox - zx * oz) * dqj, uz - (zx * oy - zy * ox) * dqj
        bx, by, bz = bx + zx * dqj, by + zy * dqj, bz + zz * dqj
    # I_w·x = R (I ∘ (Rᵀ x)), for x = ω and x = α
    sx = ixx * (mat[0] * wx + mat[3] * wy + mat[6] * wz)
    sy = iyy * (mat[1] * wx + mat[4] * wy + mat[7] * wz)
    sz = izz * (mat[2] * wx + mat[5] * wy + mat[8] * wz)
    hx, hy, hz = mat[0] * sx + mat[1] * sy + mat[2] * sz, mat[3] * sx + mat[4] * sy + mat[5] * sz, mat[6] * sx + mat[7] * sy + mat[8] * sz
    sx = ixx * (mat[0] * px + mat[3] * py + mat[6] * pz)
    sy = iyy * (mat[1] * px + mat[4] * py + mat[7] * pz)
    sz = izz * (mat[2] * px + mat[5] * py + mat[8] * pz)
    nx = (mat[0] * sx + mat[1] * sy + mat[2] * sz) + (wy * hz - wz * hy)
    ny = (mat[3] * sx + mat[4] * sy + mat[5] * sz) + (wz * hx - wx * hz)
    nz = (mat[6] * sx + mat[7] * sy + mat[8] * sz) + (wx * hy - wy * hx)
    fx, fy, fz = m * ax, m * ay, m * az
    for j in range(7):
        a = jnt_ids[j]
        rx, ry, rz = cx - anchors[a, 0], cy - anchors[a, 1], cz - anchors[a, 2]
        tx, ty, tz = nx + (ry * fz - rz * fy), ny + (rz * fx - rx * fz), nz + (rx * fy - ry * fx)
        out[j] = out[j] + sign * (axes[a, 0] * tx + axes[a, 1] * ty + axes[a, 2] * tz)


@njit(**_JIT, inline="always")
def loads_equal(row):
    """True when a load_inertia_rows row's true payload and configured load are the same."""
    for i in range(7):
        if row[i] != row[7 + i]:
            return False
    return True


@njit(**_JIT)
def load_feedforward(rows, site_xpos, site_xmat, xanchor, xaxis, site_id, jnt_ids, dq, bias, out):
    """out[p] ← the firmware's Coriolis feed-forward of candidate p [N·m]: bias[p] −
    C_load(true payload) + C_load(configured load), or bias[p] itself (bit for bit) when the
    two loads are equal.

    rows (P, 14) (load.load_inertia_rows); site_xpos (P, nsite, 3), site_xmat (P, nsite, 9),
    xanchor, xaxis (P, njnt, 3): MjData's rows after the velocity stage; site_id the flange
    site; jnt_ids (7,) int64; dq, bias (qfrc_bias), out (P, 7).
    """
    for p in range(out.shape[0]):
        for j in range(7):
            out[p, j] = bias[p, j]
        if loads_equal(rows[p]):
            continue
        site, mat = site_xpos[p, site_id], site_xmat[p, site_id]
        velocity_product_torque(rows[p], 0, site, mat, xanchor[p], xaxis[p], jnt_ids, dq[p], _DOFS, -1.0, out[p])
        velocity_product_torque(rows[p], 7, site, mat, xanchor[p], xaxis[p], jnt_ids, dq[p], _DOFS, 1.0, out[p])


__all__ = ["load_feedforward", "loads_equal", "velocity_product_torque"]
