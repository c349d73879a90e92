"""The fit driver: search loop, per-generation checkpoints, holdout scoring, publication.

`settings.method` chooses the search: `local` (the default, fit/local_search.py: multi-start
LM on cheap data, LM on the full data, CMA-ES only when the local result fails its gates,
checkpointed after each stage) or `cma`, described here.
With `cma`, `run_fit(lake, settings)` runs `settings.generations` generations of `MixedSearch`, each
evaluated by a pool (Ray actors by default), writing after each generation a checkpoint
(search state, RNG states, history) to `<lake>/_staging/fitwork-<fit_id>/checkpoint.pkl`
(atomically replaced). `resume_fit(lake, fit_id)` continues from it: the result is the same,
bit for bit, as an uninterrupted fit (timings aside). At the end the best-ever parameters are
scored on every train and holdout interval, its residual is compared with the noise floor of
the data (fit/adequacy.py: `adequacy_json`, `train_floor_ratio`, `holdout_floor_ratio`) and the
fit is published as `fits/fit=<fit_id>/`.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from ..catalog import Lake, atomic_write_bytes, check_id
from .adequacy import fit_adequacy_columns
from . import local_search
from .objective import FitProblem, LossScales, ProblemData, build_data
from .pool import LocalPool, RayPool, auto_chunk
from .progress import FitProgress, stage_note
from .record import FitRecord, IntervalUse, SeedResult, publish_fit
from .refine import refine
from .search import MixedSearch
from .space import ParameterSpace
from ..sim import DynamicsParams

EMA_KEEP = 0.8  # FrankaTwin's ETA smoothing: ema = 0.8·old + 0.2·new


@dataclass
class FitSettings:
    """What defines a fit's result (stored as settings_json). Changing any of these changes
    the result; `workers`, `address` and `nthread` do not."""

    train: list[str]
    holdout: list[str] = field(default_factory=list)
    space: dict = field(default_factory=lambda: ParameterSpace().to_json())
    population: int = 32
    generations: int = 20
    seed: int = 0
    sigma0: float = 0.3
    weights: dict[str, float] = field(default_factory=dict)
    q_scale_rad: float = LossScales().q_rad
    dq_scale_rad_s: float = LossScales().dq_rad_s
    max_duration_s: float | None = None
    min_duration_s: float = 0.5
    chunk: int | None = None  # rows per Ray task; None: auto_chunk(population, workers)
    model_path: str | None = None
    refine_iterations: int = 0
    seeds: int = 1  # seeded searches (seed, seed+1, ...); the best is the fit
    method: str = "local"  # 'local' (fit/local_search.py) or 'cma'
    starts: int = 3  # local: multi-start points (nominal + seeded Halton points)
    cheap_s: float = 2.0  # local: seconds of each training interval at cheap fidelity
    # the firmware's configured end-effector load for every run (EndLoad JSON, `--configured-load`);
    # None: each run's metadata's, else none
    configured_load: dict | None = None

    @property
    def configured_end_load(self):
        """`configured_load` as a twinlake.sim EndLoad (None: from each run's metadata)."""
        from ..sim.load import load_from_json

        return None if self.configured_load is None else load_from_json(self.configured_load, "configured_load")

    @property
    def parameter_space(self) -> ParameterSpace:
        return ParameterSpace.from_json(self.space)

    @property
    def scales(self) -> LossScales:
        return LossScales(self.q_scale_rad, self.dq_scale_rad_s)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


def new_fit_id(settings: FitSettings) -> str:
    """`fit-<UTC yyyymmddTHHMMSS>-<8 hex of the settings>`."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"fit-{stamp}-{settings.digest()[:8]}"


def work_dir(lake: Lake, fit_id: str) -> Path:
    """The fit's staging area holding settings.json and checkpoint.pkl while it runs."""
    return lake.staging_dir / f"fitwork-{check_id('fit', fit_id)}"


def _save_checkpoint(path: Path, search: MixedSearch, history: list[dict], wall_s: float, ema: float,
                     seed: int) -> None:
    state = {"search": search.state(), "history": history, "wall_s": wall_s, "ema": ema, "seed": seed}
    atomic_write_bytes(path, pickle.dumps(state, protocol=5))


def read_checkpoint(lake: Lake | str | Path, fit_id: str) -> tuple[FitSettings, dict | None]:
    """The settings and last checkpoint (None before generation 1) of an unfinished fit."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    wd = work_dir(lk, fit_id)
    if not (wd / "settings.json").is_file():
        raise ValueError(f"--resume {fit_id}: no unfinished fit at {wd} (finished fits are under fits/)")
    settings = FitSettings(**json.loads((wd / "settings.json").read_text()))
    ckpt = wd / "checkpoint.pkl"
    return settings, (pickle.loads(ckpt.read_bytes()) if ckpt.is_file() else None)


def _make_pool(data: ProblemData, settings: FitSettings, workers: int, address: str | None, nthread: int):
    chunk = settings.chunk or auto_chunk(settings.population, workers)
    if workers == 0:
        return LocalPool(data, chunk=chunk, nthread=nthread)
    if address is None and "ray" not in sys.modules:
        # A new local cluster: Ray enables token authentication by default and warns that it
        # did so unless RAY_AUTH_MODE is set explicitly (ray/_private/authentication/
        # authentication_token_setup.py). Choosing that same default explicitly keeps the
        # protection and drops the warning. Ray reads the mode when it is imported, hence only
        # before its first import; a user's own RAY_AUTH_MODE is left alone.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    return RayPool(data, workers, chunk=chunk, nthread=nthread, address=address)


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


def run_fit(
    lake: Lake | str | Path,
    settings: FitSettings | None = None,
    *,
    fit_id: str | None = None,
    resume: bool = False,
    workers: int = 2,
    address: str | None = None,
    nthread: int = 1,
    progress: bool = True,
    on_generation: Callable[[int, object], None] | None = None,
) -> FitRecord:
    """Run (or with `resume=True` continue) a fit and publish it.

    With `settings.seeds = N` the search runs N times (seeds s, s+1, ..., same data and
    settings) on the same workers; the seed with the lowest loss (ties: the lower seed) is the
    fit, all N are stored in seeds.parquet and give the spread. Before publishing, the error
    bars at the optimum (fit/identifiability.py: one batch of 2k+1 candidates on the same
    workers) are stored as `identifiability_json`. `on_generation(gen, pool)` is called after
    each generation's checkpoint (diagnostics and tests)."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    settings, fit_id = _start(lk, settings, fit_id, resume)
    wd = work_dir(lk, fit_id)
    data = build_data(lk, settings.train, run_weights=settings.weights, scales=settings.scales,
                      max_duration_s=settings.max_duration_s, min_duration_s=settings.min_duration_s,
                      model_path=settings.model_path, configured_load=settings.configured_end_load,
                      friction_law=settings.parameter_space.friction_law)
    if not resume:
        wd.mkdir(parents=True)
        (wd / "settings.json").write_text(json.dumps(asdict(settings), indent=2, sort_keys=True))
    pool = _make_pool(data, settings, workers, address, nthread)
    try:
        results = []
        cheap = _cheap_pool_factory(lk, settings, data, workers, address, nthread)
        for k in range(settings.seeds):
            label = fit_id if settings.seeds == 1 else f"{fit_id} seed {settings.seed + k}"
            results.append(_seed_result(wd, settings, settings.seed + k, data, pool, progress, label, on_generation,
                                        cheap))
        t0 = time.perf_counter()
        stage_note(progress, fit_id, "error bars at the optimum and scoring train and holdout intervals")
        record = _finish(lk, fit_id, settings, data, results, pool)
        record.extra["wall_s"] = float(sum(r["wall_s"] for r in results) + time.perf_counter() - t0)
    finally:
        pool.close()
    publish_fit(lk, record)
    shutil.rmtree(wd, ignore_errors=True)
    return record


def _start(lk: Lake, settings: FitSettings | None, fit_id: str | None, resume: bool) -> tuple[FitSettings, str]:
    """The settings and id of a new fit (refusing existing ids) or of the fit to resume."""
    if resume:
        if fit_id is None:
            raise ValueError("resume: give the fit id (--resume FIT)")
        return read_checkpoint(lk, fit_id)[0], fit_id
    if settings is None:
        raise ValueError("run_fit: settings are required for a new fit")
    if settings.seeds < 1:
        raise ValueError(f"--seeds {settings.seeds}: expected at least 1 seeded search")
    if settings.method not in ("local", "cma"):
        raise ValueError(f"--method {settings.method!r}: expected 'local' or 'cma'")
    if settings.method == "local" and (settings.starts < 1 or not settings.cheap_s > 0):
        raise ValueError(f"--method local: expected starts >= 1 and cheap_s > 0, got {settings.starts}, "
                         f"{settings.cheap_s}")
    fit_id = check_id("fit", fit_id or new_fit_id(settings))
    if lk.fit_dir(fit_id).exists():
        raise ValueError(f"fit {fit_id!r} already exists at {lk.fit_dir(fit_id)}")
    if work_dir(lk, fit_id).exists():
        raise ValueError(f"fit {fit_id!r} has an unfinished run at {work_dir(lk, fit_id)}: use --resume {fit_id}")
    return settings, fit_id


def _cheap_pool_factory(lk: Lake, settings: FitSettings, data: ProblemData, workers: int, address: str | None,
                        nthread: int) -> Callable:
    """() -> (pool, data) on the cheap-fidelity windows of the training intervals (local method)."""
    def make(full_pool):
        refs = local_search.cheap_windows(data.refs, settings.cheap_s)
        cheap = build_data(lk, refs, run_weights=settings.weights, scales=settings.scales,
                           model_path=settings.model_path)
        if workers == 0:
            return _make_pool(cheap, settings, workers, address, nthread), cheap
        full_pool.close()  # its actors hold the CPUs the cheap pool's actors need
        cheap_pool = _make_pool(cheap, settings, workers, address, nthread)
        close = cheap_pool.close

        def close_and_restore() -> None:
            close()
            full_pool.actors = [full_pool._new_actor() for _ in range(full_pool.workers)]
        cheap_pool.close = close_and_restore
        return cheap_pool, cheap
    return make


def _seed_result(wd: Path, settings: FitSettings, seed: int, data: ProblemData, pool, progress: bool,
                 label: str, on_generation, cheap_pool_factory=None) -> dict:
    """One seed's search and refinement: {seed, best, best_loss, history, wall_s, gates}; kept
    in `seed-<seed>.pkl` once finished, so `--resume` skips finished seeds."""
    done = wd / f"seed-{seed}.pkl"
    if done.is_file():
        return pickle.loads(done.read_bytes())
    if settings.method == "local":
        return _local_result(wd, settings, seed, data, pool, progress, label, on_generation, cheap_pool_factory)
    t_start = time.perf_counter()
    best, best_loss, history, wall_before = _cma_stage(wd, settings, seed, data, pool, progress, label,
                                                       on_generation, None, settings.refine_iterations)
    result = {"seed": seed, "best": np.asarray(best, dtype=np.float64), "best_loss": float(best_loss),
              "history": history, "wall_s": wall_before + time.perf_counter() - t_start, "gates": None}
    atomic_write_bytes(done, pickle.dumps(result, protocol=5))
    (wd / "checkpoint.pkl").unlink(missing_ok=True)
    return result


def _local_result(wd: Path, settings: FitSettings, seed: int, data: ProblemData, pool, progress: bool,
                  label: str, on_generation, cheap_pool_factory) -> dict:
    """The local-first search of one seed (fit/local_search.py); CMA-ES from the best local
    point when its gates fail (rows of stage 'cma' then 'refine' follow in the history)."""
    timing = wd / f"local-{seed}.wall"
    wall_before = float(timing.read_text()) if timing.is_file() else 0.0
    t_start = time.perf_counter()

    def fallback(x0: np.ndarray, delay: int):
        space = settings.parameter_space
        probs = np.where(space.delay_choices == delay, 0.5, 0.5 / max(len(space.delay_choices) - 1, 1))
        init = (space.encode(x0[None])[0], probs if len(probs) > 1 else None)
        best, loss, rows, _ = _cma_stage(wd, settings, seed, data, pool, progress, f"{label} cma", on_generation,
                                         init, settings.refine_iterations or local_search.FULL_ITERATIONS)
        return best, loss, rows

    def on_stage(stage: int, stage_pool) -> None:
        atomic_write_bytes(timing, repr(wall_before + time.perf_counter() - t_start).encode())
        if on_generation is not None:
            on_generation(stage, stage_pool)

    with FitProgress(2, 0, progress, label=f"{label} local") as bar:
        best, best_loss, history, verdict = local_search.local_seed(
            wd, settings, seed, data, pool, cheap_pool_factory, fallback, atomic_write_bytes, bar, on_stage)
    stage_note(progress, label, f"local search: {verdict}")
    result = {"seed": seed, "best": np.asarray(best, dtype=np.float64), "best_loss": float(best_loss),
              "history": [{k: v for k, v in h.items()} for h in history],
              "wall_s": wall_before + time.perf_counter() - t_start, "gates": verdict}
    atomic_write_bytes(wd / f"seed-{seed}.pkl", pickle.dumps(result, protocol=5))
    (wd / "checkpoint.pkl").unlink(missing_ok=True)
    return result


def _cma_stage(wd: Path, settings: FitSettings, seed: int, data: ProblemData, pool, progress: bool, label: str,
               on_generation, init, refine_iterations: int) -> tuple[np.ndarray, float, list[dict], float]:
    """The CMA-ES generations (checkpointed each) and the LM refinement; `init` None (the box
    centre, uniform delays) or (x0, delay_probs). Returns (best, loss, history, wall before)."""
    ckpt_path = wd / "checkpoint.pkl"
    ckpt = pickle.loads(ckpt_path.read_bytes()) if ckpt_path.is_file() else None
    if ckpt is not None and ckpt.get("seed", settings.seed) != seed:
        ckpt = None  # the previous seed's last checkpoint (crash after its seed file was written)
    if ckpt is None:
        x0, probs = init or (None, None)
        sigma0 = settings.sigma0 if init is None else local_search.FALLBACK_SIGMA
        search = MixedSearch(settings.parameter_space, settings.population, seed, sigma0, x0=x0, delay_probs=probs)
        history, wall_before, ema = [], 0.0, None
    else:
        search = MixedSearch.from_state(ckpt["search"])
        history, wall_before, ema = ckpt["history"], ckpt["wall_s"], ckpt["ema"]
    t_start = time.perf_counter()
    with FitProgress(settings.generations, search.generation, progress, label=label) as bar:
        while search.generation < settings.generations:
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
        best, best_loss = _refine(settings, data, search, history, pool, bar, refine_iterations)
    return best, best_loss, history, wall_before


def _refine(settings: FitSettings, data: ProblemData, search: MixedSearch, history: list[dict],
            pool, bar: FitProgress, iterations: int) -> tuple[np.ndarray, float]:
    """Levenberg–Marquardt polish of the best-ever candidate (fit/refine.py); history rows
    with stage 'refine' continue the iteration count."""
    if iterations <= 0:
        return search.best_params, search.best_loss
    bar.note("refining the best candidate (Levenberg–Marquardt)")
    combine = FitProblem(data).combine
    params, loss, rows = refine(pool, combine, settings.parameter_space, search.best_params,
                                search.best_loss, iterations,
                                on_iteration=lambda i, l, d: bar.note(f"refine {i} (delay {d} ms): loss {l:.4g}"))
    running = search.best_loss
    for row in rows:
        running = min(running, row["min"])  # best so far (delay probes may start worse)
        history.append({"iter": len(history) + 1, "stage": "refine", "min": row["min"], "mean": row["mean"],
                        "best": running, "iter_s": row["iter_s"],
                        "ms_per_tick": row["iter_s"] / max(data.ticks_per_rollout, 1) * 1e3,
                        "eta_s": 0.0, "per_traj_min": row["per_traj_min"],
                        "best_candidate_weighted": None, "sigma": None,
                        "evals_per_s": row["evaluations"] / row["iter_s"] if row["iter_s"] > 0 else None,
                        "delay_probs": None})
    return params, loss


def _finish(lk: Lake, fit_id: str, settings: FitSettings, data: ProblemData, results: list[dict],
            pool) -> FitRecord:
    """The record of the best seed: error bars at its optimum, losses per train and holdout
    interval, all seeds' results. Everything is computed before anything is published."""
    chosen = min(results, key=lambda r: (r["best_loss"], r["seed"]))
    best_vec = chosen["best"]
    seeds = [SeedResult(r["seed"], r["best_loss"], r["best"], r is chosen) for r in results]
    t0 = time.perf_counter()
    others = [r["best"] for r in results if r is not chosen]
    ident = error_bars(pool, settings, best_vec, np.stack([best_vec, *others]) if others else None)
    error_bars_s = time.perf_counter() - t0
    train_losses = pool.evaluate(best_vec[None, :])[0]
    uses = [IntervalUse(r.robot, r.run, r.interval_index, r.seq_first, r.seq_last, "train",
                        float(w), float(l), r.run_sha256)
            for r, w, l in zip(data.refs, data.weights, train_losses)]
    holdout_uses, holdout_loss, holdout_data = _holdout(lk, settings, best_vec)
    history = chosen["history"]
    adequacy = fit_adequacy_columns(data, holdout_data, best_vec)  # residual vs noise floor, diagnosed
    return FitRecord(
        fit_id=fit_id,
        fit_source="twinlake",
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="completed",
        best_loss=float(chosen["best_loss"]),
        params=DynamicsParams.from_vector(best_vec),
        seed=int(chosen["seed"]),
        settings=asdict(settings),
        history=history,
        runs=uses + holdout_uses,
        seeds=seeds,
        extra={
            "generations": int(settings.generations),
            "population": int(settings.population),
            "refine_iterations": int(sum(1 for h in history if h.get("stage") == "refine")),
            "wall_s": 0.0,  # set by run_fit
            "train_loss": float(FitProblem(data).combine(train_losses[None])[0]),
            "holdout_loss": holdout_loss,
            "at_bounds": settings.parameter_space.at_bounds(best_vec),
            "workers": int(pool.workers),
            "actor_replacements": int(pool.replacements),
            "seed_count": len(results),
            "method": settings.method,
            "local_gates": chosen.get("gates"),
            "identifiability_json": None if ident is None else ident.to_json(),
            "configured_load_json": json.dumps(data.configured_loads, sort_keys=True),
            "error_bars_s": float(error_bars_s),
            **adequacy,
        },
    )


def error_bars(pool, settings: FitSettings, best: np.ndarray, seed_optima: np.ndarray | None):
    """`identifiability_summary` at `best` (n,) over the training data held by `pool` (its
    `residuals` fan out like a generation); the same result as `identifiability_for_fit`
    on the stored record. None when no continuous parameter is free."""
    from .identifiability import DISCRETE_NAMES, identifiability_summary

    space = settings.parameter_space
    free = [n for n in space.free_names if n not in DISCRETE_NAMES]
    if not free:
        return None
    chunk = pool.chunk  # one bigger chunk per worker for the 2k+1 rows (results never depend on it)
    pool.chunk = settings.chunk or auto_chunk(2 * len(free) + 1, max(pool.workers, 1))
    try:
        return identifiability_summary(pool, best, free=space.free_names, bounds=space.bounds,
                                       seed_optima=seed_optima)
    finally:
        pool.chunk = chunk


def _holdout(lk: Lake, settings: FitSettings, best_vec: np.ndarray
             ) -> tuple[list[IntervalUse], float | None, ProblemData | None]:
    """Per-interval losses on the held-out runs (in-process), their weighted loss and data."""
    if not settings.holdout:
        return [], None, None
    hdata = build_data(lk, settings.holdout, run_weights=settings.weights, scales=settings.scales,
                       max_duration_s=settings.max_duration_s, min_duration_s=settings.min_duration_s,
                       model_path=settings.model_path, configured_load=settings.configured_end_load,
                      friction_law=settings.parameter_space.friction_law)
    hl = LocalPool(hdata, chunk=1).evaluate(best_vec[None, :])[0]
    uses = [IntervalUse(r.robot, r.run, r.interval_index, r.seq_first, r.seq_last, "holdout",
                        float(w), float(l), r.run_sha256)
            for r, w, l in zip(hdata.refs, hdata.weights, hl)]
    return uses, float(FitProblem(hdata).combine(hl[None])[0]), hdata
