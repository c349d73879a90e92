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
    (local_search.error_bar_jacobian): `z` (n,) the point it was taken at, `r_factor` (n, n)
    the R of its QR (JᵀJ = RᵀR), `rows` the residuals' count, `moved` whether the iteration's
    step left that point, `per_interval` the training intervals' losses at the optimum (or
    None), `scores` the per-tick scores of the HAC covariance per replay segment (or None),
    `seconds` [s] spent on them, `loop_noise` the closed loop's bootstrap (or None)."""

    z: np.ndarray
    r_factor: np.ndarray
    rows: int
    moved: bool
    per_interval: Any = None
    scores: list[np.ndarray] | None = None
    seconds: float = 0.0
    loop_noise: LoopNoise | None = None


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
