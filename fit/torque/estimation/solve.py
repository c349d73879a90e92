"""One torque fit's numbers: the delay scan, per-joint weights, base parameters, the estimate,
its constraints and its covariance (no lake, no records: route.py does those).

Order: (1) equally weighted solve at every scanned delay; the delay with the least residual
wins; (2) σ_j = the residual standard deviation of joint j there, weights 1/σ_j²; (3) the
weighted solve at every delay again, the least weighted residual picks the delay;
(4) base_params.analyse on the weighted normal matrix, its prior added, the weighted solve
corrected for the armature's errors-in-variables bias from velocity noise (noise_bias.py; the
delay scan's residuals use the corrected estimates); (5) estimate.constrain;
(6) HAC covariance of the unconstrained estimate; (7) under the Stribeck law the systematic
(rest-rule) component added to it (systematic.py).

Under the Stribeck law the rows used depend on the breakaway levels being estimated (the rest
rule, soft_friction.py), so `solve_at_level` alternates: rule from the current levels and
armature, solve, until the levels move less than REST_RULE_SETTLED (2 %; at most REST_RULE_PASSES solves; the
first rule from the nominal model). A joint whose level the data did not determine (no row kept, or
on an unidentifiable direction) keeps its rule's level, not the prior's.

A joint that never breaks away (its torque stays under its level: J7 of the README's gentle
multisine, commanded at most 0.58 N·m under a 1.0 N·m level) creeps on every row, its friction
the constraint's −(q̈ + b·q̇)/R, linear in q̈ and q̇. A rule whose level is under the true one
(the nominal model's 0.248 N·m there) keeps such rows; the solve reads −(q̈ + b·q̇)/R as armature
1/R and viscous friction b/R on top of the joint's own and lowers the level, the next rule keeps
more creeping rows, and the joint ends at a level near 0, armature and viscous beyond their bounds,
with error bars that say nothing of it. `creeping` names that signature: the unconstrained excess
over the nominal model of armature at least CREEP_SHARE/R and of viscous friction within a factor
CREEP_RATIO of b times it. Such a joint's rule is set to its level's upper bound (only rows that
slide even then stay; usually none, and its parameters are then held at the prior) for the
remaining passes.

The rule is the twin's friction-loss constraint, so it applies to
the commanded route only: the measured route keeps every row (equations.py, standstill).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .base_params import Identifiability, analyse
from ..model.equations import EquationSpec, SegmentEquations, normal_equations, scores, with_rest_rule
from .estimate import BodyBlock, bartlett_bandwidth, constrain, hac_covariance
from .noise_bias import VelocityNoise, correction, velocity_noise
from ..model.soft_friction import CREEP_MARGIN, FrictionConstraint, RestRule
from .systematic import Systematic, rest_systematic


@dataclass
class SolveNotes:
    """What a solve found beside its estimate: `noise_bias` the armature's errors-in-variables
    correction (VelocityNoise.to_dict() and the β `shift` it made); under the Stribeck rest rule
    (`solve_at_level`) its alternation's `rest_rule_passes`, whether it settled
    (`rest_rule_settled`), the last relative change of the breakaway levels
    (`rest_rule_last_change`) and the joints (1-based) whose rows only crept (`never_broke_away`);
    set by the route: whether the delay was scanned (`delay_scanned`) and, if so, whether the scan
    left it undetermined (`delay_undetermined`, findings.delay_undetermined). None: not done."""

    noise_bias: dict | None = None
    rest_rule_passes: int | None = None
    rest_rule_settled: bool | None = None
    rest_rule_last_change: float | None = None
    never_broke_away: list[int] | None = None
    delay_scanned: bool | None = None
    delay_undetermined: str | None = None


@dataclass
class Solution:
    """The estimate β (p,) (constrained), β̂ (unconstrained), its covariance (p, p) (HAC plus
    the systematic component; `cov_hac` the HAC part alone) and the i.i.d. one for comparison,
    the delay [ticks], per-joint σ [N·m], the delay scan's weighted residual per delay, the
    HAC bandwidth [ticks], the base-parameter analysis, whether the constraints moved it and
    the systematic (rest-rule) component."""

    names: list[str]
    beta: np.ndarray
    beta_hat: np.ndarray
    cov: np.ndarray
    cov_iid: np.ndarray
    delay: int
    sigma_nm: np.ndarray
    delay_scan: dict[int, float]
    bandwidth: int
    base: Identifiability
    constrained: bool
    rows: int
    cov_hac: np.ndarray | None = None
    systematic: Systematic | None = None
    notes: SolveNotes = field(default_factory=SolveNotes)

    @property
    def stderr(self) -> np.ndarray:
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0))


def _targets(eqs: list[SegmentEquations], delays: tuple[int, ...]) -> list[np.ndarray]:
    return [np.stack([np.nan_to_num(eq.target(d)) for d in delays], axis=2) for eq in eqs]


def _rss(eqs, targets, beta_by_delay, weights) -> np.ndarray:
    """Weighted residual sum per delay (D,)."""
    out = np.zeros(beta_by_delay.shape[1])
    for eq, y in zip(eqs, targets):
        for i in range(beta_by_delay.shape[1]):
            e = y[:, :, i] - eq.predict(beta_by_delay[:, i])
            out[i] += float((np.where(eq.rows, e, 0.0) ** 2 * weights[None, :]).sum())
    return out


def _solve(n_mat, b, prior, beta_nom):
    lhs = n_mat + prior
    rhs = b + (prior @ beta_nom)[:, None]
    return np.linalg.lstsq(lhs, rhs, rcond=None)[0]


def bounds(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) (p,) of β's linear entries: the parameter layout's bounds for the twin's
    own names (armature, mu_static, mu_viscous, coulomb_asymmetry, tau_bias), mu_dynamic within
    mu_static's box, ±inf for the rest (sensor offsets, the bodies' θ: `body_blocks`)."""
    from ....sim import LAYOUT

    lower, upper = np.full(len(names), -np.inf), np.full(len(names), np.inf)
    known = dict(zip(LAYOUT.names, LAYOUT.bounds))
    for i, n in enumerate(names):
        twin = n.replace("mu_dynamic_", "mu_static_")
        if twin in known:
            lower[i], upper[i] = known[twin]
    return lower, upper


