"""Error bars for a fit: finite-difference Jacobian at the optimum, covariance, 95 % intervals,
condition number, bound hits, unidentifiable directions and the spread over seeds.

Method (docs/fitting.md, "Identifiability"), for the k free continuous parameters θ:

- J (M, k): ∂r/∂θ of the objective's residuals ``r = residuals(params)`` (Σ r² = loss), by
  central differences with step ``rel_step × (upper − lower)``, one-sided at a bound. All
  2k+1 candidates (centre, +h, −h) go through the population engine in ONE batch.
- Cov: the sandwich (JᵀJ)⁻¹ Ω (JᵀJ)⁻¹ with a Bartlett/Newey–West long-run covariance Ω of
  the per-tick scores, bandwidth from their autocorrelation (fit/core/covariance.py: the 1 kHz
  residuals are correlated in time), when the residuals' tick layout is known (every fit);
  else (a bare Jacobian) the Gauss–Newton σ² (JᵀJ)⁻¹, σ² = Σ r² / (M − k). 95 % intervals
  θ ± t₀.₉₇₅(dof)·√diag(Cov), dof = the effective number of ticks (Σ T_b / bandwidth) − k
  (M − k for Gauss–Newton). The full matrix is stored in the parameters' own units, with the
  iid, block-bootstrap and 2×-bandwidth alternatives' standard errors for comparison.
- Condition number of J with each column scaled by its parameter's bound range.
- ``unidentifiable``: the parameter's own 95 % half-width exceeds half its bound range; or it
  has weight > 0.3 in an eigenvector of the range-scaled covariance whose 95 % half-width
  (t·√λ; for Gauss–Newton t·σ/s of J's singular values) exceeds half the box (listed as a weak direction); or the data barely respond to it:
  the RMS of its range-scaled Jacobian column is under 2 % of the most influential
  parameter's (e.g. the armature of a joint that barely moved). That last rule is a stated
  heuristic, not a test.
- ``seed_spread``: the optima of several seeds differ by more than 10 % of the bound range.
- ``at_bound`` within ``AT_BOUND_FRACTION`` (parameter_status.py, 0.5 %) of the range from a bound, ``near_bound`` within 5 % (free parameters).
- The integer motor delay is never in J (it is discrete); it is reported as ``discrete``.
- ``jacobian`` says which J was used: the central differences above, or (a local-search fit,
  fit/replay/local_search.py) the forward-difference Jacobian of its last full-data Levenberg–Marquardt
  iteration, reused (`analyse_scaled` on its R factor): taken at the point that iteration's step
  started from, with the same step of 1e-3 of each range.

The intervals are local (linearised): they account for residuals correlated in time within
an interval (HAC), not for a model that is wrong (a misfit the parameters cannot absorb
biases the optimum itself); that is why held-out validation and the seed spread are
reported beside them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FitError, RecordError, SettingError
from ...sim.arm_model.params import LAYOUT
from ..core import covariance as covmod
from ..core.parameter_status import UNIDENTIFIED_HALF_WIDTH, bound_side

DISCRETE_NAMES = frozenset(LAYOUT.names[i] for i in LAYOUT.integer_indices)  # never in J

NEAR_BOUND_FRACTION = 0.05
UNIDENTIFIABLE_HALF_WIDTH = UNIDENTIFIED_HALF_WIDTH  # of the bound range (the one rule)
DIRECTION_WEIGHT = 0.3
SEED_SPREAD_FRACTION = 0.10  # of the bound range
INSENSITIVE_FRACTION = 0.02  # of the most important parameter's range-scaled sensitivity
CENTRAL_JACOBIAN = "central differences at the optimum"

ResidualFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class WeakDirection:
    """A direction in range-normalised parameter space the data barely constrain (an
    eigenvector of the range-scaled covariance)."""

    singular_value: float  # 1 / the standard deviation along it (Gauss–Newton: J's singular value / σ)
    half_width_fraction: float  # 95 % half-width along it, as a fraction of the box
    components: dict[str, float]  # parameter -> component (|c| > DIRECTION_WEIGHT)


@dataclass
class IdentifiabilityResult:
    """Per-parameter error bars (arrays over all names, NaN for frozen/discrete ones)."""

    names: tuple[str, ...]
    values: np.ndarray
    free: np.ndarray  # bool, in the Jacobian
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    lower_bound: np.ndarray
    upper_bound: np.ndarray
    condition_number: float
    sigma2: float
    dof: int
    weak_directions: list[WeakDirection] = field(default_factory=list)
    flags: dict[str, list[str]] = field(default_factory=dict)
    seed_values: np.ndarray | None = None  # (S, n) optima of several seeds
    importance: np.ndarray | None = None  # RMS of each range-scaled Jacobian column (NaN if not free)
    jacobian: str = CENTRAL_JACOBIAN  # which Jacobian the error bars come from
    covariance: np.ndarray | None = None  # (k, k) of the free parameters, their own units
    covariance_method: dict = field(default_factory=lambda: {"method": covmod.IID})
    alternatives: dict[str, dict] = field(default_factory=dict)  # method -> {stderr (k,) own units, method, dof, ...}
    weakest: list[WeakDirection] = field(default_factory=list)  # the 3 widest covariance directions
    loop_noise: dict | None = None  # the closed loop's noise bootstrap (fit/core/loop_noise.py LoopNoise.to_json)
    profile_check: dict | None = None  # the intervals' check against the loss (fit/core/profile_check.py ProfileCheck.to_json)

    def flagged(self, flag: str) -> list[str]:
        """Names carrying ``flag``."""
        return [n for n in self.names if flag in self.flags.get(n, [])]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (stored as ``identifiability_json`` in the fit record)."""
        def f(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        spread = self.seed_spread()
        free_names = [n for i, n in enumerate(self.names) if self.free[i]]
        cov = None if self.covariance is None else {
            "names": free_names, **self.covariance_method,
            "matrix": [[f(v) for v in row] for row in self.covariance],
            "alternatives": {m: {**a, "stderr": [f(v) for v in a["stderr"]]} for m, a in self.alternatives.items()}}
        return {
            "method": "fd_jacobian_" + str(self.covariance_method["method"]) + "_v2",
            "covariance_method": self.covariance_method["method"],
            "jacobian": self.jacobian,
            "condition_number": f(self.condition_number),
            "sigma2": f(self.sigma2),
            "dof": int(self.dof),
            "parameters": [
                {"name": n, "value": f(self.values[i]), "free": bool(self.free[i]), "stderr": f(self.stderr[i]),
                 "ci95_low": f(self.ci_low[i]), "ci95_high": f(self.ci_high[i]),
                 "lower_bound": f(self.lower_bound[i]), "upper_bound": f(self.upper_bound[i]),
                 "seed_min": f(spread["min"][i]) if spread else None,
                 "seed_max": f(spread["max"][i]) if spread else None,
                 "flags": list(self.flags.get(n, []))}
                for i, n in enumerate(self.names)
            ],
            "weak_directions": [
                {"singular_value": f(d.singular_value), "half_width_fraction": f(d.half_width_fraction),
                 "components": d.components} for d in self.weak_directions
            ],
            "weakest_directions": [
                {"half_width_fraction": f(d.half_width_fraction), "components": d.components} for d in self.weakest
            ],
            "covariance": cov,
            "seeds": 0 if self.seed_values is None else int(len(self.seed_values)),
            **({} if self.loop_noise is None else {"loop_noise": self.loop_noise}),
            **({} if self.profile_check is None else {"profile_check": self.profile_check}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)

    def seed_spread(self) -> dict[str, np.ndarray] | None:
        """min, max, std per parameter over the seeds' optima (None without seeds)."""
        if self.seed_values is None or len(self.seed_values) < 2:
            return None
        s = self.seed_values
        return {"min": s.min(0), "max": s.max(0), "std": s.std(0, ddof=1)}


def fd_jacobian(residuals: ResidualFn, x: np.ndarray, free_idx: Sequence[int], lower: np.ndarray,
                upper: np.ndarray, rel_step: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """(J (M, k), r0 (M,)) at ``x`` (n,) for the ``free_idx`` columns; one batch of 2k+1 rows."""
    x = np.asarray(x, dtype=np.float64)
    free_idx = np.asarray(free_idx, dtype=np.int64)
    k = len(free_idx)
    h = rel_step * (upper[free_idx] - lower[free_idx])
    if np.any(h <= 0):
        raise SettingError("bounds", None, "every free parameter needs an upper bound above its lower bound")
    plus = np.tile(x, (k, 1))
    minus = np.tile(x, (k, 1))
    up_ok = x[free_idx] + h <= upper[free_idx]
    down_ok = x[free_idx] - h >= lower[free_idx]
    rows = np.arange(k)
    plus[rows, free_idx] = np.where(up_ok, x[free_idx] + h, x[free_idx])
    minus[rows, free_idx] = np.where(down_ok, x[free_idx] - h, x[free_idx])
    batch = np.vstack([x[None, :], plus, minus])
    r = np.asarray(residuals(batch), dtype=np.float64)
    if r.shape[0] != 2 * k + 1:
        raise FitError(f"residuals returned {r.shape[0]} rows for a population of {2 * k + 1}")
    denom = plus[rows, free_idx] - minus[rows, free_idx]
    jac = (r[1:k + 1] - r[k + 1:]).T / denom[None, :]
    return jac, r[0]


def analyse(names: Sequence[str], x: np.ndarray, jac: np.ndarray, r0: np.ndarray, free_idx: Sequence[int],
            lower: np.ndarray, upper: np.ndarray, seed_values: np.ndarray | None = None,
            segments: Sequence[covmod.Segment] | None = None) -> IdentifiabilityResult:
    """Covariance, intervals, condition number and flags from a Jacobian (M, k) and the
    residuals r0 (M,) at the optimum; `segments` (the residuals' tick layout,
    `covariance.replay_segments`) makes the covariance HAC, else Gauss–Newton."""
    free_idx = np.asarray(free_idx, dtype=np.int64)
    jn = jac * (upper - lower)[free_idx][None, :]
    main = alternatives = None
    if segments is not None:
        main, alternatives = covmod.with_alternatives(jn.T @ jn, covmod.tick_scores(jn, r0, segments),
                                                      float(r0 @ r0) / max(jac.shape[0] - jac.shape[1], 1),
                                                      jac.shape[0])
    return analyse_scaled(names, x, jn, float(r0 @ r0), jac.shape[0], free_idx, lower, upper, seed_values,
                          covariance=main, alternatives=alternatives)


def analyse_scaled(names: Sequence[str], x: np.ndarray, jn: np.ndarray, rss: float, rows: int,
                   free_idx: Sequence[int], lower: np.ndarray, upper: np.ndarray,
                   seed_values: np.ndarray | None = None, jacobian: str = CENTRAL_JACOBIAN,
                   covariance: covmod.CovarianceEstimate | None = None,
                   alternatives: dict[str, covmod.CovarianceEstimate] | None = None) -> IdentifiabilityResult:
    """`analyse` from the range-scaled Jacobian `jn` (M, k) — or any matrix with the same
    jnᵀjn, e.g. its R factor (k, k) —, the residual sum of squares `rss` and the residual count
    `rows` (M); `jacobian` describes where J comes from. `covariance`: the range-scaled
    estimate to use (fit/core/covariance.py), default Gauss–Newton from jn; `alternatives`: other
    estimates whose standard errors are stored beside it."""
    names = tuple(names)
    n, free_idx = len(names), np.asarray(free_idx, dtype=np.int64)
    k = jn.shape[1]
    sigma2 = float(rss) / max(int(rows) - k, 1)
    if covariance is None:
        covariance = covmod.from_scores(jn.T @ jn, [np.zeros((1, k))], sigma2, int(rows), covmod.IID)
    dof = covariance.dof
    rng = (upper - lower)[free_idx]
    u, s, vt = np.linalg.svd(jn, full_matrices=False)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
    cov_n = covariance.cov
    t = covariance.t95
    se = np.full(n, np.nan)
    se[free_idx] = covariance.stderr * rng
    # a direction with zero singular value has unbounded uncertainty: pinv hides it, so restore it
    null = s <= s[0] * 1e-12 if s[0] > 0 else np.ones_like(s, dtype=bool)
    for v in vt[null]:
        se[free_idx[np.abs(v) > DIRECTION_WEIGHT]] = np.inf
    values = np.asarray(x, dtype=np.float64)
    res = IdentifiabilityResult(names, values.copy(), np.isin(np.arange(n), free_idx), se,
                                values - t * se, values + t * se, np.asarray(lower, float), np.asarray(upper, float),
                                cond, sigma2, int(dof), seed_values=seed_values, jacobian=jacobian,
                                covariance=covmod.to_units(cov_n, rng), covariance_method=covariance.describe(),
                                alternatives={m: {**e.describe(), "stderr": e.stderr * rng}
                                              for m, e in (alternatives or {}).items()})
    res.importance = np.full(n, np.nan)
    res.importance[free_idx] = importance = np.sqrt(np.sum(jn**2, axis=0) / rows)
    lam, vec = np.linalg.eigh(cov_n)  # ascending; the widest directions last
    _flag(res, np.sqrt(np.clip(lam[::-1], 0, None)), vec[:, ::-1].T, free_idx, t, importance)
    return res


def _flag(res: IdentifiabilityResult, sd: np.ndarray, vt: np.ndarray, free_idx: np.ndarray, t: float,
          importance: np.ndarray) -> None:
    """Flags; `sd` (k,) the standard deviations along the covariance's eigenvectors `vt` (k, k)
    (range-scaled, widest first)."""
    names, flags = res.names, res.flags
    rng_all = res.upper_bound - res.lower_bound

    def add(i: int, flag: str) -> None:
        lst = flags.setdefault(names[i], [])
        if flag not in lst:
            lst.append(flag)

    for i, name in enumerate(names):
        if name in DISCRETE_NAMES:
            add(i, "discrete")
    for i in free_idx:
        frac = min(res.values[i] - res.lower_bound[i], res.upper_bound[i] - res.values[i]) / rng_all[i] \
            if rng_all[i] > 0 else 0.0
        if bound_side(float(res.values[i]), float(res.lower_bound[i]), float(res.upper_bound[i])) is not None:
            add(i, "at_bound")
        elif frac <= NEAR_BOUND_FRACTION:
            add(i, "near_bound")
    for rank, (sdv, v) in enumerate(zip(sd, vt)):
        half = t * sdv
        big = np.flatnonzero(np.abs(v) > DIRECTION_WEIGHT)
        direction = WeakDirection(float(1.0 / sdv) if sdv > 0 else float("inf"), float(half),
                                  {names[free_idx[j]]: float(v[j]) for j in big})
        if rank < 3:
            res.weakest.append(direction)
        if half <= UNIDENTIFIABLE_HALF_WIDTH:
            continue
        res.weak_directions.append(direction)
        for j in big:
            add(int(free_idx[j]), "unidentifiable")
    for j, i in enumerate(free_idx):
        if importance[j] < INSENSITIVE_FRACTION * importance.max():
            add(int(i), "unidentifiable")
        if rng_all[i] > 0 and t * res.stderr[i] > UNIDENTIFIABLE_HALF_WIDTH * rng_all[i]:
            add(int(i), "unidentifiable")
    spread = res.seed_spread()
    if spread is not None:
        for i in range(len(names)):
            if rng_all[i] > 0 and spread["max"][i] - spread["min"][i] > SEED_SPREAD_FRACTION * rng_all[i]:
                add(i, "seed_spread")


def identifiability_summary(problem: Any, best: np.ndarray, *, free: Sequence[str] | None = None,
                            bounds: np.ndarray | None = None, seed_optima: np.ndarray | None = None,
                            rel_step: float = 1e-3, names: Sequence[str] | None = None,
                            segments: Sequence[covmod.Segment] | None = None) -> IdentifiabilityResult:
    """Error bars at ``best`` (n,) for a ``FitProblem`` (anything with ``residuals(P×n)``).

    free: names of the fitted parameters (default: all but the discrete delay); bounds (n, 2):
    default ``LAYOUT.bounds``; seed_optima (S, n): the best vectors of several seeds, for the
    spread; names: default ``LAYOUT.names``; segments: the residuals' tick layout (HAC
    covariance; default: ``problem.data``'s intervals when it has them, else Gauss–Newton). Intended for ``twinlake fit show`` and the fit
    record (``to_json()``).
    """
    names = tuple(names or LAYOUT.names)
    b = np.asarray(LAYOUT.bounds if bounds is None else bounds, dtype=np.float64)
    free_names = [n for n in (names if free is None else free) if n not in DISCRETE_NAMES]
    unknown = [n for n in free_names if n not in names]
    if unknown:
        raise SettingError("free", str(unknown), "unknown parameter name(s); expected names of LAYOUT.names")
    free_idx = [names.index(n) for n in free_names]
    if segments is None and getattr(problem, "data", None) is not None:
        segments = covmod.replay_segments([len(inp.q_ref) for inp in problem.data.inputs])
    x = np.asarray(best, dtype=np.float64)
    jac, r0 = fd_jacobian(problem.residuals, x, free_idx, b[:, 0], b[:, 1], rel_step)
    seeds = None if seed_optima is None else np.atleast_2d(np.asarray(seed_optima, dtype=np.float64))
    return analyse(names, x, jac, r0, free_idx, b[:, 0], b[:, 1], seeds, segments)


def summary_rows(result_dict: dict[str, Any]) -> list[list[str]]:
    """Rows (name, value, 95 % interval, bounds, seed range, flags) for a table in `fit show`,
    from the stored ``identifiability_json`` dict."""
    def fmt(v: float | None) -> str:
        return "—" if v is None else f"{v:.4g}"

    rows = []
    for p in result_dict.get("parameters", []):
        ci = f"[{fmt(p['ci95_low'])}, {fmt(p['ci95_high'])}]" if p["free"] else "frozen"
        seeds = f"[{fmt(p['seed_min'])}, {fmt(p['seed_max'])}]" if p.get("seed_min") is not None else "—"
        rows.append([p["name"], fmt(p["value"]), ci, f"[{fmt(p['lower_bound'])}, {fmt(p['upper_bound'])}]", seeds,
                     ", ".join(p["flags"])])
    return rows


def identifiability_for_fit(lake: Any, rec: Any, seed_records: Sequence[Any] = (), *,
                            rel_step: float = 1e-3, nthread: int = 1) -> IdentifiabilityResult:
    """Error bars of a stored fit (a ``FitRecord``) on its own training intervals, with the
    free parameters and bounds of its settings; ``seed_records``: fits of the same problem
    with other seeds (their best vectors give the spread). For ``fit show`` / ``fit report``."""
    from ..core.intervals import IntervalRef
    from ..core.objective import FitProblem, LossScales
    from ..core.space import ParameterSpace

    if not rec.train:
        raise RecordError(f"fit {rec.fit_id}: no training intervals recorded (imported fit?); no Jacobian to take")
    s = rec.settings or {}
    space = ParameterSpace.from_json(s["space"]) if "space" in s else ParameterSpace()
    refs = [IntervalRef(u.robot, u.run, int(u.interval_index), int(u.seq_first), int(u.seq_last), u.run_sha256)
            for u in rec.train]
    scales = LossScales(s.get("q_scale_rad", LossScales().q_rad), s.get("dq_scale_rad_s", LossScales().dq_rad_s))
    problem = FitProblem.from_lake(lake, refs, scales=scales, weights=s.get("weights") or None,
                                   max_duration_s=s.get("max_duration_s"), nthread=nthread,
                                   model_path=s.get("model_path"))
    seeds = np.stack([rec.vector] + [r.vector for r in seed_records]) if seed_records else None
    return identifiability_summary(problem, rec.vector, free=space.free_names, bounds=space.bounds,
                                   seed_optima=seeds, rel_step=rel_step)
