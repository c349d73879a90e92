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
  0.5 σ to any parameter's error (and less in the correlation-robust bars, which are wider);
  but while the loss is above the floor gate (fit/replay/gates.py: the model does not explain
  the data, so its misfit, not the search, sets the parameters' error) the cheap rule applies:
  measured on the independent plant's default fit (842× the floor), the tight rule spent 47 s
  of full-data LM against 24 s for a loss 0.02 % lower.
  Not less: the forward-difference Jacobian's predicted gains are good to a few tenths of σ²
  near the optimum (measured on the demo's fit: predicted 0.70 / 0.53 σ² where the steps
  realised 0.45 / 0.10), so a smaller stop would spend iterations on the Jacobian's own error.
"""

from __future__ import annotations


from dataclasses import dataclass

from .gates import FLOOR_GATE
from .refine import REL_TOL, LastIteration

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


@dataclass(frozen=True)
class FullStop:
    """The full-data LM's tolerance (relative loss decrease) as a function of the current loss:
    `tight` = FULL_STOP_SE² / (M − k), a gain below FULL_STOP_SE²·σ² (σ² = loss / (M − k)) —
    a Gauss–Newton gain g puts the optimum √(g/σ²) standard errors away in the Mahalanobis
    metric, which bounds every parameter's distance in its own standard errors, so each ends
    within FULL_STOP_SE of them — while the loss is within the floor gate (`gate_loss` =
    FLOOR_GATE × the noise floor's loss; None: no measurable floor, always tight). Above it the
    model does not explain the data, its misfit biases the parameters far beyond any standard
    error, and the cheap stage's `loose` rule (moving all k by CHEAP_STOP_SE) is the stop."""

    tight: float
    loose: float
    gate_loss: float | None

    def __call__(self, loss: float) -> float:
        return self.loose if self.gate_loss is not None and loss > self.gate_loss else self.tight

    def sigma2_units(self, loss: float, data, n_free: int) -> float:
        """The tolerance at `loss` in units of σ² (the gain below which LM stops, / σ²)."""
        return self(loss) * max(residual_count(data) - n_free, 1)


def full_stop(data, n_free: int, floor: float | None) -> FullStop:
    """The full-data stop for `data` with k = n_free free parameters and the noise floor's
    loss `floor` (fit/replay/gates.py `floor_loss`; None when not measurable)."""
    tight = FULL_STOP_SE ** 2 / max(residual_count(data) - n_free, 1)
    return FullStop(tight, cheap_rel_tol(data, n_free), None if floor is None else FLOOR_GATE * floor)


def convergence_note(last: LastIteration, data, n_free: int, cap: int, stop: FullStop) -> str | None:
    """A sentence when the full-data LM ended at its iteration cap still paying (its last step
    gained at least the tolerance), since the error bars assume the point is the optimum. None
    when LM stopped by its own rule."""
    if last.stop != "cap" or last.r is None:
        return None
    loss = float(last.r @ last.r)
    sigma2 = loss / max(residual_count(data) - n_free, 1)
    return (f"not converged: the full-data LM reached its cap of {cap} iterations with its last step still gaining "
            f"{last.realised_gain / sigma2:.3g} σ² (it stops below "
            f"{stop.sigma2_units(loss, data, n_free):.3g} σ²): the point may not be the optimum the error bars "
            "assume (raise the full-data LM's iteration cap)")


__all__ = ["CHEAP_STOP_SE", "FULL_STOP_SE", "FullStop", "cheap_rel_tol", "convergence_note", "full_stop", "residual_count"]
