"""The arm's links as they really are, against the model the firmware compensates with.

The twin's MJCF has gravity off: it assumes the firmware's gravity compensation (libfranka's
`Model::gravity` from its own link inertials plus the configured load) cancels the arm's
weight. A real arm's links differ from any published model by several per cent, so part of
their weight is never compensated. Two parameter groups (params.py, frozen by default) let the
twin express that:

* `link_mass_scale` s_j: link j (the body joint j moves, `fr3_link<j>`) has s_j times the
  model's mass and rotational inertia, its centre of mass kept. The mass matrix follows (the
  batch's per-candidate `body_mass` / `body_inertia`), and the weight the firmware does not
  compensate is an explicit joint torque

      τ_g,i = Σ_{b moved by joint i} (s_b − 1)·m_b · z_i · ((c_b − o_i) × g),   g = (0, 0, −9.81)

  (c_b the body's centre of mass `xipos`, o_i, z_i joint i's anchor and axis).
* `coulomb_load_per_nm` k_j: a harmonic drive's Coulomb level grows with the torque the gear
  transmits. With τ_m,j = the delayed command + the firmware's gravity compensation (the
  model's links and the configured load) at the state, the extra friction torque is

      τ_k,j = −k_j·|τ_m,j|·tanh(q̇_j / v_t)     (v_t = kernels.TANH_VELOCITY_RAD_S)

  under every friction law (smooth in q̇: no breakaway constraint of its own).

Not modelled: the firmware's Coriolis feed-forward is the twin's C(q, q̇)·q̇ of the scaled
links, not of the model's; the difference is (s − 1) times a velocity-product torque: at most
7e-4 N·m with every joint at the 0.1 rad/s of fr3_stack's preflight bounds and links 4–8 % off
(tests/sim/test_links.py), against a joint-torque noise of ~0.05 N·m.

This module holds the readable numpy definitions and the rows the compiled kernels read
(link_dynamics.py); tests check one against the other and against MuJoCo's own gravity.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from ..kernels.tick import INV_TANH_VELOCITY
from .load import GRAVITY_M_S2, EndLoad
from .model import ArmIndex
from .params import LAYOUT


@dataclass(frozen=True)
class LinkChain:
    """The bodies the arm's joints move, in the model as the firmware knows it.

    body_ids (B,) int64: every body moved by at least one arm joint except the payload body,
    ordered by joints; joints (B,) int64: how many arm joints move it (link j: j); link_of_body (B,)
    int64: which link's scale applies (0..6), −1 for bodies that are no link of a joint;
    mass_kg (B,) and inertia_kgm2 (B, 3) the model's (nominal) values.
    """

    body_ids: np.ndarray
    joints: np.ndarray
    link_of_body: np.ndarray
    mass_kg: np.ndarray
    inertia_kgm2: np.ndarray

    @property
    def table(self) -> np.ndarray:
        """(B, 2) int64 [body id, joints moving it]: what the compiled kernels read."""
        return np.ascontiguousarray(np.stack([self.body_ids, self.joints], axis=1), dtype=np.int64)


def link_chain(model: mujoco.MjModel, arm: ArmIndex) -> LinkChain:
    """The arm's chain in `model` (its masses and inertias taken as the nominal ones)."""
    jnt_bodies = [int(model.jnt_bodyid[j]) for j in arm.jnt_ids]
    ids, joints, links = [], [], []
    for b in range(1, model.nbody):
        if b == arm.payload_body:
            continue
        ancestors, a = set(), b
        while a > 0:
            ancestors.add(a)
            a = int(model.body_parentid[a])
        count = sum(1 for jb in jnt_bodies if jb in ancestors)
        if count == 0:
            continue
        ids.append(b)
        joints.append(count)
        links.append(jnt_bodies.index(b) if b in jnt_bodies else -1)
    order = np.argsort(np.array(joints), kind="stable")  # the kernels walk a suffix per joint
    body_ids = np.array(ids, dtype=np.int64)[order]
    return LinkChain(body_ids, np.array(joints, dtype=np.int64)[order], np.array(links, dtype=np.int64)[order],
                     model.body_mass[body_ids].astype(np.float64).copy(),
                     model.body_inertia[body_ids].astype(np.float64).copy())


def body_scales(matrix: np.ndarray, chain: LinkChain) -> np.ndarray:
    """(P, B) each chain body's mass scale for a (P, n) parameter matrix (1 for non-link bodies)."""
    scale = np.atleast_2d(LAYOUT.take(np.atleast_2d(matrix), "link_mass_scale"))
    out = np.ones((scale.shape[0], chain.body_ids.size))
    is_link = chain.link_of_body >= 0
    out[:, is_link] = scale[:, chain.link_of_body[is_link]]
    return out


