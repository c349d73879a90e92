"""The intervals checked against the loss itself, and widened to the profile where the
linearisation fails.

The fit's 95 % intervals are linear: the loss is taken as quadratic around the optimum with the
curvature of its Jacobian. Friction that sticks and slips breaks that on small motions. Measured
on the demo's run shape (bench/RESULTS.md, "Coverage when the controller acts on noisy
measurements"): J7's static friction sat on a wall (lower, the joint slips and the loss rises
steeply; higher, it barely rises), and along a valley (static friction up, viscous friction down,
the dynamic ratio up) the loss, with the joint's other parameters re-fitted, stayed within 1e-7
of the optimum's from 0.45 to 1.7 N·m, while the linear interval said ±0.009. No covariance at the
point sees that; the loss does.

Per free parameter i with a finite standard error s_i (range-scaled coordinates z of the fit's
Jacobian J = ∂r/∂z, B = JᵀJ, the loss Σ r²):

- the edge δ_i = t·s_i, and the loss rise the linear model gives there along the parameter's
  profile direction d_i = B⁻¹eᵢ / (B⁻¹)ᵢᵢ (the others at their linear optimum):
  level_i = δ_i² / (B⁻¹)ᵢᵢ;
- the check, four replays θ̂ ± mδ_i·d_i, m = 2 and 4 (`CHECK_EDGES`; on the demo's run shape
  J7's static friction rose by 0.2-0.4 of the linear model's rise m²·level_i at two
  half-widths and 0.02-0.09 at four in some replicates, the other way round in others): a
  side whose loss rises by less than m²·level_i / `RISE_FACTOR` at either probe fails (the
  interval is at least √RISE_FACTOR times too narrow there), or falls (the fit's
  point is not the optimum along it);
- on a failing side, and on both sides of the other parameters of a joint with a failing side
  (that joint's loss is not quadratic), the profile: the parameter at δ_i·2^m (m = 1 … `GRID`, up to its bound),
  the others on the linear direction and the free parameters of its own joint re-fitted
  (`REFIT_ITERATIONS` projected Levenberg–Marquardt steps); the side's extent is where the
  profile's rise reaches level_i (interpolated), or the last point (the bound, or 2^GRID·δ_i);
- the interval's half-width becomes the larger side's extent (it stays symmetric, wider than
  needed on the other side); the covariance's row and column i are scaled by extent / δ_i.

Cost: 4k + 1 replays, plus at most GRID·REFIT_ITERATIONS·(p + 2) per failing side (p the
joint's other free parameters). Deterministic: no random draws. What it cannot see: a valley
through parameters of several joints (only the linear direction moves those), and a rise that
comes back down beyond the first grid point that reaches the level.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...sim.arm_model.params import LAYOUT

RISE_FACTOR = 3.0  # a side fails when its loss rises by less than the linear rise / RISE_FACTOR
CHECK_EDGES = (2.0, 4.0)  # the check's probes, in interval half-widths from the optimum
GRID = 10  # profile points per failing side: 2, 4, … 1024 times the edge (or the bound)
REFIT_ITERATIONS = 3  # LM steps re-fitting the joint's other parameters at a profile point
FD_STEP = 1e-3  # forward-difference step of those re-fits, in range-scaled units
WITHOUT_CHECK = "hac_before_profile_check"  # the alternative's key: the default covariance before the widening
BATCH_ROWS = 8  # replays per pool call (a row's residuals are M floats: keep the batch small)


@dataclass(frozen=True)
class ProfiledSide:
    """One side of one parameter's interval that was profiled (it failed the check, or another
    parameter of its joint did): `index` in the free parameters, `side` −1 (low) or +1 (high),
    `rise_ratio` the lower of its probes' loss rise over the linear model's (below
    1 / RISE_FACTOR: it failed), `extent` the profile's extent [range-scaled], `edge` δ_i [range-scaled],
    `min_rise` the lowest profile rise met (negative: the profile found a lower loss than the
    fit's optimum)."""

    index: int
    side: int
    rise_ratio: float
    extent: float
    edge: float
    min_rise: float


@dataclass(frozen=True)
class ProfileCheck:
    """The check's result: `scale` (k,) each interval's widening factor (1: passed),
    `profiled` the sides profiled, `checked` (k,) bool which parameters were checked,
    `replays` how many replays it took, `seconds` its wall time."""

    scale: np.ndarray
    profiled: tuple[ProfiledSide, ...]
    checked: np.ndarray
    replays: int
    seconds: float

    def widen(self, estimate):
        """`estimate` (fit/core/covariance.py CovarianceEstimate, range-scaled) with row and
        column i of its covariance scaled by `scale[i]`."""
        from dataclasses import replace

        return replace(estimate, cov=estimate.cov * np.outer(self.scale, self.scale))

    def to_json(self, names: list[str], ranges: np.ndarray) -> dict:
        """In the parameters' units (`ranges` (k,) the free parameters' bound ranges); no wall
        time (stored JSON is the same bytes for the same inputs)."""
        r = np.asarray(ranges, dtype=np.float64)
        return {"checked": int(np.sum(self.checked)), "replays": int(self.replays), "rise_factor": RISE_FACTOR,
                "widened": {names[i]: float(self.scale[i]) for i in np.flatnonzero(self.scale > 1.0)},
                "profiled": [{"name": names[f.index], "side": "high" if f.side > 0 else "low",
                              "rise_ratio": f.rise_ratio, "edge": f.edge * r[f.index],
                              "extent": f.extent * r[f.index], "min_rise": f.min_rise} for f in self.profiled]}


def joint_groups(names: list[str]) -> list[list[int]]:
    """Per free parameter, the indices of the other free parameters of its joint
    (`LAYOUT.joint_of`); none for a parameter of no joint."""
    joint = [LAYOUT.joint_of(n) for n in names]
    return [[j for j, other in enumerate(joint) if other is not None and other == mine and j != i]
            for i, mine in enumerate(joint)]


class _Losses:
    """Σ r² of full parameter rows through the pool, BATCH_ROWS at a time; counts replays."""

    def __init__(self, pool) -> None:
        self.pool, self.replays = pool, 0

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        self.replays += len(rows)
        out = [np.sum(self.pool.residuals(rows[s:s + BATCH_ROWS]) ** 2, axis=1)
               for s in range(0, len(rows), BATCH_ROWS)]
        return np.concatenate(out)

    def residuals(self, rows: np.ndarray) -> np.ndarray:
        self.replays += len(rows)
        return np.concatenate([self.pool.residuals(rows[s:s + BATCH_ROWS]) for s in range(0, len(rows), BATCH_ROWS)])


def check_intervals(pool, params: np.ndarray, free: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    names: list[str], r_factor: np.ndarray, cov: np.ndarray, t95: float) -> ProfileCheck:
    """The check and, on failing sides, the profile (module docstring). `params` (n,) the
    optimum, `free` (k,) the indices of its free continuous parameters, `lower`, `upper` (k,)
    their bounds, `names` (k,), `r_factor` (k, k) the R of J = ∂r/∂z (B = RᵀR), `cov` (k, k)
    the default covariance in z, `t95` its quantile; `pool` replays rows (`residuals`)."""
    t0 = time.perf_counter()
    k = len(free)
    span = np.where(upper > lower, upper - lower, 1.0)
    z0 = (params[free] - lower) / span
    binv = np.linalg.pinv(r_factor.T @ r_factor)
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    checked = np.isfinite(sd) & (sd > 0) & (np.diag(binv) > 0)
    binv_ii = np.where(checked, np.diag(binv), 1.0)  # (B⁻¹)ᵢᵢ where it divides
    losses = _Losses(pool)

    def rows_of(zs: np.ndarray) -> np.ndarray:
        out = np.repeat(params[None], len(zs), axis=0)
        out[:, free] = lower + np.clip(zs, 0.0, 1.0) * span
        return out

    edge = t95 * sd
    direction = binv / binv_ii[None, :]  # column i: d_i
    level = np.where(checked, edge ** 2 / binv_ii, np.inf)
    sides = [(int(i), s) for i in np.flatnonzero(checked) for s in (-1, 1)]
    probes = [z0] + [z0 + s * m * edge[i] * direction[:, i] for i, s in sides for m in CHECK_EDGES]
    found = losses(rows_of(np.array(probes)))
    base, rises = found[0], (found[1:] - found[0]).reshape(len(sides), len(CHECK_EDGES))
    linear = np.array(CHECK_EDGES) ** 2  # the linear model's rise at each probe, in levels
    ratio = {side: float(np.min(r / (linear * level[side[0]]))) for side, r in zip(sides, rises)}
    scale, profiled = np.ones(k), []
    groups = joint_groups(names)
    for i, s in _sides_to_profile(ratio, groups):
        extent, low_rise = _profile_extent(losses, rows_of, z0, base, i, s, edge[i], direction[:, i],
                                           groups[i], level[i])
        profiled.append(ProfiledSide(i, s, ratio[(i, s)], float(extent), float(edge[i]), float(low_rise)))
        scale[i] = max(scale[i], extent / edge[i])
    return ProfileCheck(scale, tuple(profiled), checked, losses.replays, time.perf_counter() - t0)


def _sides_to_profile(ratio: dict[tuple[int, int], float], groups: list[list[int]]) -> list[tuple[int, int]]:
    """The (parameter, side) pairs to profile: every side that failed the check, and both sides
    of every checked parameter of a joint with a failing side (that joint's loss is not the
    quadratic its intervals assume: along the linear direction a valley through the joint
    can still rise, measured for J7's armature on the demo's run shape)."""
    failing = {i for (i, s), r in ratio.items() if r < 1.0 / RISE_FACTOR}
    joints = {i for f in failing for i in [f, *groups[f]]}
    return [(i, s) for (i, s) in sorted(ratio) if i in joints]


def _profile_extent(losses: _Losses, rows_of, z0: np.ndarray, base: float, i: int, side: int, edge: float,
                    direction: np.ndarray, group: list[int], level: float) -> tuple[float, float]:
    """(extent, lowest rise) of one failing side: grid points δ·2^m along `direction`, the
    parameter's joint (`group`) re-fitted at each (from the linear direction's point or the
    previous point's re-fit, the lower), until the rise reaches `level`."""
    last_step, last_rise, low, previous = 0.0, 0.0, np.inf, None
    for m in range(1, GRID + 1):
        step = float(2 ** m)
        target = z0[i] + side * step * edge * direction[i]
        if not 0.0 <= target <= 1.0:  # the bound: its distance is the furthest the interval goes
            step = ((1.0 if side > 0 else 0.0) - z0[i]) / (side * edge * direction[i])
            if step <= last_step:
                break
        z = np.clip(z0 + side * step * edge * direction, 0.0, 1.0)
        starts = [z]
        if previous is not None:
            warm = z.copy()
            warm[group] = previous[group]
            starts.append(warm)
        value, previous = _refit(losses, rows_of, np.array(starts), group)
        rise = value - base
        low = min(low, rise)
        if rise >= level:
            frac = (level - last_rise) / max(rise - last_rise, 1e-300)
            return (last_step + frac * (step - last_step)) * edge, low
        last_step, last_rise = step, rise
        if not 0.0 < z[i] < 1.0:
            break
    return last_step * edge, low


def _refit(losses: _Losses, rows_of, starts: np.ndarray, group: list[int]) -> tuple[float, np.ndarray]:
    """(the lowest Σ r², its z) found by REFIT_ITERATIONS projected LM steps over `group`'s
    coordinates from the lower of `starts` (S, k) (the others held), forward differences of
    FD_STEP."""
    values = losses(rows_of(starts))
    best_z, best = starts[int(np.argmin(values))].copy(), float(values.min())
    if not group:
        return best, best_z
    lam = 1e-3
    for _ in range(REFIT_ITERATIONS):
        pts = np.repeat(best_z[None], len(group) + 1, axis=0)
        steps = np.where(best_z[group] + FD_STEP <= 1.0, FD_STEP, -FD_STEP)
        for c, (j, h) in enumerate(zip(group, steps)):
            pts[c + 1, j] += h
        res = losses.residuals(rows_of(pts))
        jac = (res[1:] - res[0]).T / steps  # (M, p)
        jtj, grad = jac.T @ jac, jac.T @ res[0]
        trial = best_z.copy()
        trial[group] = np.clip(best_z[group] - np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), grad),
                               0.0, 1.0)
        value = float(losses(rows_of(trial[None]))[0])
        if value < best:
            best_z, best, lam = trial, value, lam / 10
        else:
            lam *= 10
    return best, best_z


__all__ = ["CHECK_EDGES", "GRID", "RISE_FACTOR", "WITHOUT_CHECK", "ProfileCheck", "ProfiledSide", "check_intervals",
           "joint_groups"]
