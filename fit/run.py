"""The fit driver: search loop, per-generation checkpoints, holdout scoring, publication.

`settings.method` chooses the search: `local` (the default, fit/replay/local_search.py: multi-start
LM on cheap data, LM on the full data, CMA-ES only when the local result fails its gates,
checkpointed after each stage) or `cma`, described here.
With `cma`, `run_fit(lake, settings)` runs `settings.generations` generations of `MixedSearch`, each
evaluated by a pool (Ray actors by default), writing after each generation a checkpoint
(search state, RNG states, history) to `<lake>/_staging/fitwork-<fit_id>/checkpoint.pkl`
(atomically replaced). `run_fit(lake, fit_id=…, resume=True)` continues from it: the result is the same,
bit for bit, as an uninterrupted fit (timings aside). At the end the best-ever parameters are
scored on every train and holdout interval, its residual is compared with the noise floor of
the data (fit/trust/adequacy.py: `adequacy_json`, `train_floor_ratio`, `holdout_floor_ratio`) and the
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
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import FitError, RecordError, SettingError
from ..catalog import Lake, check_id, current_version
from .trust.adequacy import fit_adequacy_columns
from .replay import local_search
from .core.objective import FitProblem, LossScales, ProblemData, build_data
from .replay.payoff import EXPLORE_S
from .core.pool import LocalPool, RayPool, auto_chunk
from .replay.progress import stage_note
from .records.extras import ReplayExtras
from .records.record import FitRecord, IntervalUse, SeedResult, publish_fit
from .replay.outcomes import JacobianSnapshot, SeedOutcome
from .replay.seed_search import seed_result
from .core.space import ParameterSpace
from ..sim import LAYOUT, DynamicsParams

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
    chunk: int | None = None  # rows per Ray task; None: auto_chunk of each batch (in-process: of population)
    model_path: str | None = None
    refine_iterations: int = 0
    seeds: int = 1  # seeded searches (seed, seed+1, ...); the best is the fit
    method: str = "local"  # 'local' (fit/replay/local_search.py) or 'cma'
    starts: int = 3  # local: multi-start points (nominal + seeded Halton points)
    cheap_s: float = 2.0  # local: seconds of each training interval at cheap fidelity
    explore_s: float = EXPLORE_S  # local: wall-seconds budget of the exploration after a failed gate (0: none)
    # the firmware's configured end-effector load for every run (EndLoad JSON, `--configured-load`);
    # None: each run's metadata's, else none
    configured_load: dict | None = None
    # `fit run --start-from FIT`: the local search's first start is that fit's parameters
    start_from: str | None = None
    start_params: list[float] | None = None
    # local: noisy replays at the optimum measuring the closed loop's noise bias and spread
    # (fit/core/loop_noise.py); 0: none (the error bars from the measurement noise alone)
    loop_noise_draws: int = 16
    # local: each interval checked against the loss at two and four times its half-width, widened to the
    # profile where the loss rises less than the linear model says (fit/core/profile_check.py)
    profile_check: bool = True

    @property
    def configured_end_load(self):
        """`configured_load` as a twinlake.sim EndLoad (None: from each run's metadata)."""
        from ..sim.arm_model.load import load_from_json

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


def read_checkpoint(lake: Lake | str | Path, fit_id: str) -> tuple[FitSettings, dict | None]:
    """The settings and last checkpoint (None before generation 1) of an unfinished fit."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    wd = work_dir(lk, fit_id)
    if not (wd / "settings.json").is_file():
        raise SettingError("resume", fit_id, f"no unfinished fit at {wd} (finished fits are under fits/)")
    settings = FitSettings(**json.loads((wd / "settings.json").read_text()))
    ckpt = wd / "checkpoint.pkl"
    return settings, (pickle.loads(ckpt.read_bytes()) if ckpt.is_file() else None)


def _make_pool(data: ProblemData, settings: FitSettings, workers: int, address: str | None, nthread: int,
               extra: dict[str, ProblemData] | None = None):
    """The fit's pool on `data` (and the `extra` data sets, `pool.view(name)`)."""
    if workers == 0:
        return LocalPool(data, chunk=settings.chunk or auto_chunk(settings.population, workers), nthread=nthread,
                         extra=extra)
    if address is None and "ray" not in sys.modules:
        # A new local cluster: Ray enables token authentication by default and warns that it
        # did so unless RAY_AUTH_MODE is set explicitly (ray/_private/authentication/
        # authentication_token_setup.py). Choosing that same default explicitly keeps the
        # protection and drops the warning. Ray reads the mode when it is imported, hence only
        # before its first import; a user's own RAY_AUTH_MODE is left alone.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    return RayPool(data, workers, chunk=settings.chunk, nthread=nthread, address=address, extra=extra)


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
    bars at the optimum (fit/trust/identifiability.py: one batch of 2k+1 candidates on the same
    workers; a local-search fit reuses its last full-data LM Jacobian instead,
    `reused_error_bars`) are stored as `identifiability_json`. `on_generation(gen, pool)` is called after
    each generation's checkpoint (diagnostics and tests)."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    settings, fit_id = _start(lk, settings, fit_id, resume)
    wd = work_dir(lk, fit_id)
    version_now = current_version(lk)  # before reading: the lake as this fit reads it
    data = build_data(lk, settings.train, run_weights=settings.weights, scales=settings.scales,
                      max_duration_s=settings.max_duration_s, min_duration_s=settings.min_duration_s,
                      model_path=settings.model_path, configured_load=settings.configured_end_load,
                      friction_law=settings.parameter_space.friction_law)
    if not resume:
        wd.mkdir(parents=True)
        (wd / "settings.json").write_text(json.dumps(asdict(settings), indent=2, sort_keys=True))
        (wd / "lake_version").write_text(str(version_now))
    lake_version = int((wd / "lake_version").read_text()) if (wd / "lake_version").is_file() else version_now
    cheap = _cheap_data(lk, settings, data) if settings.method == "local" else None
    pool = _make_pool(data, settings, workers, address, nthread, None if cheap is None else {"cheap": cheap})
    try:
        results = []
        for k in range(settings.seeds):
            label = fit_id if settings.seeds == 1 else f"{fit_id} seed {settings.seed + k}"
            results.append(seed_result(wd, settings, settings.seed + k, data, pool, progress, label, on_generation,
                                        lambda p: (p.view("cheap"), cheap)))
        t0 = time.perf_counter()
        stage_note(progress, fit_id, "error bars at the optimum and scoring train and holdout intervals")
        record = _finish(lk, fit_id, settings, data, results, pool)
        record.extra = replace(ReplayExtras.from_json(record.extra), lake_version=lake_version,
                               wall_s=float(sum(r.wall_s for r in results) + time.perf_counter() - t0)).to_json()
    finally:
        pool.close()
    publish_fit(lk, record)
    shutil.rmtree(wd, ignore_errors=True)
    return record


def _start(lk: Lake, settings: FitSettings | None, fit_id: str | None, resume: bool) -> tuple[FitSettings, str]:
    """The settings and id of a new fit (refusing existing ids) or of the fit to resume."""
    if resume:
        if fit_id is None:
            raise SettingError("resume", None, "give the id of the fit to resume")
        return read_checkpoint(lk, fit_id)[0], fit_id
    if settings is None:
        raise FitError("run_fit: settings are required for a new fit")
    if settings.seeds < 1:
        raise SettingError("seeds", str(settings.seeds), "expected at least 1 seeded search")
    if settings.method not in ("local", "cma"):
        raise SettingError("method", repr(settings.method), "expected 'local' or 'cma'")
    if settings.loop_noise_draws < 0 or settings.loop_noise_draws == 1:
        raise SettingError("loop_noise_draws", str(settings.loop_noise_draws), "expected 0 (off) or at least 2 draws")
    if settings.method == "local" and (settings.starts < 1 or not settings.cheap_s > 0 or not settings.explore_s >= 0):
        raise SettingError("method", "local", f"expected starts >= 1, cheap_s > 0 and explore_s >= 0, got {settings.starts}, "
                         f"{settings.cheap_s}, {settings.explore_s}")
    fit_id = check_id("fit", fit_id or new_fit_id(settings))
    if lk.fit_dir(fit_id).exists():
        raise RecordError(f"fit {fit_id!r} already exists at {lk.fit_dir(fit_id)}")
    if work_dir(lk, fit_id).exists():
        raise SettingError("resume", None, f"fit {fit_id!r} has an unfinished run at {work_dir(lk, fit_id)}: resume it")
    return settings, fit_id


def _cheap_data(lk: Lake, settings: FitSettings, data: ProblemData) -> ProblemData:
    """The cheap-fidelity windows of the training intervals (local method); the pool's actors
    hold them beside the full data (`pool.view("cheap")`), so the actors start once."""
    refs = local_search.cheap_windows(data.refs, settings.cheap_s)
    return build_data(lk, refs, run_weights=settings.weights, scales=settings.scales, model_path=settings.model_path,
                      configured_load=settings.configured_end_load, friction_law=settings.parameter_space.friction_law)


def _finish(lk: Lake, fit_id: str, settings: FitSettings, data: ProblemData, results: list[SeedOutcome],
            pool) -> FitRecord:
    """The record of the best seed: error bars at its optimum, losses per train and holdout
    interval, all seeds' results. Everything is computed before anything is published."""
    chosen = min(results, key=lambda r: (r.best_loss, r.seed))
    best_vec = chosen.best
    seeds = [SeedResult(r.seed, r.best_loss, r.best, r is chosen) for r in results]
    t0 = time.perf_counter()
    others = [r.best for r in results if r is not chosen]
    seed_optima = np.stack([best_vec, *others]) if others else None
    jac = chosen.jacobian
    ident = error_bars(pool, settings, best_vec, seed_optima, data) if jac is None else \
        reused_error_bars(settings, best_vec, float(chosen.best_loss), jac, seed_optima)
    error_bars_s = time.perf_counter() - t0 + (0.0 if jac is None else float(jac.seconds))
    kept = None if jac is None else jac.per_interval
    train_losses = pool.evaluate(best_vec[None, :])[0] if kept is None else np.asarray(kept)
    uses = [IntervalUse(r.robot, r.run, r.interval_index, r.seq_first, r.seq_last, "train",
                        float(w), float(l), r.run_sha256)
            for r, w, l in zip(data.refs, data.weights, train_losses)]
    holdout_uses, holdout_loss, holdout_data = _holdout(lk, settings, best_vec)
    history = chosen.history
    adequacy = fit_adequacy_columns(data, holdout_data, best_vec)  # residual vs noise floor, diagnosed
    return FitRecord(
        fit_id=fit_id,
        fit_source="twinlake",
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="completed",
        best_loss=float(chosen.best_loss),
        params=DynamicsParams.from_vector(best_vec),
        seed=int(chosen.seed),
        settings=asdict(settings),
        history=history,
        runs=uses + holdout_uses,
        seeds=seeds,
        extra=ReplayExtras(
            generations=int(settings.generations),
            population=int(settings.population),
            refine_iterations=int(sum(1 for h in history if h.get("stage") == "refine")),
            wall_s=0.0,  # set by run_fit
            train_loss=float(FitProblem(data).combine(train_losses[None])[0]),
            holdout_loss=holdout_loss,
            at_bounds=settings.parameter_space.at_bounds(best_vec),
            workers=int(pool.workers),
            actor_replacements=int(pool.replacements),
            seed_count=len(results),
            method=settings.method,
            local_gates=chosen.gates,
            identifiability_json=None if ident is None else ident.to_json(),
            configured_load_json=json.dumps(data.configured_loads, sort_keys=True),
            error_bars_s=float(error_bars_s),
            **adequacy,
        ).to_json(),
    )


def error_bars(pool, settings: FitSettings, best: np.ndarray, seed_optima: np.ndarray | None,
               data: ProblemData | None = None):
    """`identifiability_summary` at `best` (n,) over the training data held by `pool` (its
    `residuals` fan out like a generation; `data`: the same data, for the residuals' tick
    layout of the HAC covariance); the same result as `identifiability_for_fit` on the stored
    record. None when no continuous parameter is free."""
    from .core.covariance import replay_segments
    from .trust.identifiability import DISCRETE_NAMES, identifiability_summary

    space = settings.parameter_space
    free = [n for n in space.free_names if n not in DISCRETE_NAMES]
    if not free:
        return None
    chunk = pool.chunk  # one bigger chunk per worker for the 2k+1 rows (results never depend on it)
    pool.chunk = settings.chunk or auto_chunk(2 * len(free) + 1, max(pool.workers, 1))
    try:
        segments = None if data is None else replay_segments([len(inp.q_ref) for inp in data.inputs])
        return identifiability_summary(pool, best, free=space.free_names, bounds=space.bounds,
                                       seed_optima=seed_optima, segments=segments)
    finally:
        pool.chunk = chunk


def reused_error_bars(settings: FitSettings, best: np.ndarray, loss: float, jac: JacobianSnapshot,
                      seed_optima: np.ndarray | None):
    """The error bars of a local-search fit from its last full-data LM iteration's Jacobian
    (fit/replay/full_stage.py `error_bar_jacobian`: forward differences, step 1e-3 of each range, at
    the point that iteration's step started from), σ² from the fit's loss (Σ r² = loss); the
    HAC covariance from that iteration's per-tick scores (a checkpoint without them: Gauss–Newton)."""
    from .core.loop_noise import WITHOUT
    from .core.profile_check import WITHOUT_CHECK
    from .trust.identifiability import analyse_scaled

    space = settings.parameter_space
    where = "at the point its step started from" if jac.moved else "at the optimum"
    main, alternatives = jac.covariances(loss)
    loop = jac.loop_noise if main is not None else None
    check = jac.profile_check if main is not None else None
    if check is not None:
        alternatives = {**alternatives, WITHOUT_CHECK: main}
        main = check.widen(main)
    res = analyse_scaled(LAYOUT.names, best, jac.r_factor, loss, jac.rows, space.free_indices,
                         space.bounds[:, 0], space.bounds[:, 1], seed_optima,
                         jacobian=f"forward differences of the last full-data LM iteration, {where}",
                         covariance=main, alternatives=alternatives)
    free = space.free_indices
    ranges = space.bounds[free, 1] - space.bounds[free, 0]
    if loop is not None:
        without = analyse_scaled(LAYOUT.names, best, jac.r_factor, loss, jac.rows, free, space.bounds[:, 0],
                                 space.bounds[:, 1], covariance=alternatives[WITHOUT])
        res.loop_noise = {**loop.to_json(ranges), "unidentifiable_without": without.flagged("unidentifiable")}
    if check is not None:
        res.profile_check = check.to_json([LAYOUT.names[i] for i in free], ranges)
    return res


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
