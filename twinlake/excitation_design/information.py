"""The design's surrogate for a fit's information: the torque route's joint-local equations
evaluated analytically on a candidate reference q(t), q̇(t), q̈(t).

Joint j's commanded torque (fit/torque/model/friction_basis.py) is

    τ_j = [rigid body, known] + armature_j·q̈ + sign(q̇)·mu_s·(e + r·(1 − e)) + mu_viscous_j·q̇
          + asym_j·tanh²(q̇/v_t) − bias_j,          e = exp(−(q̇/v_s)²), r = dynamic_ratio_j

(the tanh law: mu_s·tanh(q̇/v_t), no ratio). The sensitivity of τ_j to each chosen parameter
is a column of the regressor; only joint j's own parameters enter joint j's row, so the
Fisher information I = Σ_t s_t s_tᵀ / σ² is block-diagonal by joint and each joint is designed
on its own. The torque route leaves out, under the Stribeck law, rows where the friction-loss
constraint is not at its level (fit/torque/model/soft_friction.py: stuck, creeping or slowing toward
rest); the replay fit, whose information the design is for, sees those samples (sticking or
slipping is what the simulated position shows). So every row is kept by default
(`rest_velocity_rad_s` 0); a positive `rest_velocity_rad_s` leaves out the rows slower than it,
a rough stand-in for the torque route's rule: at 0.03 rad/s fr3_stack's documented 1°
multisine, whose reference never moves faster than ~0.02 rad/s, carries no friction equation at all.

The rows stand for independent samples at `RATE_HZ` (1 kHz, the recording rate) with torque
noise σ = `NOISE_TAU_NM` (the daemon's sensor noise, daemon/noise.py); the predicted 95 %
half-width of θ_i is 1.96·sqrt((I⁻¹)_ii) and its relative form divides by |θ_i| (by the
parameter's bound width where θ_i = 0). The rigid body, the payload and the delay are not in
the surrogate: a spec freeing them is refused (`CHOSEN_GROUPS`).

Arrays: signals (N, T) for N candidates on T samples; columns (N, T, p); information (N, p, p).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fit import ParameterSpace
from ..fit import VELOCITY_SCALE_RAD_S
from ..sim.arm_model.params import LAYOUT, DynamicsParams

# the per-joint, continuous groups the joint-local surrogate expresses: the layout's per-joint
# groups, less the sigmoid law's shape and the per-joint delay offsets (not in the surrogate)
CHOSEN_GROUPS = tuple(g.name for g in LAYOUT.groups if g.per_joint and not g.integer
                      and not g.name.startswith(("sigmoid_", "motor_delay")))
RATE_HZ = 1000.0
NOISE_TAU_NM = 0.05
Z95 = 1.959964


@dataclass(frozen=True)
class ChosenParameters:
    """The parameters a design serves: per joint (0-based) the group names chosen, their values
    at the linearisation point and the scales of their relative half-widths; `law` the
    friction law (stribeck or tanh)."""

    groups: tuple[tuple[str, ...], ...]
    values: tuple[tuple[float, ...], ...]
    scales: tuple[tuple[float, ...], ...]
    law: str = "stribeck"
    rest_velocity_rad_s: float = 0.0

    def names(self, joint: int) -> list[str]:
        return [f"{g}_j{joint + 1}" for g in self.groups[joint]]

    def all_names(self) -> list[str]:
        return [n for j in range(7) for n in self.names(j)]


def choose(space: ParameterSpace, at: DynamicsParams, rest_velocity_rad_s: float = 0.0) -> ChosenParameters:
    """The free continuous parameters of `space` (fit/core/space.py), linearised at `at`;
    ValueError naming a free parameter the surrogate cannot serve."""
    if space.friction_law not in ("stribeck", "tanh"):
        raise ValueError(f"friction law {space.friction_law!r}: the design's surrogate serves stribeck and tanh")
    vector = at.to_vector()
    per_joint: list[list[tuple[str, float, float]]] = [[] for _ in range(7)]
    for i in space.free_indices:
        name = LAYOUT.names[int(i)]
        group, _, joint = name.rpartition("_j")
        if group not in CHOSEN_GROUPS or not joint.isdigit():
            raise ValueError(f"--params frees {name}: the design's surrogate serves the per-joint groups "
                             f"{', '.join(CHOSEN_GROUPS)} only")
        lo, hi = space.bounds[int(i)]
        value = float(vector[int(i)])
        per_joint[int(joint) - 1].append((group, value, abs(value) if value != 0 else float(hi - lo)))
    return ChosenParameters(groups=tuple(tuple(g for g, _, _ in j) for j in per_joint),
                            values=tuple(tuple(v for _, v, _ in j) for j in per_joint),
                            scales=tuple(tuple(s for _, _, s in j) for j in per_joint),
                            law=space.friction_law, rest_velocity_rad_s=rest_velocity_rad_s)


def joint_columns(chosen: ChosenParameters, joint: int, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """The sensitivities (N, T, p) of joint `joint`'s torque to its chosen parameters at the
    reference velocity dq and acceleration ddq (N, T); under Stribeck, rows slower than the
    chosen rest threshold are zeroed."""
    values = dict(zip(chosen.groups[joint], chosen.values[joint]))
    ratio = values.get("dynamic_ratio", 1.0)
    mu_s = values.get("mu_static", 1.0)
    sign = np.sign(dq)
    e = np.exp(-(dq / VELOCITY_SCALE_RAD_S) ** 2)
    smooth = np.tanh(dq / VELOCITY_SCALE_RAD_S)
    cols = []
    for group in chosen.groups[joint]:
        if group == "armature":
            cols.append(ddq)
        elif group == "mu_static":
            cols.append(smooth if chosen.law == "tanh" else sign * (e + ratio * (1.0 - e)))
        elif group == "dynamic_ratio":
            cols.append(mu_s * sign * (1.0 - e))
        elif group == "mu_viscous":
            cols.append(dq)
        elif group == "coulomb_asymmetry":
            cols.append(smooth ** 2)
        else:  # tau_bias
            cols.append(-np.ones_like(dq))
    out = np.stack(cols, axis=-1) if cols else np.zeros(dq.shape + (0,))
    if chosen.law == "stribeck" and chosen.rest_velocity_rad_s > 0:
        out = out * (np.abs(dq) >= chosen.rest_velocity_rad_s)[..., None]
    return out


def information(columns: np.ndarray, sample_rate_hz: float, noise_tau_nm: float = NOISE_TAU_NM) -> np.ndarray:
    """I (N, p, p) of columns (N, T, p) sampled at `sample_rate_hz`, standing for RATE_HZ rows."""
    weight = (RATE_HZ / sample_rate_hz) / noise_tau_nm ** 2
    return weight * np.einsum("ntp,ntq->npq", columns, columns)


def half_widths(info: np.ndarray, scales) -> np.ndarray:
    """Relative 95 % half-widths (N, p): 1.96·sqrt((I⁻¹)_ii) / scale_i; inf where I is singular."""
    n, p = info.shape[0], info.shape[1]
    if p == 0:
        return np.zeros((n, 0))
    diag = np.sqrt(np.einsum("npp->np", info)) + 1e-300  # Jacobi-scaled inverse: better conditioned
    scaled = info / diag[:, :, None] / diag[:, None, :]
    out = np.full((n, p), np.inf)
    ok = np.linalg.cond(scaled) < 1e12
    if ok.any():
        inv = np.linalg.inv(scaled[ok])
        var = np.einsum("npp->np", inv) / diag[ok] ** 2
        out[ok] = Z95 * np.sqrt(np.maximum(var, 0.0)) / np.asarray(scales, dtype=np.float64)
    return out


def log_det(info: np.ndarray, scales) -> np.ndarray:
    """log det of the information of the relative parameters θ_i / scale_i, (N,); −inf singular."""
    s = np.asarray(scales, dtype=np.float64)
    sign, value = np.linalg.slogdet(info * s[:, None] * s[None, :])
    return np.where(sign > 0, value, -np.inf)


__all__ = ["CHOSEN_GROUPS", "ChosenParameters", "NOISE_TAU_NM", "RATE_HZ", "choose", "half_widths", "information",
           "joint_columns", "log_det"]
