"""One seed's search of a fit, checkpointed so that `--resume` continues it bit for bit:
`seed_result` runs the local-first search (fit/replay/local_search.py, CMA-ES only when its gates fail)
or CMA-ES then Levenberg–Marquardt (`settings.method == "cma"`), and keeps the finished result in
`seed-<seed>.pkl` under the fit's work directory. `settings` is the fit's `FitSettings`
(fit/run.py)."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np

from ...catalog import atomic_write_bytes
from . import local_search
from .full_stage import FULL_ITERATIONS
from ..core.objective import FitProblem, ProblemData
from .outcomes import SeedOutcome
from .progress import FitProgress, stage_note
from .refine import append_history, refine
from .search import MixedSearch, centred_probs

EMA_KEEP = 0.8  # FrankaTwin's ETA smoothing: ema = 0.8·old + 0.2·new


def _save_checkpoint(path: Path, search: MixedSearch, history: list[dict], wall_s: float, ema: float,
                     seed: int) -> None:
    state = {"search": search.state(), "history": history, "wall_s": wall_s, "ema": ema, "seed": seed}
    atomic_write_bytes(path, pickle.dumps(state, protocol=5))


def _history_row(gen: int, losses: np.ndarray, per_interval: np.ndarray, weights: np.ndarray,
                 search: MixedSearch, iter_s: float, ticks: int, ema: float | None, remaining: int) -> tuple[dict, float]:
    ema = iter_s if ema is None else EMA_KEEP * ema + (1 - EMA_KEEP) * iter_s
    best_i = int(np.argmin(np.where(np.isfinite(losses), losses, np.inf)))
    row = {
        "iter": gen,
        "min": float(np.min(losses)),
        "mean": float(np.mean(losses[np.isfinite(losses)])) if np.isfinite(losses).any() else float("inf"),
        "best": float(search.best_loss),
        "iter_s": iter_s,
        "ms_per_tick": iter_s / max(ticks, 1) * 1e3,
        "eta_s": ema * remaining,
        "per_traj_min": np.min(per_interval, axis=0).tolist(),
        "best_candidate_weighted": (weights / weights.sum() * per_interval[best_i]).tolist(),
        "sigma": search.sigma,
        "evals_per_s": len(losses) / iter_s if iter_s > 0 else float("inf"),
        "delay_probs": search.delay_probs.tolist(),
        "stage": "cma",
    }
    return row, ema


def seed_result(wd: Path, settings, seed: int, data: ProblemData, pool, progress: bool,
                 label: str, on_generation, cheap_pool_factory=None) -> SeedOutcome:
    """One seed's search and refinement (its SeedOutcome); kept
    in `seed-<seed>.pkl` once finished, so `--resume` skips finished seeds."""
    done = wd / f"seed-{seed}.pkl"
    if done.is_file():
        return pickle.loads(done.read_bytes())
    if settings.method == "local":
        return _local_result(wd, settings, seed, data, pool, progress, label, on_generation, cheap_pool_factory)
    t_start = time.perf_counter()
    best, best_loss, history, wall_before = _cma_stage(wd, settings, seed, data, pool, progress, label,
                                                       on_generation, None, settings.refine_iterations)
    result = SeedOutcome(seed=seed, best=np.asarray(best, dtype=np.float64), best_loss=float(best_loss),
                         history=history, wall_s=wall_before + time.perf_counter() - t_start, gates=None)
    atomic_write_bytes(done, pickle.dumps(result, protocol=5))
    (wd / "checkpoint.pkl").unlink(missing_ok=True)
    return result


def _local_result(wd: Path, settings, seed: int, data: ProblemData, pool, progress: bool,
                  label: str, on_generation, cheap_pool_factory) -> SeedOutcome:
    """The local-first search of one seed (fit/replay/local_search.py); CMA-ES from the best local
    point while it pays when its gates fail (fit/replay/payoff.py; rows of stage 'cma' then 'refine'
    follow in the history). The
    outcome's `jacobian` is the full stage's `error_bar_jacobian` (None when CMA-ES won)."""
    timing = wd / f"local-{seed}.wall"
    wall_before = float(timing.read_text()) if timing.is_file() else 0.0
    t_start = time.perf_counter()

    def fallback(x0: np.ndarray, delay: int, x0_loss: float, stop):
        space = settings.parameter_space
        probs = centred_probs(space.delay_choices, delay)
        init = (space.encode(x0[None])[0], probs if len(probs) > 1 else None, space.offsets_of(x0))
        best, loss, rows, _ = _cma_stage(wd, settings, seed, data, pool, progress, f"{label} cma", on_generation,
                                         init, settings.refine_iterations or FULL_ITERATIONS,
                                         stop=stop, polish_below=x0_loss)
        return best, loss, rows

    def on_stage(stage: int, stage_pool) -> None:
        atomic_write_bytes(timing, repr(wall_before + time.perf_counter() - t_start).encode())
        if on_generation is not None:
            on_generation(stage, stage_pool)

    with FitProgress(2, 0, progress, label=f"{label} local") as bar:
        best, best_loss, history, verdict, jacobian = local_search.local_seed(
            wd, settings, seed, data, pool, cheap_pool_factory, fallback, atomic_write_bytes, bar, on_stage)
    stage_note(progress, label, f"local search: {verdict}")
    result = SeedOutcome(seed=seed, best=np.asarray(best, dtype=np.float64), best_loss=float(best_loss),
                         history=[{k: v for k, v in h.items()} for h in history],
                         wall_s=wall_before + time.perf_counter() - t_start, gates=verdict, jacobian=jacobian)
    atomic_write_bytes(wd / f"seed-{seed}.pkl", pickle.dumps(result, protocol=5))
    (wd / "checkpoint.pkl").unlink(missing_ok=True)
    return result


def _cma_stage(wd: Path, settings, seed: int, data: ProblemData, pool, progress: bool, label: str,
               on_generation, init, refine_iterations: int, stop=None,
               polish_below: float = float("inf")) -> tuple[np.ndarray, float, list[dict], float]:
    """The CMA-ES generations (checkpointed each) and the LM refinement; `init` None (the box
    centre, uniform delays) or (x0, delay_probs, delay offsets (7,)). `stop(history, wall_s)`
    (fit/replay/payoff.py `cma_stop`), asked before each generation, ends the generations early when it
    returns a reason; the LM refinement then runs only if CMA-ES found a loss below
    `polish_below` (a polish of a point worse than the start does not pay). Returns (best, loss,
    history, wall before)."""
    ckpt_path = wd / "checkpoint.pkl"
    ckpt = pickle.loads(ckpt_path.read_bytes()) if ckpt_path.is_file() else None
    if ckpt is not None and ckpt.get("seed", settings.seed) != seed:
        ckpt = None  # the previous seed's last checkpoint (crash after its seed file was written)
    if ckpt is None:
        x0, probs, offsets0 = init or (None, None, None)
        sigma0 = settings.sigma0 if init is None else local_search.FALLBACK_SIGMA
        search = MixedSearch(settings.parameter_space, settings.population, seed, sigma0, x0=x0, delay_probs=probs,
                             offsets0=offsets0)
        history, wall_before, ema = [], 0.0, None
    else:
        search = MixedSearch.from_state(ckpt["search"])
        history, wall_before, ema = ckpt["history"], ckpt["wall_s"], ckpt["ema"]
    t_start = time.perf_counter()
    with FitProgress(settings.generations, search.generation, progress, label=label) as bar:
        while search.generation < settings.generations:
            why = None if stop is None else stop(history, wall_before + time.perf_counter() - t_start)
            if why is not None:
                bar.note(why)
                break
            t0 = time.perf_counter()
            proposal = search.ask()
            per_interval = pool.evaluate(proposal.params)
            losses = np.asarray(FitProblem(data).combine(per_interval))
            search.tell(proposal, losses)
            row, ema = _history_row(search.generation, losses, per_interval, data.weights, search,
                                    time.perf_counter() - t0, data.ticks_per_rollout, ema,
                                    settings.generations - search.generation)
            history.append(row)
            _save_checkpoint(ckpt_path, search, history, wall_before + time.perf_counter() - t_start, ema, seed)
            bar.update(search.generation, row["best"], row["mean"], row["sigma"], row["evals_per_s"], row["eta_s"])
            if on_generation is not None:
                on_generation(search.generation, pool)
        polish = refine_iterations if search.best_loss < polish_below else 0
        best, best_loss = _refine(settings, data, search, history, pool, bar, polish)
    return best, best_loss, history, wall_before


def _refine(settings, data: ProblemData, search: MixedSearch, history: list[dict],
            pool, bar: FitProgress, iterations: int) -> tuple[np.ndarray, float]:
    """Levenberg–Marquardt polish of the best-ever candidate (fit/replay/refine.py); history rows
    with stage 'refine' continue the iteration count."""
    if iterations <= 0:
        return search.best_params, search.best_loss
    bar.note("refining the best candidate (Levenberg–Marquardt)")
    combine = FitProblem(data).combine
    params, loss, rows = refine(pool, combine, settings.parameter_space, search.best_params,
                                search.best_loss, iterations,
                                on_iteration=lambda i, l, d: bar.note(f"refine {i} (delay {d} ms): loss {l:.4g}"))
    # the running best from CMA-ES's (delay probes may start worse)
    append_history(history, rows, data.ticks_per_rollout, stage="refine", best=search.best_loss)
    return params, loss
