"""An end-effector load at the FR3's flange: the true payload the arm carries and the load
configured in the robot's firmware (Desk / libfranka `Robot::setLoad`).

The FR3's firmware adds gravity compensation computed from its own model plus the configured
load (mass, centre of mass in the flange frame, inertia). The arm feels its true load. So the
torque the links see from the loads is the true payload's weight minus the configured load's
compensation; with the two equal it vanishes (the model's zero gravity: the firmware
compensates the arm itself exactly). `EndLoad` is one load; `parse_load` reads the command-line
form `MASS[,X,Y,Z]`, `load_from_metadata` a recording's metadata.

Units: mass [kg], centre of mass [m] in the flange frame (the `ee` site's frame), inertia
[kg·m²] about the centre of mass, diagonal in the flange frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

GRAVITY_M_S2 = 9.81  # libfranka's and MuJoCo's standard gravity; the base is upright (−z)


def _triple(value: Any, what: str) -> tuple[float, float, float]:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: expected 3 finite numbers, got {value!r:.80}")
    return float(arr[0]), float(arr[1]), float(arr[2])


@dataclass(frozen=True)
class EndLoad:
    """A load at the flange: mass_kg [kg] (≥ 0), com_m [m] (3,) in the flange frame,
    inertia_kgm2 [kg·m²] (3,) the diagonal about the centre of mass."""

    mass_kg: float = 0.0
    com_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    inertia_kgm2: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0))

    def __post_init__(self) -> None:
        mass = float(self.mass_kg)
        if not (math.isfinite(mass) and mass >= 0.0):
            raise ValueError(f"load mass: expected a finite number >= 0 kg, got {self.mass_kg!r}")
        object.__setattr__(self, "mass_kg", mass)
        object.__setattr__(self, "com_m", _triple(self.com_m, "load centre of mass"))
        inertia = _triple(self.inertia_kgm2, "load inertia")
        if min(inertia) < 0.0:
            raise ValueError(f"load inertia: expected values >= 0 kg·m², got {list(inertia)}")
        object.__setattr__(self, "inertia_kgm2", inertia)

    @property
    def is_zero(self) -> bool:
        return self.mass_kg == 0.0

    def to_json(self) -> dict:
        return {"mass_kg": self.mass_kg, "com_m": list(self.com_m), "inertia_kgm2": list(self.inertia_kgm2)}


NO_LOAD = EndLoad()


def parse_load(text: str, what: str = "--configured-load") -> EndLoad:
    """`MASS[,X,Y,Z]` (kg, then the centre of mass in the flange frame [m]) → EndLoad."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) not in (1, 4):
        raise ValueError(f"{what} {text!r}: expected MASS or MASS,X,Y,Z (kg, m)")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected numbers in MASS[,X,Y,Z]") from None
    try:
        return EndLoad(values[0], tuple(values[1:]) if len(values) == 4 else (0.0, 0.0, 0.0))
    except ValueError as exc:
        raise ValueError(f"{what} {text!r}: {exc}") from None


