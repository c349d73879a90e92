"""The joint-local columns of the torque equation: friction in each of the twin's laws, the
rotor inertia, the Coulomb asymmetry and a constant torque, one column per joint each.

The twin's joint torque balance (sim/plant.py), solved for the commanded torque τ_cmd:

    τ_cmd,j(k − d) = [rigid body]_j + armature_j·q̈_j + mu_viscous_j·q̇⁺_j + sign(q̇_j)·F_j(q̇_j)
                     + asym_j·tanh²(q̇_j/v_t) − bias_j

with q̇⁺ the velocity after the step (MuJoCo integrates the damping implicitly) and the law's
sliding level F_j: Stribeck mu_d + (mu_s − mu_d)·exp(−(q̇/v_s)²), linear in (mu_s, mu_d), so
the columns are sign(q̇)·e and sign(q̇)·(1 − e), e = exp(−(q̇/v_s)²); tanh mu_c·tanh(q̇/v_t)
(one column tanh(q̇/v_t)). v_s = v_t = 0.02 rad/s as the twin's kernels. The sigmoid law is
not linear in its shape (φ2, φ3): the torque route does not offer it.

**At rest.** Under the Stribeck law the breakaway level is MuJoCo's friction-loss constraint:
a set-valued force in [−mu_s, mu_s] while the joint sticks, so a sample at (or within
`rest_velocity_rad_s` of) zero velocity carries no equation for it. Those rows are left out of
that joint's equations (not used as inequalities). What is left identifies mu_s only through
the slow sliding samples (|q̇| between the threshold and a few v_s); its error bar says how
well. The tanh law is a smooth function of q̇ with no set-valued part: every row is kept.
Where the threshold and the reach sit is an analysis choice (MuJoCo's friction-loss constraint
is soft, so rows just above the threshold still carry some unmodelled force): REST_VARIANTS
are the alternatives whose effect on β becomes a systematic error bar (systematic.py).

On the measured (link-side) route the same friction columns, with the same signs, describe
friction between the torque sensor and the link; the rotor inertia is never a column there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VELOCITY_SCALE_RAD_S = 0.02  # the twin's v_s and v_t (sim/kernels.py)
REST_VELOCITY_RAD_S = 0.03  # |q̇| below it: no equation for a set-valued Stribeck joint

LAWS = ("stribeck", "tanh")


@dataclass(frozen=True)
class RestVariant:
    """An alternative rest rule for the systematic error bar (fit/torque/systematic.py): the
    threshold and the filter's reach multiplied by these factors."""

    name: str
    threshold_factor: float
    reach_factor: float


# The analysis choices varied under the Stribeck law: 0.03 -> 0.05 rad/s, and 1/f_c -> 2/f_c.
REST_VARIANTS = (RestVariant("rest threshold x5/3", 5.0 / 3.0, 1.0), RestVariant("filter reach x2", 1.0, 2.0))


def check_law(law: str) -> str:
    """The law name, or ValueError saying which laws the torque route can fit."""
    if law not in LAWS:
        raise ValueError(f"friction law {law!r}: the torque route fits {', '.join(LAWS)} "
                         "(the sigmoid law is not linear in its shape parameters)")
    return law


def law_columns(law: str, dq: np.ndarray) -> dict[str, np.ndarray]:
    """Friction-level columns of one joint's velocity dq (T,) [rad/s] under `law`, keyed by
    the twin's group names (mu_dynamic is converted to dynamic_ratio afterwards)."""
    sign = np.sign(dq)
    if check_law(law) == "tanh":
        return {"mu_static": np.tanh(dq / VELOCITY_SCALE_RAD_S)}
    e = np.exp(-(dq / VELOCITY_SCALE_RAD_S) ** 2)
    return {"mu_static": sign * e, "mu_dynamic": sign * (1.0 - e)}


def joint_columns(groups: tuple[str, ...], law: str, dq: np.ndarray, dq_next: np.ndarray,
                  ddq: np.ndarray) -> dict[str, np.ndarray]:
    """The columns (T,) of one joint for each requested group (armature, mu_viscous,
    friction, coulomb_asymmetry, tau_bias, tau_offset), in the commanded route's signs."""
    out: dict[str, np.ndarray] = {}
    for group in groups:
        if group == "armature":
            out["armature"] = ddq
        elif group == "mu_viscous":
            out["mu_viscous"] = dq_next
        elif group == "friction":
            out.update(law_columns(law, dq))
        elif group == "coulomb_asymmetry":
            out["coulomb_asymmetry"] = np.tanh(dq / VELOCITY_SCALE_RAD_S) ** 2
        elif group == "tau_bias":
            out["tau_bias"] = -np.ones_like(dq)
        elif group == "tau_offset":
            out["tau_offset"] = np.ones_like(dq)
        else:
            raise ValueError(f"unknown joint column group {group!r}")
    return out


def rest_mask(law: str, dq: np.ndarray, threshold_rad_s: float = REST_VELOCITY_RAD_S, reach: int = 0) -> np.ndarray:
    """(T,) bool: rows that carry an equation: under Stribeck False for |q̇| < threshold and
    for `reach` ticks either side of such a row (the low-pass spreads its unmodelled
    friction that far); every row under tanh."""
    if law != "stribeck":
        return np.ones(len(dq), dtype=bool)
    rest = np.abs(dq) < threshold_rad_s
    if reach > 0:
        rest = np.convolve(rest.astype(float), np.ones(2 * reach + 1), mode="same") > 0
    return ~rest


__all__ = ["LAWS", "REST_VARIANTS", "REST_VELOCITY_RAD_S", "RestVariant", "VELOCITY_SCALE_RAD_S", "check_law", "joint_columns", "law_columns",
           "rest_mask"]
