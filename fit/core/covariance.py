"""Covariance of a least-squares estimate whose residuals are correlated in time: the
sandwich with a Bartlett (Newey–West) long-run covariance of the scores (HAC), beside the
independent-residual Gauss–Newton covariance and a moving-block bootstrap of the scores.

For θ̂ = argmin Σ r(θ)² with Jacobian J = ∂r/∂θ (M, k) at θ̂, the linearised estimate is
θ̂ − θ ≈ −(JᵀJ)⁻¹ Σ_t g_t, with g_t (k,) = Σ_{rows m of tick t} J_m r_m the score of one
time tick (all joints, position and velocity rows of that tick together). So

    Cov(θ̂) = B⁻¹ Ω B⁻¹,    B = JᵀJ,    Ω = Var(Σ_t g_t)

and only Ω depends on how the residuals are correlated:

- ``iid`` (Gauss–Newton): Ω = σ² B, σ² = Σ r² / (M − k): every residual independent with one
  variance. At 1 kHz this is wrong: the controller, the target filter and the arm's own
  response make residuals of neighbouring ticks move together.
- ``hac`` (the default): Ω = Σ_blocks Σ_{|ℓ|<L} (1 − |ℓ|/L) Σ_t g_t g_{t+ℓ}ᵀ, the Bartlett
  kernel of Newey & West (1987), summed per block (one block = one recorded interval; ticks
  of different intervals are independent). It is computed exactly as (1/L) Σ_w S_w S_wᵀ over
  every window w of L ticks (zero-padded at the block's ends), S_w the window's score sum:
  O(T·k²), no lag loop. The bandwidth L comes from the scores' own autocorrelation: Andrews'
  (1991) AR(1) plug-in for the Bartlett kernel, L = 1.1447 (α T)^{1/3},
  α = Σ_a 4ρ_a²σ_a⁴ / ((1−ρ_a)⁶(1+ρ_a)²) / Σ_a σ_a⁴ / (1−ρ_a)⁴ over the k score components
  (ρ_a the lag-1 autocorrelation, σ_a² the innovation variance of an AR(1) fitted to each),
  times ``BANDWIDTH_FACTOR``, at most half the shortest block.
- ``block_bootstrap``: the score series resampled in moving blocks of L ticks (Künsch 1989)
  within each interval, Ω = the covariance of the resampled sums over ``draws`` replicates
  (seeded). A linearised bootstrap: no refit, so it measures the same thing as ``hac`` by a
  different route (used as the comparison in bench/interval_coverage.py).

Intervals use the Student t quantile with ``dof = effective_ticks − k``, where effective
ticks = Σ_blocks T_b / L (about one independent observation per bandwidth), not M − k.

Everything works in whatever coordinates J is given in (the fits use the bound-range-scaled
parameters); `to_units` converts a covariance to the parameters' own units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import FitError, SettingError

HAC = "hac_bartlett_andrews"
IID = "gauss_newton_iid"
BLOCK_BOOTSTRAP = "moving_block_bootstrap"
METHODS = (HAC, IID, BLOCK_BOOTSTRAP)
BANDWIDTH_FACTOR = 1.0  # multiplies Andrews' plug-in bandwidth
RHO_MAX = 0.999  # AR(1) coefficient cap in the plug-in (a unit root gives no finite bandwidth)
BOOTSTRAP_DRAWS = 400


@dataclass(frozen=True)
class Segment:
    """A run of residual rows: ``ticks`` consecutive ticks of block ``block``, each tick
    ``rows_per_tick`` rows (row-major: tick-major). FitProblem.residuals' layout is, per
    interval b, Segment(b, S_b, 7) for the positions then Segment(b, S_b, 7) for the velocities."""

    block: int
    ticks: int
    rows_per_tick: int


@dataclass(frozen=True)
class CovarianceEstimate:
    """A (k, k) covariance in J's coordinates and how it was made."""

    method: str
    cov: np.ndarray  # (k, k)
    bandwidth_ticks: int  # L (1 for iid)
    dof: int  # for the t quantile of the intervals
    ticks: int  # Σ_b T_b
    sigma2: float  # Σ r² / (M − k)

    @property
    def t95(self) -> float:
        """Two-sided 95 % t quantile at `dof`."""
        from scipy import stats  # ~1 s to import; only when intervals are computed

        return float(stats.t.ppf(0.975, max(self.dof, 1)))

    @property
    def stderr(self) -> np.ndarray:
        """(k,) √diag(cov)."""
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    def describe(self) -> dict:
        """JSON-ready: method, bandwidth [ticks], dof, ticks."""
        return {"method": self.method, "bandwidth_ticks": int(self.bandwidth_ticks), "dof": int(self.dof),
                "ticks": int(self.ticks)}


