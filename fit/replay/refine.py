"""Local refinement after CMA-ES: projected Levenberg–Marquardt on the continuous free
parameters at a fixed delay, the delay re-chosen between LM runs.

CMA-ES finds the basin; near the optimum a Gauss–Newton step uses the structure of the
least-squares loss (Σ r²) that CMA-ES ignores, so a few iterations reach accuracy that would
take CMA-ES hundreds of generations in 28 dimensions. Each iteration is two population
evaluations on the same pool as the search:

1. the residuals of z and of z + h·e_i for every free coordinate i (forward differences in
   the normalised box, backward at the upper bound; h = 1e-3) give the Jacobian J (M, n);
2. the steps δ(λ) = −(JᵀJ + λ·diag(JᵀJ))⁻¹ Jᵀr for λ in LAMBDAS are evaluated together
   (clipped to the box); the best is taken if it lowers the loss; refinement stops when the
   relative decrease falls below REL_TOL.

A wrong delay is partly absorbed by the other parameters, so the delay is checked by
profiling: from the converged point, each neighbouring delay gets PROBE_ITERATIONS LM
iterations; a neighbour that ends lower becomes the delay and LM continues from there.

Deterministic: no random numbers; results do not depend on the pool's slicing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.space import ParameterSpace

STEP = 1e-3
LAMBDAS = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
REL_TOL = 1e-4  # relative loss decrease below which refinement stops


@dataclass
class LastIteration:
    """The last LM iteration of a `refine(..., last=LastIteration())`, filled as it runs: `z`
    (n,) the normalised point its Jacobian was taken at, `jac` (M, n) ∂r/∂z (forward
    differences), `r` (M,) the residuals at `z`, `moved` whether its step was taken (else the
    returned point is `z`), `per_interval` (B,) the per-interval losses of the returned point
    (None when no step was taken at all); how LM ended, `stop` ('predicted', 'step' or 'cap'),
    and `realised_gain` the last evaluated step's loss decrease (loss units). `jac` is None
    until an iteration ran."""

    z: np.ndarray | None = None
    jac: np.ndarray | None = None
    r: np.ndarray | None = None
    moved: bool = False
    per_interval: np.ndarray | None = None
    stop: str | None = None
    realised_gain: float = 0.0
MAX_DELAY_ROUNDS = 2
PROBE_ITERATIONS = 2


def _jacobian(pool, space: ParameterSpace, z: np.ndarray, delay: int) -> tuple[np.ndarray, np.ndarray]:
    n = z.size
    h = np.where(z + STEP <= 1.0, STEP, -STEP)
    zs = np.vstack([z, z + np.diag(h)])
    res = pool.residuals(space.decode(zs, np.full(n + 1, delay)))
    return res[0], (res[1:] - res[0]).T / h


def _damped_steps(jtj: np.ndarray, jtr: np.ndarray) -> np.ndarray:
    """(len(LAMBDAS), n) Levenberg–Marquardt steps −(JᵀJ + λ·diag(JᵀJ))⁻¹Jᵀr, one per λ of
    LAMBDAS (the diagonal floored at 1e-12); a singular system's step is zero."""
    scale = np.diag(np.maximum(np.diag(jtj), 1e-12))
    steps = np.zeros((len(LAMBDAS), len(jtr)))
    for step, lam in zip(steps, LAMBDAS):
        try:
            step[:] = np.linalg.solve(jtj + lam * scale, -jtr)
        except np.linalg.LinAlgError:
            pass
    return steps


def _neighbours(space: ParameterSpace, delay: int, tried=()) -> list[int]:
    """The neighbouring delays (delay − 1, delay + 1 ms) among the space's choices, not in `tried`."""
    choices = set(space.delay_choices.tolist())
    return [d for d in (delay - 1, delay + 1) if d in choices and d not in tried]


