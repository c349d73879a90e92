"""The links' torque, compiled: the weight the firmware does not compensate and the
load-dependent Coulomb friction (links.py has the readable definitions and the rows).

Per candidate, from MuJoCo's data after its position stage (`xipos` of the chain's bodies, the
joints' `xanchor` / `xaxis`, the flange frame) and the delay ring:

    τ_j += g0·(z_y·(W_x − M·o_x) − z_x·(W_y − M·o_y))                     (the links' Δ weight)
         − k_j·|τ_cmd(k − d_j) + h_j|·tanh(q̇_j / v_t)                  (load-dependent friction)

with M, W the sums of Δm_b and Δm_b·c_b over the bodies joint j moves, and h_j the firmware's
gravity compensation (the model's masses and the configured load, summed the same way).
Nothing is added for a candidate whose row is all zero (bit for bit).

Public API:
  link_torque(row, bodies, firmware, xipos, anchors, axes, jnt_ids, site, mat, ring, tick, delays, p,
              qvel, dofadr, out)        one candidate (inlined where used; the callback too)
  add_link_torque(rows, bodies, firmware, xipos, xanchor, xaxis, site_xpos, site_xmat, site_id,
                  jnt_ids, ring, tick, delays, dq, applied)   the population (P, 7)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .tick import _JIT, GRAVITY_M_S2, INV_TANH_VELOCITY, load_point

_DOFS = np.arange(7, dtype=np.int64)  # the (P, 7) rows' own joint order


@njit(**_JIT, inline="always")
def link_torque(row, bodies, firmware, xipos, anchors, axes, jnt_ids, site, mat, ring, tick, delays, p, qvel,
                dofadr, out):
    """out[dofadr[j]] += the links' torque of candidate p [N·m] (module docstring).

    row (B + 7,) [Δm (B) | k (7)] (links.link_rows); bodies (B, 2) int64 [body id, joints moving
    it], ascending in joints; firmware (B + 4,) (links.firmware_row); xipos, anchors, axes
    (nbody | njnt, 3) MjData rows; jnt_ids (7,); site (3,), mat (9,) the flange frame; ring
    (L, P, 7) commands by tick, tick this tick, delays (P, 7); qvel[dofadr[j]] [rad/s]."""
    count = bodies.shape[0]
    gravity = False
    for b in range(count):
        if row[b] != 0.0:
            gravity = True
    friction = False
    for j in range(7):
        if row[count + j] != 0.0:
            friction = True
    if not gravity and not friction:
        return
    m_sum = w_x = w_y = 0.0  # Δm, Δm·c of the bodies joint j moves
    f_sum = v_x = v_y = 0.0  # the firmware's masses and moments, the configured load included
    if friction and firmware[count] != 0.0:
        f_sum = firmware[count]
        v_x, v_y = load_point(f_sum, firmware[count + 1], firmware[count + 2], firmware[count + 3], site, mat)
    b = count - 1
    length = ring.shape[0]
    for j in range(6, -1, -1):
        while b >= 0 and bodies[b, 1] > j:
            body = bodies[b, 0]
            x, y = xipos[body, 0], xipos[body, 1]
            m_sum, w_x, w_y = m_sum + row[b], w_x + row[b] * x, w_y + row[b] * y
            if friction:
                f_sum, v_x, v_y = f_sum + firmware[b], v_x + firmware[b] * x, v_y + firmware[b] * y
            b -= 1
        a = jnt_ids[j]
        z_x, z_y, o_x, o_y = axes[a, 0], axes[a, 1], anchors[a, 0], anchors[a, 1]
        tau = GRAVITY_M_S2 * (z_y * (w_x - m_sum * o_x) - z_x * (w_y - m_sum * o_y))
        k = row[count + j]
        if k != 0.0:
            hold = -GRAVITY_M_S2 * (z_y * (v_x - f_sum * o_x) - z_x * (v_y - f_sum * o_y))
            motor = ring[(tick - delays[p, j]) % length, p, j] + hold
            tau = tau - k * abs(motor) * math.tanh(qvel[dofadr[j]] * INV_TANH_VELOCITY)
        out[dofadr[j]] = out[dofadr[j]] + tau


@njit(**_JIT)
def add_link_torque(rows, bodies, firmware, xipos, xanchor, xaxis, site_xpos, site_xmat, site_id, jnt_ids, ring,
                    tick, delays, dq, applied):
    """applied[p, j] += link_torque of candidate p, for a population.

    rows (P, B + 7); xipos (P, nbody, 3), xanchor, xaxis (P, njnt, 3), site_xpos (P, nsite, 3),
    site_xmat (P, nsite, 9): MjData's rows; ring (L, P, 7), tick, delays (P, 7) the delay line
    after this tick's push; dq, applied (P, 7)."""
    for p in range(applied.shape[0]):
        link_torque(rows[p], bodies, firmware, xipos[p], xanchor[p], xaxis[p], jnt_ids, site_xpos[p, site_id],
                    site_xmat[p, site_id], ring, tick, delays, p, dq[p], _DOFS, applied[p])


__all__ = ["add_link_torque", "link_torque"]