def replay_segments(ticks_per_interval: Sequence[int], joints: int = 7) -> list[Segment]:
    """The Segments of `FitProblem.residuals` (positions then velocities of each interval)."""
    out = []
    for b, s in enumerate(ticks_per_interval):
        out += [Segment(b, int(s), joints), Segment(b, int(s), joints)]
    return out


def tick_scores(jac: np.ndarray, resid: np.ndarray, segments: Sequence[Segment]) -> list[np.ndarray]:
    """Per block, the scores g (T_b, k): Σ of J_m·r_m over the rows m of each tick.
    jac (M, k), resid (M,); the segments must cover the M rows exactly."""
    jac, resid = np.asarray(jac, dtype=np.float64), np.asarray(resid, dtype=np.float64)
    m, k = jac.shape
    total = sum(s.ticks * s.rows_per_tick for s in segments)
    if total != m or resid.shape != (m,):
        raise FitError(f"covariance: segments cover {total} rows, jac has {m} and resid {resid.shape}")
    blocks: dict[int, np.ndarray] = {}
    row = 0
    for s in segments:
        n = s.ticks * s.rows_per_tick
        g = (jac[row:row + n] * resid[row:row + n, None]).reshape(s.ticks, s.rows_per_tick, k).sum(1)
        if s.block in blocks:
            if len(blocks[s.block]) != s.ticks:
                raise FitError(f"covariance: block {s.block} has segments of {len(blocks[s.block])} and {s.ticks} ticks")
            blocks[s.block] = blocks[s.block] + g
        else:
            blocks[s.block] = g
        row += n
    return [blocks[b] for b in sorted(blocks)]