def _lm(pool, combine, space, z, delay, loss, iterations, rows, on_iteration, rel_tol=REL_TOL, last=None,
        predict_stop=False):
    n = z.size
    for _ in range(iterations):
        t0 = time.perf_counter()
        r, jac = _jacobian(pool, space, z, delay)
        if loss is None:  # the start's loss from the Jacobian's centre row (Σ r² = loss)
            loss = float(r @ r) if np.all(np.isfinite(r)) else np.inf
        if last is not None:
            last.z, last.jac, last.r, last.moved = z, jac, r, False
        jtj, jtr = jac.T @ jac, jac.T @ r
        steps = _damped_steps(jtj, jtr)
        tol = rel_tol(loss) if callable(rel_tol) else rel_tol
        if last is not None:
            last.stop = "cap"
        if predict_stop and _predicted_decrease(steps[0], jtj, jtr) < tol * loss:
            if last is not None:
                last.stop = "predicted"
            rows.append({"min": loss, "mean": loss, "best": loss, "iter_s": time.perf_counter() - t0, "lambda": None,
                         "delay": delay, "per_traj_min": None, "evaluations": n + 1})
            if on_iteration is not None:
                on_iteration(len(rows), loss, delay)
            break
        trial = np.clip(z[None] + steps, 0.0, 1.0)
        per_interval = pool.evaluate(space.decode(trial, np.full(len(trial), delay)))
        losses = np.asarray(combine(per_interval))
        k = int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))
        if last is not None:
            last.realised_gain = float(loss - losses[k])
        improved = losses[k] < loss * (1.0 - tol)  # stop once steps no longer pay
        if losses[k] < loss:
            z, loss = trial[k], float(losses[k])
            if last is not None:
                last.moved, last.per_interval = True, per_interval[k]
        rows.append({"min": float(np.min(losses)), "mean": float(np.mean(losses)), "best": loss,
                     "iter_s": time.perf_counter() - t0, "lambda": LAMBDAS[k], "delay": delay,
                     "per_traj_min": np.min(per_interval, axis=0).tolist(),
                     "evaluations": n + 1 + len(trial)})
        if on_iteration is not None:
            on_iteration(len(rows), loss, delay)
        if not improved:
            if last is not None:
                last.stop = "step"
            break
    return z, loss


def _predicted_decrease(step: np.ndarray, jtj: np.ndarray, jtr: np.ndarray) -> float:
    """The loss decrease the linearised model predicts for `step`: −(2·δᵀJᵀr + δᵀJᵀJδ)."""
    return float(-(2.0 * step @ jtr + step @ jtj @ step)) if np.all(np.isfinite(step)) else np.inf


def refine(pool, combine, space: ParameterSpace, best: np.ndarray, best_loss: float | None, iterations: int,
           on_iteration=None, profile_delay: bool = True, rel_tol: float | Callable[[float], float] = REL_TOL,
           last: LastIteration | None = None, predict_stop: bool = False) -> tuple[np.ndarray, float, list[dict]]:
    """Refine an (n,) best vector (`LAYOUT` order); returns (params, loss, one history dict per iteration).

    LM runs at the best candidate's delay; then each neighbouring delay (±1 ms, within the
    choices) is probed with PROBE_ITERATIONS LM iterations from the converged point, since
    the other parameters partly compensate a wrong delay; a better neighbour becomes the
    delay and LM continues (at most MAX_DELAY_ROUNDS switches).
    `pool` has `.residuals(params (P, n)) -> (P, M)` and `.evaluate(params) -> (P, B)`;
    `combine((P, B)) -> (P,)` is the weighted loss. `profile_delay=False` keeps the delay
    (the caller profiled it already, e.g. on cheap data). `best_loss=None`: taken from the first
    Jacobian's centre row (Σ r²), saving one evaluation. LM stops once an iteration's relative
    decrease is below `rel_tol` (a number, or a function of the current loss). `last` (a LastIteration, with `profile_delay=False`) receives the last
    iteration's Jacobian, residuals and step, and how LM ended. `predict_stop`: also stop, before evaluating any step, once
    the Gauss–Newton step (the smallest λ) is predicted by the linearised model to gain less
    than `rel_tol` (its history row then has `lambda` None and no per-interval minimum).
    """
    if len(space.free_indices) == 0 or iterations <= 0:
        return best, best_loss, []
    space = space.with_offsets(space.offsets_of(best))  # per-joint delay offsets stay the best's
    z = space.encode(best[None])[0]
    delay, loss = space.delay_of(best), best_loss
    rows: list[dict] = []
    z, loss = _lm(pool, combine, space, z, delay, loss, iterations, rows, on_iteration, rel_tol, last, predict_stop)
    tried = {delay}
    for _ in range(MAX_DELAY_ROUNDS if profile_delay else 0):
        found = None
        for d in _neighbours(space, delay, tried):
            tried.add(d)
            zd, ld = _lm(pool, combine, space, z, d, np.inf, PROBE_ITERATIONS, rows, on_iteration)
            if ld < loss and (found is None or ld < found[2]):
                found = (d, zd, ld)
        if found is None:
            break
        delay, z, loss = found
        z, loss = _lm(pool, combine, space, z, delay, loss, iterations, rows, on_iteration)
    return space.decode(z[None], np.array([delay]))[0], loss, rows


