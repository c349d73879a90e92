"""Local refinement after CMA-ES: projected Levenberg–Marquardt on the continuous free
parameters, with the delay held at the best candidate's value.

CMA-ES finds the basin; near the optimum a Gauss–Newton step uses the structure of the
least-squares loss (Σ r²) that CMA-ES ignores, so a few iterations reach accuracy that would
take CMA-ES hundreds of generations in 28 dimensions. Each iteration is two population
evaluations on the same pool as the search:

1. the residuals of z and of z + h·e_i for every free coordinate i (forward differences in
   the normalised box, backward at the upper bound; h = 1e-3) give the Jacobian J (M, n);
2. the steps δ(λ) = −(JᵀJ + λ·diag(JᵀJ))⁻¹ Jᵀr for λ in LAMBDAS are evaluated together
   (clipped to the box); the best is taken if it lowers the loss; refinement stops when the
   relative decrease falls below REL_TOL.

Deterministic: no random numbers; results do not depend on the pool's slicing.
"""

from __future__ import annotations

import time

import numpy as np

from twinlake.fit.space import ParameterSpace

STEP = 1e-3
LAMBDAS = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
REL_TOL = 1e-4  # relative loss decrease below which refinement stops


def _jacobian(pool, space: ParameterSpace, z: np.ndarray, delay: int) -> tuple[np.ndarray, np.ndarray]:
    n = z.size
    h = np.where(z + STEP <= 1.0, STEP, -STEP)
    zs = np.vstack([z, z + np.diag(h)])
    res = pool.residuals(space.decode(zs, np.full(n + 1, delay)))
    return res[0], (res[1:] - res[0]).T / h


def refine(pool, combine, space: ParameterSpace, best: np.ndarray, best_loss: float, iterations: int,
           on_iteration=None) -> tuple[np.ndarray, float, list[dict]]:
    """Refine a (29,) best vector; returns (params, loss, one history dict per iteration).

    `pool` has `.residuals(params (P,29)) -> (P, M)` and `.evaluate(params) -> (P, B)`;
    `combine((P, B)) -> (P,)` is the weighted loss.
    """
    n = len(space.free_indices)
    if n == 0 or iterations <= 0:
        return best, best_loss, []
    delay = int(round(best[-1]))
    z = space.encode(best[None])[0]
    loss = best_loss
    rows = []
    for it in range(iterations):
        t0 = time.perf_counter()
        r, jac = _jacobian(pool, space, z, delay)
        jtj, jtr = jac.T @ jac, jac.T @ r
        scale = np.maximum(np.diag(jtj), 1e-12)
        steps = []
        for lam in LAMBDAS:
            try:
                steps.append(np.linalg.solve(jtj + lam * np.diag(scale), -jtr))
            except np.linalg.LinAlgError:
                steps.append(np.zeros(n))
        trial = np.clip(z[None] + np.array(steps), 0.0, 1.0)
        per_interval = pool.evaluate(space.decode(trial, np.full(len(trial), delay)))
        losses = np.asarray(combine(per_interval))
        k = int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))
        improved = losses[k] < loss * (1.0 - REL_TOL)  # stop once steps no longer pay
        if losses[k] < loss:
            z, loss = trial[k], float(losses[k])
        rows.append({"min": float(np.min(losses)), "mean": float(np.mean(losses)), "best": loss,
                     "iter_s": time.perf_counter() - t0, "lambda": LAMBDAS[k],
                     "per_traj_min": np.min(per_interval, axis=0).tolist(),
                     "evaluations": n + 1 + len(trial)})
        if on_iteration is not None:
            on_iteration(it + 1, loss)
        if not improved:
            break
    return space.decode(z[None], np.array([delay]))[0], loss, rows
