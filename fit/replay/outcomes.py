"""The replay search's stage results, typed: what the cheap stage found (`CheapStage`), the
Jacobian the full-data stage leaves for the error bars (`JacobianSnapshot`), and one seed's
outcome (`SeedOutcome`). They travel from fit/replay/local_search.py and seed_search.py to the
driver (fit/run.py) and are pickled in the fit's work directory between stages (`--resume`).

Coordinates: `z` is the range-scaled point of the free continuous parameters (n,)
(fit/core/space.py `ParameterSpace.encode`); delays are in ms; losses in the objective's units
(fit/core/objective.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.loop_noise import LoopNoise


@dataclass
class CheapStage:
    """Stage 1 on the cheap windows (local_search.cheap_stage): the best start's point `z` (n,),
    `delay` [ms] and `loss`; every start's loss, delay and end point (`start_losses` (K,),
    `start_delays` (K,), `start_z` (K, n)); `offsets` (7,) the per-joint delay offsets [ms];
    `rows` the LM iterations' history rows (moved into the fit's history once taken); `notes`
    what the stage says about itself."""

    z: np.ndarray
    delay: int
    loss: float
    start_losses: np.ndarray
    start_delays: np.ndarray
    start_z: np.ndarray
    offsets: np.ndarray
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class JacobianSnapshot:
    """The last full-data LM iteration's Jacobian, kept for the error bars
    (full_stage.error_bar_jacobian): `z` (n,) the point it was taken at, `r_factor` (n, n)
    the R of its QR (JᵀJ = RᵀR), `rows` the residuals' count, `moved` whether the iteration's
    step left that point, `per_interval` the training intervals' losses at the optimum (or
    None), `scores` the per-tick scores of the HAC covariance per replay segment (or None),
    `seconds` [s] spent on them, `loop_noise` the closed loop's bootstrap (or None),
    `profile_check` the intervals' check against the loss (fit/core/profile_check.py, or None)."""

    z: np.ndarray
    r_factor: np.ndarray
    rows: int
    moved: bool
    per_interval: Any = None
    scores: list[np.ndarray] | None = None
    seconds: float = 0.0
    loop_noise: LoopNoise | None = None
    profile_check: Any = None

    def covariances(self, loss: float, alternatives: bool = True):
        """(default, alternatives) covariance estimates (fit/core/covariance.py, range-scaled)
        of a fit whose loss Σ r² is `loss`: HAC from the per-tick scores plus the closed loop's
        spread when it was measured (the measurement noise's alone kept as `hac_without_loop_noise`);
        (None, None) without scores. The profile check's widening is not in them.
        `alternatives=False`: the default alone ({} beside it), without the comparisons' cost
        (the moving-block bootstrap's draws: ~0.1 s on the demo's run)."""
        from ..core.covariance import HAC, from_scores, with_alternatives

        if self.scores is None:
            return None, None
        bread, k = self.r_factor.T @ self.r_factor, self.r_factor.shape[1]
        sigma2 = loss / max(self.rows - k, 1)
        if alternatives:
            main, others = with_alternatives(bread, self.scores, sigma2, self.rows)
        else:
            main, others = from_scores(bread, self.scores, sigma2, self.rows, HAC), {}
        if self.loop_noise is not None:
            from ..core.loop_noise import WITHOUT, with_loop_noise

            others = {**others, WITHOUT: main} if alternatives else others
            main = with_loop_noise(main, self.loop_noise)
        return main, others

    def checked_intervals(self, pool, space, params: np.ndarray, loss: float, note):
        """The default intervals (`covariances(loss)`) checked against the loss by replays of
        `params` (n,) on `pool` (fit/core/profile_check.py): a ProfileCheck, or None without
        per-tick scores (no HAC intervals to check). Its wall time is added to `seconds`."""
        from ...sim import LAYOUT
        from ..core.profile_check import CHECK_EDGES, check_intervals

        main, _ = self.covariances(loss, alternatives=False)
        if main is None:
            return None
        free = space.free_indices
        note(f"checking the intervals against the loss: {2 * len(CHECK_EDGES) * len(free) + 1} replays")
        check = check_intervals(pool, params, free, space.bounds[free, 0], space.bounds[free, 1],
                                [LAYOUT.names[i] for i in free], self.r_factor, main.cov, main.t95)
        self.seconds += check.seconds
        if check.profiled:
            note(f"intervals profiled where the loss is flatter than they assume: {len(check.profiled)} side(s), "
                 f"{check.replays} replays")
        return check


@dataclass
class SeedOutcome:
    """One seed's finished search (seed_search.seed_result): its best parameter vector `best`
    (LAYOUT.size,), `best_loss`, the history rows, the wall time [s] it took (resumes
    included), the local search's gates verdict (None for CMA-ES fits) and its
    `jacobian` (None when CMA-ES won or the fit is a CMA-ES fit)."""

    seed: int
    best: np.ndarray
    best_loss: float
    history: list[dict[str, Any]]
    wall_s: float
    gates: str | None = None
    jacobian: JacobianSnapshot | None = None


__all__ = ["CheapStage", "JacobianSnapshot", "SeedOutcome"]