def load_from_json(doc: Any, what: str) -> EndLoad:
    """An EndLoad from its JSON form: {"mass_kg", "com_m"?, "inertia_kgm2"?}, or libfranka's
    setLoad names {"load_mass", "F_x_Cload", "load_inertia"} (inertia a 3×3 column-major list,
    its diagonal kept). ValueError naming `what` otherwise."""
    if isinstance(doc, EndLoad):
        return doc
    if not isinstance(doc, Mapping):
        raise ValueError(f"{what}: expected an object with mass_kg (and com_m), got {doc!r:.60}")
    try:
        if "load_mass" in doc:
            inertia = doc.get("load_inertia")
            diag = np.asarray(inertia, dtype=np.float64).reshape(3, 3).diagonal() if inertia is not None else (0, 0, 0)
            return EndLoad(doc["load_mass"], doc.get("F_x_Cload", (0.0, 0.0, 0.0)), diag)
        if "mass_kg" not in doc:
            raise ValueError("missing field mass_kg")
        return EndLoad(doc["mass_kg"], doc.get("com_m", (0.0, 0.0, 0.0)), doc.get("inertia_kgm2", (0.0, 0.0, 0.0)))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def load_from_metadata(meta: Mapping[str, Any] | None, what: str = "metadata") -> EndLoad | None:
    """The configured load a recording's metadata states, None when it states none.

    Looks for `configured_load` at the top level (`twinlake excite --configured-load`, the
    offline recorder), under `args` (a FrankaTwin sidecar's arguments), `robot` and
    `experiment` (the user's `--experiment-metadata` object); each in EndLoad's JSON form or
    libfranka's setLoad names.
    """
    if not isinstance(meta, Mapping):
        return None
    for where in (meta, meta.get("args"), meta.get("robot"), meta.get("experiment")):
        if isinstance(where, Mapping) and where.get("configured_load") is not None:
            return load_from_json(where["configured_load"], f"{what}: configured_load")
    return None


def load_gravity_torque(load_rows: np.ndarray, site_pos: np.ndarray, site_xmat: np.ndarray,
                        xanchor: np.ndarray, xaxis: np.ndarray) -> np.ndarray:
    """The readable definition of the loads' joint torque [N·m], (P, 7) (kernels.add_load_torque
    is the compiled form used by the engines; tests check one against the other).

    load_rows (P, 4) = [Δm, w] (load_row); site_pos (P, 3), site_xmat (P, 9) the flange frame;
    xanchor, xaxis (P, 7, 3) the joints. The weight of the true payload minus the configured
    load's compensation is the force m·g at each load's centre of mass, signed: their moment
    about joint j is (W − Δm·anchor_j) × g with W = Δm·site + R·w, and τ_j = axis_j · moment.
    """
    dm = load_rows[:, 0]
    rotated = np.einsum("pij,pj->pi", site_xmat.reshape(-1, 3, 3), load_rows[:, 1:4])
    weighted = dm[:, None] * site_pos + rotated  # (P, 3)
    lever = weighted[:, None, :] - dm[:, None, None] * xanchor  # (P, 7, 3)
    gravity = np.array([0.0, 0.0, -GRAVITY_M_S2])
    moment = np.cross(lever, gravity)
    return np.einsum("pjk,pjk->pj", xaxis, moment)


def load_row(payload_mass_kg: np.ndarray, payload_com_m: np.ndarray, configured: EndLoad) -> np.ndarray:
    """(P, 4) per candidate [Δm, w_x, w_y, w_z]: Δm = m_true − m_configured [kg] and
    w = m_true·c_true − m_configured·c_configured [kg·m] in the flange frame, the two numbers
    the loads' gravity torque depends on (kernels.add_load_torque)."""
    m = np.asarray(payload_mass_kg, dtype=np.float64).reshape(-1)
    c = np.asarray(payload_com_m, dtype=np.float64).reshape(-1, 3)
    rows = np.empty((m.size, 4))
    rows[:, 0] = m - configured.mass_kg
    rows[:, 1:4] = m[:, None] * c - configured.mass_kg * np.asarray(configured.com_m)
    return rows


def load_inertia_rows(payload_mass_kg: np.ndarray, payload_com_m: np.ndarray, payload_inertia_kgm2: np.ndarray,
                      configured: EndLoad) -> np.ndarray:
    """(P, 14) per candidate [m, c (3), I (3)] of the true payload, then the same of the
    configured load: what the loads' Coriolis torque depends on (load_dynamics.load_feedforward).
    Mass [kg], centre of mass [m] in the flange frame, diagonal inertia about it [kg·m²]."""
    m = np.asarray(payload_mass_kg, dtype=np.float64).reshape(-1)
    rows = np.empty((m.size, 14))
    rows[:, 0] = m
    rows[:, 1:4] = np.asarray(payload_com_m, dtype=np.float64).reshape(-1, 3)
    rows[:, 4:7] = np.asarray(payload_inertia_kgm2, dtype=np.float64).reshape(-1, 3)
    rows[:, 7] = configured.mass_kg
    rows[:, 8:11] = configured.com_m
    rows[:, 11:14] = configured.inertia_kgm2
    return rows