def _snap(beta: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """β with entries within 1e-9 of their bound range from a bound set on it, and subnormal
    ones set to 0: what the solver's tolerance (1e-12) leaves there (1.8e-49 for a level held at
    0, a denormal from a bound reached from inside) is the bound, not a measurement."""
    out = beta.copy()
    span = upper - lower
    tol = np.where(np.isfinite(span), 1e-9 * span, 0.0)
    out = np.where(np.isfinite(lower) & (np.abs(out - lower) <= tol), lower, out)
    out = np.where(np.isfinite(upper) & (np.abs(out - upper) <= tol), upper, out)
    out[np.abs(out) < np.finfo(float).tiny] = 0.0
    return out


def body_blocks(spec: EquationSpec, flange_rotation: np.ndarray | None = None,
                flange_position_m: np.ndarray | None = None) -> list[BodyBlock]:
    """The freed bodies' blocks; the flange payload with the layout's payload_mass,
    payload_com_* and payload_i* bounds in the flange frame (its pose in link 7's frame)."""
    from ....sim import LAYOUT

    out = []
    for i, body in enumerate(spec.bodies):
        if body != "payload":
            out.append(BodyBlock(10 * i))
            continue
        b = dict(zip(LAYOUT.names, LAYOUT.bounds))
        out.append(BodyBlock(10 * i, mass_kg=tuple(map(float, b["payload_mass"])),
                             com_m=tuple(map(float, b["payload_com_x"])),
                             inertia_max_kgm2=float(b["payload_ixx"][1]),
                             frame_rotation=np.eye(3) if flange_rotation is None else np.asarray(flange_rotation),
                             frame_position_m=np.zeros(3) if flange_position_m is None else np.asarray(flange_position_m)))
    return out


def _weights(eqs: list[SegmentEquations], targets: list[np.ndarray], beta_nom: np.ndarray) -> np.ndarray:
    """σ_j (7,) [N·m]: the residual standard deviation per joint of the equally weighted solve
    at its best delay (steps 1–2)."""
    p = len(beta_nom)
    ones = np.ones(7)
    n0, b0 = normal_equations(eqs, ones, targets)
    ridge = np.eye(p) * 1e-12 * max(float(np.max(np.diag(n0))), 1.0)
    beta0 = _solve(n0, b0, ridge, beta_nom)
    best0 = int(np.argmin(_rss(eqs, targets, beta0, ones)))
    sq, cnt = np.zeros(7), np.zeros(7)
    for eq, y in zip(eqs, targets):
        e = np.where(eq.rows, y[:, :, best0] - eq.predict(beta0[:, best0]), 0.0)
        sq += (e**2).sum(0)
        cnt += eq.rows.sum(0)
    sigma = np.sqrt(sq / np.maximum(cnt - p / 7.0, 1.0))
    return np.where(sigma > 0, sigma, 1.0)


def _noise_corrected(eqs, weights, names, delays, damping) -> tuple[list[VelocityNoise], np.ndarray, np.ndarray]:
    """Per delay the VelocityNoise, the common ΔN (p, p) and Δb (p, D) of noise_bias.correction."""
    noises = [velocity_noise(eqs, damping, d) for d in delays]
    parts = [correction(eqs, [eq.rows for eq in eqs], weights, nz, names) for nz in noises]
    return noises, parts[0][0], np.column_stack([db for _, db in parts])


def solve(eqs: list[SegmentEquations], spec: EquationSpec, beta_nom: np.ndarray,
          damping_nms_rad: np.ndarray | None = None, flange: tuple = (None, None)) -> Solution:
    """The Solution of the segments' equations (module docstring); damping_nms_rad (7,): the
    recorded controller's D for noise_bias (None: no feedback term); flange: (rotation (3, 3),
    position (3,) [m]) of the flange in link 7's frame (the payload's bounds hold there)."""
    names = spec.names()
    p = len(names)
    delays = tuple(spec.delays)
    targets = _targets(eqs, delays)
    sigma = _weights(eqs, targets, beta_nom)
    weights = 1.0 / sigma**2
    n_mat, b = normal_equations(eqs, weights, targets)
    base = analyse(n_mat, names)
    prior = base.prior + np.eye(p) * 1e-12 * max(float(np.max(np.diag(n_mat))), 1.0)
    noises, d_n, d_b = _noise_corrected(eqs, weights, names, delays, damping_nms_rad)
    beta_d = _solve(n_mat - d_n, b + d_b, prior, beta_nom)
    rss = _rss(eqs, targets, beta_d, weights)
    best = int(np.argmin(rss))
    beta_hat = beta_d[:, best]
    normal = n_mat - d_n + prior
    lower, upper = bounds(names)
    beta, moved = constrain(beta_hat, normal, lower, upper, body_blocks(spec, *flange))
    beta = _snap(beta, lower, upper)
    residuals, score_rows = [], []
    for eq, y in zip(eqs, targets):
        e = np.where(eq.rows, y[:, :, best] - eq.predict(beta_hat), np.nan)
        residuals.append(e / sigma[None, :])
        score_rows.append(scores(eq, weights, np.nan_to_num(e)))
    rows = int(sum(eq.rows.sum() for eq in eqs))
    stacked = np.vstack(residuals)
    lag = bartlett_bandwidth(stacked, max(1, min(len(r) for r in residuals) // 10))
    cov_hac = hac_covariance(normal, score_rows, lag)
    syst = rest_systematic(eqs, weights, [y[:, :, best] for y in targets], prior, beta_nom, beta_hat, normal, lag,
                           lambda used: correction(eqs, used, weights, noises[best], names))
    s2 = float(np.nansum(stacked**2)) / max(rows - base.rank, 1)
    uncorrected = _solve(n_mat, b[:, best:best + 1], prior, beta_nom)[:, 0]
    notes = SolveNotes(noise_bias=noises[best].to_dict() | {"shift": dict(zip(names, (beta_hat - uncorrected).tolist()))})
    return Solution(names=names, beta=beta, beta_hat=beta_hat, cov=cov_hac + syst.cov,
                    cov_iid=s2 * np.linalg.pinv(normal), delay=int(delays[best]), sigma_nm=sigma,
                    delay_scan={int(d): float(r) for d, r in zip(delays, rss)}, bandwidth=lag, base=base,
                    constrained=moved, rows=rows, cov_hac=cov_hac, systematic=syst, notes=notes)


REST_RULE_PASSES = 4
REST_RULE_SETTLED = 0.02  # the alternation stops once no breakaway level moves more than this share
CREEP_SHARE = 0.5  # of the creep law's armature 1/R: a smaller excess is no creep signature
CREEP_RATIO = 3.0  # the excess viscous / armature within this factor of the constraint's b


def _joint_values(beta: np.ndarray, names: list[str], group: str, fallback: np.ndarray) -> np.ndarray:
    """(7,) β's `group`_j1..j7 where it has them, else `fallback`'s."""
    out = np.array(fallback, dtype=float)
    for j in range(7):
        if f"{group}_j{j + 1}" in names:
            out[j] = beta[names.index(f"{group}_j{j + 1}")]
    return out


def _level_determined(sol: Solution, eqs: list[SegmentEquations]) -> np.ndarray:
    """(7,) bool: joint j kept a row and its breakaway level lies on no unidentifiable direction
    (else the solve held it at the prior, which says nothing about which rows slide)."""
    kept = np.zeros(7, dtype=bool)
    for eq in eqs:
        kept |= eq.rows.any(axis=0)
    held = {n for d in sol.base.unidentifiable for n in d["components"]}
    return kept & np.array([f"mu_static_j{j + 1}" not in held for j in range(7)])


def creeping(beta_hat: np.ndarray, beta_nom: np.ndarray, names: list[str], constraint: FrictionConstraint) -> np.ndarray:
    """(7,) bool: joints whose unconstrained estimate β̂ carries the friction-loss constraint's
    creep law −(q̈ + b·q̇)/R as armature and viscous friction (module docstring): excess over
    β_nom of armature ≥ CREEP_SHARE/R and of viscous friction within ×/÷ CREEP_RATIO of b × it."""
    out = np.zeros(7, dtype=bool)
    for j in range(7):
        a, v = f"armature_j{j + 1}", f"mu_viscous_j{j + 1}"
        if a not in names or v not in names:
            continue
        d_arm = beta_hat[names.index(a)] - beta_nom[names.index(a)]
        d_visc = beta_hat[names.index(v)] - beta_nom[names.index(v)]
        r, b = float(constraint.regulariser[j]), float(constraint.damping_per_s[j])
        out[j] = bool(d_arm * r >= CREEP_SHARE and b / CREEP_RATIO <= d_visc / d_arm <= b * CREEP_RATIO)
    return out


def solve_at_level(eqs: list[SegmentEquations], spec: EquationSpec, beta_nom: np.ndarray,
                   damping_nms_rad: np.ndarray | None, constraint_of: Callable[[np.ndarray], FrictionConstraint],
                   start_mu_static: np.ndarray, start_armature: np.ndarray, margin: float = CREEP_MARGIN,
                   flange: tuple = (None, None)) -> tuple[Solution, list[SegmentEquations], RestRule | None]:
    """(Solution, the equations with the rows it used, the rest rule or None under tanh)
    (module docstring). constraint_of: armature (7,) [kg·m²] -> the twin's FrictionConstraint;
    start_mu_static, start_armature (7,): the nominal model's, for the first rule; flange as in `solve`."""
    if spec.law != "stribeck" or spec.signal == "measured":  # link side: standstill rows are data (equations.py)
        eqs = [with_rest_rule(e, None) for e in eqs]
        return solve(eqs, spec, beta_nom, damping_nms_rad, flange), eqs, None
    names = spec.names()
    mu, armature = np.asarray(start_mu_static, float), np.asarray(start_armature, float)
    top = _joint_values(bounds(names)[1], names, "mu_static", mu)
    stuck = np.zeros(7, dtype=bool)
    nominal = constraint_of(armature)  # the creep law's R and b at the nominal armature: the fitted one may hold the creep
    for passes in range(1, REST_RULE_PASSES + 2):
        constraint = constraint_of(armature)
        rule = RestRule.make(constraint, np.where(stuck, top, mu), margin)
        eqs = [with_rest_rule(e, rule) for e in eqs]
        sol = solve(eqs, spec, beta_nom, damping_nms_rad, flange)
        new_mu = np.where(_level_determined(sol, eqs), _joint_values(sol.beta, names, "mu_static", mu), mu)
        armature = np.maximum(_joint_values(sol.beta, names, "armature", armature), 0.0)
        change = float(np.max(np.abs(new_mu - mu) / np.maximum(np.abs(mu), 1e-3)))
        mu = new_mu
        found = creeping(sol.beta_hat, beta_nom, names, nominal) & ~stuck
        stuck |= found
        if (change <= REST_RULE_SETTLED and not found.any()) or passes > REST_RULE_PASSES:
            break
    sol.notes.rest_rule_passes, sol.notes.rest_rule_settled = passes, change <= REST_RULE_SETTLED
    sol.notes.rest_rule_last_change, sol.notes.never_broke_away = change, [int(j) + 1 for j in np.nonzero(stuck)[0]]
    return sol, eqs, rule


__all__ = ["CREEP_RATIO", "CREEP_SHARE", "REST_RULE_PASSES", "REST_RULE_SETTLED", "Solution", "SolveNotes", "creeping", "body_blocks", "bounds", "solve", "solve_at_level"]
