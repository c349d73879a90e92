"""The torque route's systematic (analysis-choice) error bar under the Stribeck law.

Which rows sit "at rest" is partly a choice: the rest rule (soft_friction.py) reads the
filtered acceleration against a margin over the constraint's creep acceleration, and the
filter's reach around a row off its level is a length chosen from the cutoff; a row kept
wrongly carries friction force the Stribeck columns do not model, and it leaks into the other
parameters. The HAC covariance cannot see it: it is
a bias, not noise. So the same weighted problem (same weights, delay, prior) is solved again
under each soft_friction.REST_VARIANTS rule (only the row mask changes; the regressor is
reused) and the shift δ_v = β_v − β̂ (p,) measures how much the choice matters.

Part of a shift is plain statistics: the variant drops rows, and a smaller sample moves the
estimate by chance. Both estimates are linear in the per-tick scores, so the shift's own
sampling covariance is exact and cheap: the HAC long-run covariance (same bandwidth) of
d_t = N_v⁻¹ g_v,t − N⁻¹ g_t. Only the excess counts as systematic (Barlow 2002, "Systematic
errors: facts and fictions"): per parameter s_v,i = sign(δ_v,i)·√max(δ_v,i² − Var(δ_v)_ii, 0),
and the systematic covariance Σ_v s_v s_vᵀ (a sum of rank-one terms: symmetric, PSD, and it
keeps the direction the choice moves β in) is added to the HAC covariance. Under tanh no row
is left out, there is nothing to vary and the component is zero.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..model.equations import SegmentEquations, normal_equations, scores
from .estimate import hac_long_run
from ..model.soft_friction import REST_VARIANTS


@dataclass
class Systematic:
    """Per variant (V of them, `names`): the shift δ (V, p) in β's units, the sampling standard
    deviation of that shift (V, p), the systematic part s (V, p) and the rows the variant used;
    `cov` (p, p) = Σ_v s_v s_vᵀ (zero when V = 0)."""

    names: list[str]
    shift: np.ndarray
    shift_sd: np.ndarray
    excess: np.ndarray
    rows: list[int]
    cov: np.ndarray

    @classmethod
    def none(cls, p: int) -> "Systematic":
        """Nothing varied (tanh law, or no variant rows): a zero component."""
        empty = np.zeros((0, p))
        return cls([], empty, empty, empty, [], np.zeros((p, p)))

    @property
    def stderr(self) -> np.ndarray:
        """(p,) the systematic standard error √diag(cov)."""
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0))

    def to_dict(self, param_names: list[str]) -> dict:
        """JSON form: per variant its name, rows and per parameter shift / its sd / systematic part."""
        return {"variants": [{"name": n, "rows": r,
                              "shift": dict(zip(param_names, d.tolist())),
                              "shift_sampling_sd": dict(zip(param_names, sd.tolist())),
                              "systematic": dict(zip(param_names, s.tolist()))}
                             for n, r, d, sd, s in zip(self.names, self.rows, self.shift, self.shift_sd, self.excess)]}


def error_bar_note(stderr_hac: np.ndarray, stderr_total: np.ndarray, names: list[str], systematic: Systematic) -> str:
    """One line for `fit show`: what the torque fit's error bars contain and how much the
    systematic part widened them (stderr (p,) in β's units, HAC alone and total)."""
    if not systematic.names:
        return ("error bars: HAC (Newey–West) sandwich only; no rest rule to vary under this friction law, "
                "so no systematic component")
    # a direction the prior holds has next to no HAC bar: its ratio says nothing about the rule
    held = ~(stderr_hac > 1e-6 * stderr_total)
    ratio = np.where(held, 1.0, stderr_total / np.where(held, 1.0, stderr_hac))
    worst = int(np.argmax(ratio))
    return (f"error bars: HAC (Newey–West) sandwich plus a systematic component from the rest rule "
            f"({', '.join(systematic.names)}; only each shift's part beyond its own sampling noise): "
            f"standard errors {np.median(ratio):.2f}x the HAC ones (median), at most {ratio[worst]:.2f}x ({names[worst]})")


def _tick_scores(eqs: list[SegmentEquations], weights: np.ndarray, y: list[np.ndarray], beta: np.ndarray,
                 inverse: np.ndarray) -> list[np.ndarray]:
    """Per segment (T, p): N⁻¹ g_t, the tick's contribution to β − β_true (β's units)."""
    return [scores(eq, weights, np.nan_to_num(t - eq.predict(beta))) @ inverse.T for eq, t in zip(eqs, y)]


def rest_systematic(eqs: list[SegmentEquations], weights: np.ndarray, y: list[np.ndarray], prior: np.ndarray,
                    beta_nom: np.ndarray, beta_hat: np.ndarray, normal: np.ndarray, lag: int,
                    correct=None) -> Systematic:
    """The Systematic of the rest rule (module docstring). eqs: the segments as solved; weights
    (7,) [1/N²·m²]; y: per segment the target (T, 7) at the chosen delay [N·m]; prior (p, p) and
    beta_nom (p,) as in the solve; beta_hat (p,) the unconstrained estimate; normal (p, p) the
    weighted normal matrix with the prior (and correction); lag the HAC bandwidth [ticks];
    correct: rows (per segment (T, 7)) -> (ΔN, Δb) of noise_bias.correction, as in the solve."""
    p = len(beta_hat)
    count = len(eqs[0].variant_rows) if eqs else 0
    if count == 0:
        return Systematic.none(p)
    inverse = np.linalg.pinv(normal)
    base = _tick_scores(eqs, weights, y, beta_hat, inverse)
    shifts, sds, rows = [], [], []
    for v in range(count):
        alt = [replace(eq, rows=eq.variant_rows[v]) for eq in eqs]
        n_v, b_v = normal_equations(alt, weights, [t[:, :, None] for t in y])
        if correct is not None:
            d_n, d_b = correct([eq.rows for eq in alt])
            n_v, b_v = n_v - d_n, b_v + d_b[:, None]
        beta_v = np.linalg.lstsq(n_v + prior, b_v[:, 0] + prior @ beta_nom, rcond=None)[0]
        moved = _tick_scores(alt, weights, y, beta_v, np.linalg.pinv(n_v + prior))
        var = np.diag(hac_long_run([m - b for m, b in zip(moved, base)], lag))
        shifts.append(beta_v - beta_hat)
        sds.append(np.sqrt(np.maximum(var, 0.0)))
        rows.append(int(sum(eq.rows.sum() for eq in alt)))
    shift, sd = np.array(shifts), np.array(sds)
    excess = np.sign(shift) * np.sqrt(np.maximum(shift**2 - sd**2, 0.0))
    return Systematic([v.name for v in REST_VARIANTS[:count]], shift, sd, excess, rows, excess.T @ excess)


__all__ = ["Systematic", "error_bar_note", "rest_systematic"]