def andrews_bandwidth(scores: Sequence[np.ndarray], factor: float = BANDWIDTH_FACTOR) -> int:
    """Bartlett bandwidth L [ticks] ≥ 1 from the AR(1) plug-in over the score components,
    pooled over blocks (see the module docstring); at most half the shortest block."""
    num = den = 0.0
    for a in range(scores[0].shape[1]):
        x0 = np.concatenate([g[:-1, a] - g[:, a].mean() for g in scores])
        x1 = np.concatenate([g[1:, a] - g[:, a].mean() for g in scores])
        xx = float(x0 @ x0)
        if xx <= 0:
            continue
        rho = float(np.clip((x0 @ x1) / xx, -RHO_MAX, RHO_MAX))
        s4 = (float(np.mean((x1 - rho * x0) ** 2))) ** 2
        num += 4 * rho ** 2 * s4 / ((1 - rho) ** 6 * (1 + rho) ** 2)
        den += s4 / (1 - rho) ** 4
    ticks = float(np.mean([len(g) for g in scores]))
    if den <= 0:
        return 1
    bw = factor * 1.1447 * (num / den * ticks) ** (1.0 / 3.0)
    return int(max(1, min(round(bw), min(len(g) for g in scores) // 2)))


def bartlett_long_run(scores: Sequence[np.ndarray], bandwidth: int) -> np.ndarray:
    """Ω (k, k) = Σ_blocks Σ_{|ℓ|<L} (1 − |ℓ|/L) Σ_t g_t g_{t+ℓ}ᵀ, via window sums."""
    k = scores[0].shape[1]
    omega = np.zeros((k, k))
    L = int(bandwidth)
    for g in scores:
        c = np.vstack([np.zeros((1, k)), np.cumsum(g, axis=0)])
        t = len(g)
        hi = np.minimum(np.arange(t + L - 1) + 1, t)  # windows [i − L + 1, i], clipped to the block
        lo = np.maximum(np.arange(t + L - 1) + 1 - L, 0)
        s = c[hi] - c[lo]
        omega += s.T @ s / L
    return omega


def block_bootstrap_long_run(scores: Sequence[np.ndarray], bandwidth: int, draws: int = BOOTSTRAP_DRAWS,
                             seed: int = 0) -> np.ndarray:
    """Ω (k, k): covariance of Σ_t g*_t over `draws` moving-block resamples (blocks of L ticks,
    each interval resampled on its own, centred scores)."""
    rng = np.random.default_rng(seed)
    k = scores[0].shape[1]
    total = np.zeros((draws, k))
    L = int(bandwidth)
    for g in scores:
        g = g - g.mean(0)
        t = len(g)
        c = np.vstack([np.zeros((1, k)), np.cumsum(g, axis=0)])
        sums = c[L:] - c[:-L] if t >= L else c[-1:] - c[:1]  # (t − L + 1, k) every block's sum
        n_blocks = max(t // L, 1)
        pick = rng.integers(0, len(sums), size=(draws, n_blocks))
        counts = np.bincount((pick + len(sums) * np.arange(draws)[:, None]).ravel(),
                             minlength=draws * len(sums)).reshape(draws, len(sums))  # (draws, starts)
        total += (counts @ sums) * np.sqrt(t / (n_blocks * min(L, t)))  # scaled to the block's length
    return total.T @ total / draws


def sandwich(bread: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """B⁻¹ Ω B⁻¹ (pseudo-inverse), bread B = JᵀJ (k, k)."""
    binv = np.linalg.pinv(bread)
    cov = binv @ omega @ binv
    return 0.5 * (cov + cov.T)


def estimate(jac: np.ndarray, resid: np.ndarray, segments: Sequence[Segment], method: str = HAC,
             bandwidth: int | None = None, seed: int = 0) -> CovarianceEstimate:
    """The covariance (k, k) of θ̂ in J's coordinates by `method` (one of METHODS); `bandwidth`
    [ticks]: None = Andrews' plug-in. jac (M, k), resid (M,) at θ̂."""
    jac = np.asarray(jac, dtype=np.float64)
    m, k = jac.shape
    bread = jac.T @ jac
    sigma2 = float(np.asarray(resid) @ np.asarray(resid)) / max(m - k, 1)
    scores = tick_scores(jac, resid, segments)
    return from_scores(bread, scores, sigma2, m, method, bandwidth, seed)


def from_scores(bread: np.ndarray, scores: Sequence[np.ndarray], sigma2: float, rows: int, method: str = HAC,
                bandwidth: int | None = None, seed: int = 0) -> CovarianceEstimate:
    """`estimate` from B = JᵀJ (k, k), the per-block scores (T_b, k), σ² and the row count M."""
    k = bread.shape[0]
    ticks = int(sum(len(g) for g in scores))
    if method == IID:
        return CovarianceEstimate(IID, sigma2 * np.linalg.pinv(bread), 1, max(rows - k, 1), ticks, sigma2)
    if method not in METHODS:
        raise SettingError("covariance method", repr(method), f"expected one of {', '.join(METHODS)}")
    L = andrews_bandwidth(scores) if bandwidth is None else int(bandwidth)
    omega = bartlett_long_run(scores, L) if method == HAC else block_bootstrap_long_run(scores, L, seed=seed)
    dof = max(int(ticks / L) - k, 1)
    return CovarianceEstimate(method, sandwich(bread, omega), L, dof, ticks, sigma2)


def to_units(cov_scaled: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """A covariance of range-scaled parameters (θ/range) in the parameters' own units: C·rrᵀ."""
    r = np.asarray(ranges, dtype=np.float64)
    return np.asarray(cov_scaled) * np.outer(r, r)


def correlation(cov: np.ndarray) -> np.ndarray:
    """(k, k) correlation matrix; NaN rows/columns where a variance is 0 or not finite."""
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = cov / np.outer(sd, sd)
    ok = (sd > 0) & np.isfinite(sd)
    rho[~ok, :] = np.nan
    rho[:, ~ok] = np.nan
    return np.clip(rho, -1.0, 1.0)


def with_alternatives(bread: np.ndarray, scores: Sequence[np.ndarray], sigma2: float, rows: int,
                      seed: int = 0) -> tuple[CovarianceEstimate, dict[str, CovarianceEstimate]]:
    """The default estimate (HAC, Andrews' bandwidth) and, for comparison, the iid Gauss–Newton
    one, the moving-block bootstrap at the same bandwidth and HAC at twice it (keyed
    ``hac_bartlett_2x``): what a fit stores beside its error bars (a few ms for k = 28)."""
    main = from_scores(bread, scores, sigma2, rows, HAC)
    alternatives = {
        IID: from_scores(bread, scores, sigma2, rows, IID),
        BLOCK_BOOTSTRAP: from_scores(bread, scores, sigma2, rows, BLOCK_BOOTSTRAP, main.bandwidth_ticks, seed),
        "hac_bartlett_2x": from_scores(bread, scores, sigma2, rows, HAC, 2 * main.bandwidth_ticks),
    }
    return main, alternatives



STRONG_RHO = 0.9  # |ρ| at which `fit show` lists a pair


def strong_pairs(stored: dict | None, threshold: float = STRONG_RHO) -> list[tuple[str, str, float]]:
    """(name, name, ρ) of the pairs with |ρ| ≥ threshold in a stored covariance
    (``identifiability_json["covariance"]``: names, matrix), strongest first; [] without one."""
    if not stored or not stored.get("names"):
        return []
    names = stored["names"]
    m = np.array(stored["matrix"], dtype=np.float64)  # a stored null (None) reads as NaN
    rho = correlation(m)
    i, j = np.triu_indices(len(names), 1)
    keep = np.isfinite(rho[i, j]) & (np.abs(rho[i, j]) >= threshold)
    pairs = [(names[a], names[b], float(rho[a, b])) for a, b in zip(i[keep], j[keep])]
    return sorted(pairs, key=lambda p: -abs(p[2]))


def method_line(stored: dict | None) -> str:
    """One line naming how a stored covariance was estimated (older fits: Gauss–Newton, iid)."""
    if stored and stored.get("description"):  # a route that states its own (the torque route)
        return f"covariance: {stored['description']}"
    if not stored or stored.get("method") in (None, IID):
        return "covariance: Gauss–Newton σ²(JᵀJ)⁻¹, residuals treated as independent (optimistic at 1 kHz)"
    line = (f"covariance: sandwich with a Bartlett (Newey–West) long-run covariance of the per-tick scores, "
            f"bandwidth {stored.get('bandwidth_ticks')} ticks from their autocorrelation (Andrews' AR(1) rule), "
            f"t quantile on {stored.get('dof')} effective degrees of freedom")
    iid = (stored.get("alternatives") or {}).get(IID)
    diag = np.sqrt(np.clip(np.diag(np.array(stored["matrix"], dtype=np.float64)), 0, None))  # null → NaN
    if iid:
        ratio = diag / np.array(iid["stderr"], dtype=np.float64)
        if np.any(np.isfinite(ratio)):
            line += f"; {np.nanmedian(ratio):.2g}× the iid Gauss–Newton errors (median)"
    alone = (stored.get("alternatives") or {}).get("hac_without_loop_noise")  # fit/core/loop_noise.WITHOUT
    if alone:
        ratio = diag / np.array(alone["stderr"], dtype=np.float64)
        if np.any(np.isfinite(ratio)):
            line += (f"; plus the spread the controller's noisy measurements cause (noisy replays at the optimum): "
                     f"{np.nanmedian(ratio):.2g}× the sandwich alone (median)")
    before = (stored.get("alternatives") or {}).get("hac_before_profile_check")  # fit/core/profile_check.WITHOUT_CHECK
    if before:
        ratio = diag / np.array(before["stderr"], dtype=np.float64)
        wide = [f"{n} ×{r:.3g}" for n, r in zip(stored.get("names", []), ratio) if np.isfinite(r) and r > 1.0 + 1e-9]
        line += ("; every interval checked against replays of the loss" + (
            f", widened where it is flatter than they assume: {', '.join(wide)}" if wide else ": none widened"))
    return line


__all__ = ["BLOCK_BOOTSTRAP", "CovarianceEstimate", "HAC", "IID", "METHODS", "Segment", "andrews_bandwidth",
           "bartlett_long_run", "block_bootstrap_long_run", "correlation", "estimate", "from_scores",
           "replay_segments", "sandwich", "tick_scores", "to_units", "with_alternatives"]
