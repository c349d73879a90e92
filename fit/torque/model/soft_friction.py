"""The twin's friction-loss constraint as MuJoCo's solver applies it, and the rest rule: which
rows of a Stribeck joint carry an equation for its breakaway level.

MuJoCo's `dof_frictionloss` (the twin's Stribeck breakaway level mu_s, sim/arm_model/plant.py) is a soft
constraint (MuJoCo documentation, Computation: "Constraint model", "Solver parameters"). Its
force f (7,) minimises ½ fᵀ(A + R)f + fᵀ(a₀ − a_ref) subject to |f_j| ≤ mu_s,j, with A the
inverse joint-space inertia, a₀ the acceleration without it, a_ref,j = −b_j·q̇_j,
b = 2 / (d_max·τ) from solref (τ, ζ) (τ at least two time steps), and the diagonal
R_j = (1 − d)/d · A₀,j (d = solimp's d_min at zero violation, A₀ = `dof_invweight0`, the
inverse inertia at the model's reference pose that `mj_setConst` computes with the armature).
Its optimality condition, written with the acceleration q̈ = a₀ + A·f the joint actually has
(every joint's friction included, so exact for the coupled arm):

    f_j sits at its level against the motion, −sign(q̇_j)·mu_s,j  ⇔  b_j·|q̇_j| + sign(q̇_j)·q̈_j ≥ R_j·mu_s,j

(f_j = −mu_s·sign(q̈_j + b_j·q̇_j) once |q̈_j + b_j·q̇_j| ≥ R_j·mu_s, else −(q̈_j + b_j·q̇_j)/R_j.)
Below it the joint creeps (|q̇| up to R·mu_s/b: 3–20 mm/s on the FR3's joints) or, slowing
toward rest, is braked by less than the level; a stuck joint's force is anywhere inside
[−mu_s, mu_s]; a joint slowed harder than a_ref asks can even see the level along its motion.
None of those rows carries an equation for mu_s, and the zero-phase low-pass
spreads their unmodelled force over `reach` ticks around them. Rows that satisfy the
condition with a `margin` (the filtered q̈ and the estimated R are not exact) and lie
`reach` ticks away from any row that does not are kept: they include the slow sliding just
after a breakaway, where the Stribeck columns are largest (a fixed speed threshold would drop
exactly those rows and leave the breakaway level to the fast band, where its column is small).

On a real arm the condition reads: the joint is sliding, not stuck or creeping, judged by the
twin it is being fitted to.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import mujoco
import numpy as np

from ...errors import ModelError

CREEP_MARGIN = 1.5  # rows must exceed the creep acceleration R·mu_s by this factor


@dataclass(frozen=True)
class RestVariant:
    """An alternative rest rule for the systematic error bar (systematic.py): the margin and
    the filter's reach multiplied by these factors."""

    name: str
    margin_factor: float
    reach_factor: float


# The analysis choices varied under the Stribeck law: the margin 1.5 -> 1.0 and -> 2.5, and 1/f_c -> 2/f_c.
REST_VARIANTS = (RestVariant("creep margin x2/3", 2.0 / 3.0, 1.0), RestVariant("creep margin x5/3", 5.0 / 3.0, 1.0),
                 RestVariant("filter reach x2", 1.0, 2.0))


@dataclass(frozen=True)
class FrictionConstraint:
    """MuJoCo's friction-loss constraint of the arm's 7 joints: the reference damping b (7,)
    [1/s] and the regulariser R (7,) [rad/s² per N·m] (module docstring)."""

    damping_per_s: np.ndarray
    regulariser: np.ndarray

    @classmethod
    def of_model(cls, model: mujoco.MjModel, dof_adr: np.ndarray, armature: np.ndarray) -> "FrictionConstraint":
        """From a model (not modified) with `armature` (7,) [kg·m²] written into its dofs."""
        m = copy.copy(model)
        m.dof_armature[dof_adr] = armature
        mujoco.mj_setConst(m, mujoco.MjData(m))
        solref, solimp = m.dof_solref[dof_adr], m.dof_solimp[dof_adr]
        if np.any(solref[:, 0] <= 0):
            raise ModelError("the arm's dof_solref uses the direct (negative) form: the torque route reads "
                             "only the standard (timeconst, dampratio) form")
        timeconst = np.maximum(solref[:, 0], 2.0 * m.opt.timestep)
        d_min = np.clip(solimp[:, 0], mujoco.mjMINIMP, mujoco.mjMAXIMP)
        d_max = np.clip(solimp[:, 1], mujoco.mjMINIMP, mujoco.mjMAXIMP)
        return cls(2.0 / (d_max * timeconst), (1.0 - d_min) / d_min * m.dof_invweight0[dof_adr])


@dataclass(frozen=True)
class RestRule:
    """Which rows carry an equation under the Stribeck law: per joint the damping b (7,)
    [1/s] and the creep acceleration R·mu_s (7,) [rad/s²] it was made with, and the margin."""

    damping_per_s: tuple[float, ...]
    creep_accel_rad_s2: tuple[float, ...]
    margin: float = CREEP_MARGIN

    @classmethod
    def make(cls, constraint: FrictionConstraint, mu_static: np.ndarray, margin: float = CREEP_MARGIN) -> "RestRule":
        """The rule for breakaway levels `mu_static` (7,) [N·m] (negatives read as 0)."""
        creep = constraint.regulariser * np.maximum(np.asarray(mu_static, dtype=float), 0.0)
        return cls(tuple(map(float, constraint.damping_per_s)), tuple(map(float, creep)), float(margin))

    def at_level(self, j: int, dq: np.ndarray, ddq: np.ndarray, reach: int, margin_factor: float = 1.0) -> np.ndarray:
        """(T,) bool: rows of joint j (0-based; dq [rad/s], ddq [rad/s²] (T,), filtered) whose
        friction sits at its level and whose filter window (± `reach` ticks) holds no row that
        does not (module docstring)."""
        off = (self.damping_per_s[j] * np.abs(dq) + np.sign(dq) * ddq
               < self.margin * margin_factor * self.creep_accel_rad_s2[j])
        if reach > 0:
            off = np.convolve(off.astype(float), np.ones(2 * reach + 1), mode="same") > 0
        return ~off

    def to_dict(self) -> dict:
        return {"damping_per_s": list(self.damping_per_s), "creep_accel_rad_s2": list(self.creep_accel_rad_s2),
                "margin": self.margin}

    @classmethod
    def from_dict(cls, d: dict) -> "RestRule":
        return cls(tuple(d["damping_per_s"]), tuple(d["creep_accel_rad_s2"]), float(d["margin"]))


__all__ = ["CREEP_MARGIN", "REST_VARIANTS", "FrictionConstraint", "RestRule", "RestVariant"]