def neighbour_delays(pool, combine, space: ParameterSpace, z: np.ndarray, delay: int, loss: float, iterations: int,
                     rows: list, stage: str, note=None, tried=(), rel_tol: float = REL_TOL, min_gain: float = 0.0
                     ) -> tuple[np.ndarray, int, float] | None:
    """The delay's discrete profile at the converged point z (n,): each neighbouring delay (±1 ms,
    within the choices, not in `tried`) gets `iterations` LM iterations from z, together (one
    `lm_batch`, stopping below `rel_tol`), since the other parameters partly absorb a wrong delay; returns (z, delay, loss)
    of the best neighbour when it ends below `loss` by more than `min_gain` of it, else None."""
    neighbours = np.array(_neighbours(space, delay, tried), dtype=np.int64)
    if not neighbours.size:
        return None
    zn = np.repeat(z[None], len(neighbours), axis=0)
    ln = np.asarray(combine(pool.evaluate(space.decode(zn, neighbours))))
    zn, ln = lm_batch(pool, combine, space, zn, neighbours, np.where(np.isfinite(ln), ln, np.inf), iterations,
                      rows, stage, note, rel_tol)
    k = int(np.argmin(ln))
    return (zn[k], int(neighbours[k]), float(ln[k])) if ln[k] < loss * (1.0 - min_gain) else None


def neighbour_delays_linear(pool, combine, space: ParameterSpace, z: np.ndarray, delay: int, loss: float,
                            jac: np.ndarray, rows: list, stage: str, tried=(), min_gain: float = 0.0
                            ) -> tuple[np.ndarray, int, float] | None:
    """The delay's discrete profile at a converged point z (n,) for the price of one LM step per
    neighbour: each neighbouring delay (±1 ms, within the choices, not in `tried`) is replayed at
    z, and its Levenberg–Marquardt steps (every λ of LAMBDAS) are taken with `jac` (M, n), the
    Jacobian at the current delay (∂r/∂z barely changes over 1 ms; a fresh one would cost n + 1
    replays per neighbour). Returns (z, delay, loss) of the lowest point seen at a neighbouring
    delay when it is below `loss` by more than `min_gain` of it, else None; `rows` gains one
    row (`stage`)."""
    neighbours = _neighbours(space, delay, tried)
    if not neighbours:
        return None
    t0 = time.perf_counter()
    res = pool.residuals(space.decode(np.repeat(z[None], len(neighbours), axis=0), np.array(neighbours)))
    jtj = jac.T @ jac
    points = []
    for r in res:  # the unmoved point, then its steps (none from a non-finite replay)
        steps = _damped_steps(jtj, jac.T @ r) if np.all(np.isfinite(r)) else np.zeros((len(LAMBDAS), z.size))
        points += [z[None], z[None] + steps]
    points = np.clip(np.concatenate(points), 0.0, 1.0)
    delays = np.repeat(np.array(neighbours, dtype=np.int64), len(LAMBDAS) + 1)
    steps = np.ones(len(points), dtype=bool)
    steps[::len(LAMBDAS) + 1] = False  # the unmoved points' losses are their residuals' sums
    per_interval = pool.evaluate(space.decode(points[steps], delays[steps]))
    losses = np.empty(len(points))
    losses[~steps] = np.sum(res ** 2, axis=1)
    losses[steps] = np.asarray(combine(per_interval))
    losses = np.where(np.isfinite(losses), losses, np.inf)
    k = int(np.argmin(losses))
    rows.append({"stage": stage, "min": float(losses[k]), "mean": float(np.mean(losses[np.isfinite(losses)]))
                 if np.isfinite(losses).any() else float("inf"), "best": float(min(loss, losses[k])),
                 "iter_s": time.perf_counter() - t0, "per_traj_min": np.min(per_interval, axis=0).tolist(),
                 "evaluations": len(neighbours) + int(steps.sum())})
    return (points[k], int(delays[k]), float(losses[k])) if losses[k] < loss * (1.0 - min_gain) else None