def loads_differ(rows: np.ndarray) -> bool:
    """True when some candidate's true payload and configured load (load_inertia_rows) differ:
    only then does the firmware's Coriolis feed-forward differ from the sim's qfrc_bias."""
    true, configured = np.split(rows, 2, axis=1)  # [m, c (3), I (3)] each
    return bool(np.any(true != configured))


def load_coriolis_torque(mass_kg: np.ndarray, com_m: np.ndarray, inertia_kgm2: np.ndarray, site_pos: np.ndarray,
                         site_xmat: np.ndarray, xanchor: np.ndarray, xaxis: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """The readable definition of a flange load's velocity-product (Coriolis + centripetal)
    joint torque [N·m], (P, 7) (load_dynamics.velocity_product_torque is the compiled form;
    tests check both against MuJoCo's qfrc_bias with and without the load).

    mass_kg (P,); com_m, inertia_kgm2 (P, 3) in the flange frame (diagonal about the centre of
    mass); site_pos (P, 3), site_xmat (P, 9) the flange frame; xanchor o_j, xaxis z_j (P, 7, 3)
    of a serial chain from a fixed base; dq (P, 7). With ω_j = Σ_{i≤j} z_i q̇_i, ż_j = ω_j × z_j,
    v_o_j = Σ_{i<j} z_i × (o_j − o_i) q̇_i, c the centre of mass, r_j = c − o_j:
    v_c = Σ z_j × r_j q̇_j; a_c = Σ [ż_j × r_j + z_j × (v_c − v_o_j)] q̇_j; α = Σ ż_j q̇_j;
    F = m·a_c, N = I_w α + ω × (I_w ω), I_w = R I Rᵀ; τ_j = z_j · (N + r_j × F).
    """
    rot = site_xmat.reshape(-1, 3, 3)
    c = site_pos + np.einsum("pij,pj->pi", rot, com_m)
    z, o, dq = xaxis, xanchor, dq[:, :, None]
    omega_j = np.cumsum(z * dq, axis=1)  # (P, 7, 3) the angular velocity of joint j's body
    omega = omega_j[:, -1]
    r = c[:, None, :] - o
    v_c = np.sum(np.cross(z, r) * dq, axis=1)
    lever = o[:, None, :, :] - o[:, :, None, :]  # [p, i, j] = o_j − o_i
    earlier = np.tril(np.ones((7, 7)), -1).T[None, :, :, None]  # [i, j] = 1 where i < j
    v_o = np.sum(np.cross(z[:, :, None, :], lever) * dq[:, :, :, None] * earlier, axis=1)  # (P, 7, 3)
    z_dot = np.cross(omega_j, z)
    a_c = np.sum((np.cross(z_dot, r) + np.cross(z, v_c[:, None, :] - v_o)) * dq, axis=1)
    alpha = np.sum(z_dot * dq, axis=1)
    inertia_w = np.einsum("pij,pj,pkj->pik", rot, inertia_kgm2, rot)
    force = mass_kg[:, None] * a_c
    spin = np.einsum("pij,pj->pi", inertia_w, omega)
    torque = np.einsum("pij,pj->pi", inertia_w, alpha) + np.cross(omega, spin)
    return np.einsum("pjk,pjk->pj", z, torque[:, None, :] + np.cross(r, force[:, None, :]))


__all__ = ["EndLoad", "GRAVITY_M_S2", "NO_LOAD", "load_coriolis_torque", "load_from_json", "load_from_metadata",
           "load_gravity_torque", "load_inertia_rows", "load_row", "loads_differ", "parse_load"]
