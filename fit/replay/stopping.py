"""When Levenberg–Marquardt stops: statistically stated tolerances on the relative loss decrease.

A least-squares loss Σ r² with M residuals, k free parameters and σ² = loss / (M − k) per
residual: a Gauss–Newton step δ gains g = δᵀJᵀJδ, and g / σ² is the squared Mahalanobis
distance (in the iid standard errors σ²(JᵀJ)⁻¹) from the point to the linearised optimum; it
bounds every single parameter's distance in its own standard errors. So a gain threshold is a
distance to the optimum in standard errors:

- cheap windows (many starts, only the best goes on): a start stops once a step gains less than
  moving all k parameters by `CHEAP_STOP_SE` (2) standard errors, CHEAP_STOP_SE² · k σ²;
- full data (the point the error bars are taken at): LM stops once the optimum is within
  `FULL_STOP_SE` (0.5) standard errors, FULL_STOP_SE² σ², so the point's own offset adds at most
  0.5 σ to any parameter's error (and less in the correlation-robust bars, which are wider).
  Not less: the forward-difference Jacobian's predicted gains are good to a few tenths of σ²
  near the optimum (measured on the demo's fit: predicted 0.70 / 0.53 σ² where the steps
  realised 0.45 / 0.10), so a smaller stop would spend iterations on the Jacobian's own error.
"""

from __future__ import annotations


from .refine import REL_TOL

CHEAP_STOP_SE = 2.0  # a cheap-window start stops once a step gains less than moving all by this many std. errors
FULL_STOP_SE = 0.5  # full-data LM stops once the optimum is predicted within this distance [std. errors]


def residual_count(data) -> int:
    """M, the residual count of `data` (2 · 7 · samples per interval: q and dq of every joint)."""
    return sum(2 * inp.q_ref.size for inp in data.inputs)


def cheap_rel_tol(data, n_free: int) -> float:
    """The cheap stage's LM stopping tolerance (relative loss decrease) on the cheap windows `data`:
    what moving all k free parameters by CHEAP_STOP_SE standard errors gains, CHEAP_STOP_SE² · k /
    (M − k), at least fit/replay/refine.py's REL_TOL; a start that gains less has stopped paying."""
    return max(REL_TOL, CHEAP_STOP_SE ** 2 * n_free / max(residual_count(data) - n_free, 1))


def full_rel_tol(data, n_free: int) -> float:
    """The full-data LM's stopping tolerance: FULL_STOP_SE² / (M − k), i.e. a gain below FULL_STOP_SE²·σ²
    (σ² = loss / (M − k)). A Gauss–Newton gain g = δᵀJᵀJδ puts the optimum √(g/σ²) standard errors
    away in the Mahalanobis metric, which bounds every parameter's distance in its own standard
    errors; so stopping there leaves each parameter within FULL_STOP_SE of them from the optimum."""
    return FULL_STOP_SE ** 2 / max(residual_count(data) - n_free, 1)


def convergence_note(last: dict, data, n_free: int, cap: int) -> str | None:
    """A sentence when the full-data LM ended at its iteration cap still paying (its last step
    gained at least the tolerance), since the error bars assume the point is the optimum. None
    when LM stopped by its own rule."""
    if last.get("stop") != "cap" or "r" not in last:
        return None
    sigma2 = float(last["r"] @ last["r"]) / max(residual_count(data) - n_free, 1)
    return (f"not converged: the full-data LM reached its cap of {cap} iterations with its last step still gaining "
            f"{last.get('realised_gain', 0.0) / sigma2:.3g} σ² (it stops below {FULL_STOP_SE ** 2:.3g} σ²): the point "
            "may not be the optimum the error bars assume (raise --refine)")


__all__ = ["CHEAP_STOP_SE", "FULL_STOP_SE", "convergence_note", "full_rel_tol", "cheap_rel_tol", "residual_count"]
