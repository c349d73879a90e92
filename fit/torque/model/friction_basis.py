"""The joint-local columns of the torque equation: friction in each of the twin's laws, the
rotor inertia, the Coulomb asymmetry and a constant torque, one column per joint each.

The twin's joint torque balance (sim/arm_model/plant.py), solved for the commanded torque τ_cmd:

    τ_cmd,j(k − d) = [rigid body]_j + armature_j·q̈_j + mu_viscous_j·q̇⁺_j + sign(q̇_j)·F_j(q̇_j)
                     + asym_j·tanh²(q̇_j/v_t) − bias_j

with q̇⁺ the velocity after the step (MuJoCo integrates the damping implicitly) and the law's
sliding level F_j: Stribeck mu_d + (mu_s − mu_d)·exp(−(q̇/v_s)²), linear in (mu_s, mu_d), so
the columns are sign(q̇)·e and sign(q̇)·(1 − e), e = exp(−(q̇/v_s)²); tanh mu_c·tanh(q̇/v_t)
(one column tanh(q̇/v_t)). v_s = v_t = 0.02 rad/s as the twin's kernels. The sigmoid law is
not linear in its shape (φ2, φ3): the torque route does not offer it.

**At rest.** Under the Stribeck law the breakaway level is MuJoCo's friction-loss constraint:
a set-valued force in [−mu_s, mu_s] while the joint sticks, and a soft one (creeping, braking
below its level) near rest. Rows where it is not at its level carry no equation for it and are
left out (not used as inequalities); which rows those are is the rest rule of soft_friction.py.
What is kept includes the slow sliding just after each breakaway, where the column sign(q̇)·e
is largest, so mu_s and mu_d are both identified. The tanh law is a smooth function of q̇ with
no set-valued part: every row is kept.

On the measured (link-side) route the same friction columns, with the same signs, describe
friction between the torque sensor and the link; the rotor inertia is never a column there.
"""

from __future__ import annotations

import numpy as np

from ...errors import SettingError

VELOCITY_SCALE_RAD_S = 0.02  # the twin's v_s and v_t (sim/kernels/tick.py)

LAWS = ("stribeck", "tanh")


def check_law(law: str) -> str:
    """The law name, or ValueError saying which laws the torque route can fit."""
    if law not in LAWS:
        raise SettingError("friction_law", repr(law), f"the torque route fits {', '.join(LAWS)} "
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
            raise SettingError("params", repr(group), "not a joint column group")
    return out


__all__ = ["LAWS", "VELOCITY_SCALE_RAD_S", "check_law", "joint_columns", "law_columns"]