def set_link_bodies(body_mass: np.ndarray, body_inertia: np.ndarray, matrix: np.ndarray, chain: LinkChain) -> None:
    """Write each candidate's link masses and inertias (scale × the model's, centre of mass
    kept) into a batch's expanded (P, nbody) `body_mass` and (P, nbody, 3) `body_inertia`."""
    scales = body_scales(matrix, chain)
    body_mass[:, chain.body_ids] = scales * chain.mass_kg
    body_inertia[:, chain.body_ids] = scales[:, :, None] * chain.inertia_kgm2


def link_rows(matrix: np.ndarray, chain: LinkChain) -> np.ndarray:
    """(P, B + 7) per candidate [Δm_b = (s_b − 1)·m_b (B) | k_j (7)]: what the link torque
    depends on beyond the state (link_dynamics.link_torque)."""
    m = np.atleast_2d(matrix)
    rows = np.empty((m.shape[0], chain.body_ids.size + 7))
    rows[:, : chain.body_ids.size] = (body_scales(m, chain) - 1.0) * chain.mass_kg
    rows[:, chain.body_ids.size:] = LAYOUT.take(m, "coulomb_load_per_nm")
    return np.ascontiguousarray(rows)


def firmware_row(chain: LinkChain, configured: EndLoad) -> np.ndarray:
    """(B + 4,) what the firmware's gravity compensation is made of: the model's masses (B)
    and the configured load [m, m·c (3)] in the flange frame [kg, kg·m]."""
    row = np.empty(chain.body_ids.size + 4)
    row[: chain.body_ids.size] = chain.mass_kg
    row[-4] = configured.mass_kg
    row[-3:] = configured.mass_kg * np.asarray(configured.com_m)
    return row


def links_active(rows: np.ndarray) -> bool:
    """True when some candidate's links or load-dependent friction differ from the model's."""
    return bool(np.any(rows != 0.0))


def gravity_torque(masses: np.ndarray, centres: np.ndarray, joints: np.ndarray, xanchor: np.ndarray,
                   xaxis: np.ndarray) -> np.ndarray:
    """Joint torque [N·m] of point masses' weight, (P, 7): Σ_b m_b·z_i·((c_b − o_i) × g) over
    the bodies joint i moves (joints[b] > i). masses (P, B) [kg]; centres (P, B, 3) [m];
    joints (B,); xanchor, xaxis (P, 7, 3) the arm's joints."""
    g = np.array([0.0, 0.0, -GRAVITY_M_S2])
    moved = joints[None, :] > np.arange(7)[:, None]  # (7, B)
    lever = centres[:, None, :, :] - xanchor[:, :, None, :]  # (P, 7, B, 3)
    moment = np.cross(lever, g) * masses[:, None, :, None]
    return np.einsum("pik,pibk,ib->pi", xaxis, moment, moved.astype(np.float64))


def link_gravity_torque(rows: np.ndarray, chain: LinkChain, xipos: np.ndarray, xanchor: np.ndarray,
                        xaxis: np.ndarray) -> np.ndarray:
    """The readable form of the uncompensated weight of the links [N·m], (P, 7): gravity_torque
    of Δm_b (link_rows) at the bodies' centres xipos (P, B, 3)."""
    return gravity_torque(rows[:, : chain.body_ids.size], xipos, chain.joints, xanchor, xaxis)


def firmware_gravity(firmware: np.ndarray, chain: LinkChain, xipos: np.ndarray, site_pos: np.ndarray,
                     site_xmat: np.ndarray, xanchor: np.ndarray, xaxis: np.ndarray) -> np.ndarray:
    """The firmware's gravity compensation [N·m], (P, 7): minus the weight torque of the model's
    links and the configured load (firmware_row) at the state; site_pos (P, 3), site_xmat (P, 9)."""
    count = chain.body_ids.size
    load_centre = site_pos + np.einsum("pij,j->pi", site_xmat.reshape(-1, 3, 3),
                                       firmware[-3:] / firmware[-4] if firmware[-4] > 0 else np.zeros(3))
    masses = np.concatenate([np.broadcast_to(firmware[:count], (xipos.shape[0], count)),
                             np.full((xipos.shape[0], 1), firmware[-4])], axis=1)
    centres = np.concatenate([xipos, load_centre[:, None, :]], axis=1)
    joints = np.concatenate([chain.joints, [7]])
    return -gravity_torque(masses, centres, joints, xanchor, xaxis)


def load_friction_torque(k: np.ndarray, motor_torque: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """The load-dependent Coulomb torque −k·|τ_m|·tanh(q̇/v_t) [N·m], all (P, 7)."""
    return -k * np.abs(motor_torque) * np.tanh(dq * INV_TANH_VELOCITY)


__all__ = ["LinkChain", "body_scales", "set_link_bodies", "firmware_gravity", "firmware_row", "gravity_torque", "link_chain",
           "link_gravity_torque", "link_rows", "links_active", "load_friction_torque"]