def lm_batch(pool, combine, space: ParameterSpace, z: np.ndarray, delays: np.ndarray, loss: np.ndarray,
             iterations: int, rows: list, stage: str, note=None, rel_tol: float = REL_TOL
             ) -> tuple[np.ndarray, np.ndarray]:
    """Projected LM (fit/replay/refine.py's step) on K points at once: per iteration one residual
    batch of K·(n+1) candidates and one loss batch of K·len(LAMBDAS); a point stops once its
    relative decrease is below `rel_tol`. Returns (z (K, n), loss (K,))."""
    z, loss = z.copy(), loss.astype(np.float64).copy()
    n, active = z.shape[1], np.isfinite(loss)  # an unstable start does not move
    for _ in range(iterations):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        t0 = time.perf_counter()
        zk = z[idx]
        h = np.where(zk + STEP <= 1.0, STEP, -STEP)  # (k, n)
        cand = np.concatenate([np.vstack([zi, zi + np.diag(hi)]) for zi, hi in zip(zk, h)])
        res = pool.residuals(space.decode(cand, np.repeat(delays[idx], n + 1))).reshape(len(idx), n + 1, -1)
        trials = []
        for k in range(len(idx)):
            r, jac = res[k, 0], (res[k, 1:] - res[k, 0]).T / h[k]
            jtj, jtr = jac.T @ jac, jac.T @ r
            if not (np.all(np.isfinite(jtj)) and np.all(np.isfinite(jtr))):
                trials.append(np.repeat(zk[k][None], len(LAMBDAS), axis=0))  # a non-finite replay nearby: no step
                continue
            trials.append(zk[k][None] + _damped_steps(jtj, jtr))
        trial = np.clip(np.concatenate(trials), 0.0, 1.0)
        per_interval = pool.evaluate(space.decode(trial, np.repeat(delays[idx], len(LAMBDAS))))
        tl = np.asarray(combine(per_interval)).reshape(len(idx), len(LAMBDAS))
        tl = np.where(np.isfinite(tl), tl, np.inf)
        for k, i in enumerate(idx):
            j = int(np.argmin(tl[k]))
            active[i] = tl[k, j] < loss[i] * (1.0 - rel_tol)
            if tl[k, j] < loss[i]:
                z[i], loss[i] = trial[k * len(LAMBDAS) + j], float(tl[k, j])
        finite = tl[np.isfinite(tl)]
        rows.append({"stage": stage, "min": float(tl.min()), "mean": float(finite.mean()) if finite.size else float("inf"),
                     "best": float(loss.min()), "iter_s": time.perf_counter() - t0,
                     "per_traj_min": np.min(per_interval, axis=0).tolist(),
                     "evaluations": int(len(cand) + len(trial))})
        if note is not None:
            note(f"{stage} {len(rows)}: best loss {loss.min():.4g} ({len(idx)} start(s) moving)")
    return z, loss


def append_history(history: list[dict], rows: list[dict], ticks: int, stage: str | None = None,
                   best: float | None = None) -> None:
    """The LM rows of `refine` / `lm_batch` / the delay probes (`rows`) appended to a fit's
    `history` as its records store them (fit/records/record.py), continuing the iteration count;
    `stage` names them (None: each row's own), and the running best starts from `best` (None: the
    best so far of the first row's stage in `history`). `ticks`: the ticks of one replay."""
    if best is None:
        first = stage or (rows[0]["stage"] if rows else None)
        best = min([h["best"] for h in history if h.get("stage") == first] or [np.inf]) if rows else 0
    running = best
    for row in rows:
        running = min(running, row["min"])
        history.append({"iter": len(history) + 1, "stage": stage or row["stage"], "min": row["min"],
                        "mean": row["mean"], "best": running, "iter_s": row["iter_s"],
                        "ms_per_tick": row["iter_s"] / max(ticks, 1) * 1e3, "eta_s": 0.0,
                        "per_traj_min": row["per_traj_min"], "best_candidate_weighted": None, "sigma": None,
                        "evals_per_s": row["evaluations"] / row["iter_s"] if row["iter_s"] > 0 else None,
                        "delay_probs": None})
