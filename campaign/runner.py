"""The campaign driver: validate everything, plan the episodes, run what is missing, keep the
run-level files (docs/campaigns.md).

One invocation (`run_campaign`):
1. checks its inputs before any episode runs: the fit (and its error bars for
   `--sample posterior`), the ranges against the parameter bounds, the reference's preflight,
   the plug-in's import, and the nominal episode (the reference replayed once on the fit's own
   parameters, campaign/nominal.py: if it aborts, the campaign refuses to start unless
   `allow_aborting_reference`); a ValueError names the problem;
2. opens `<lake>/campaigns/campaign=<id>/` (creating it, or checking that the configuration
   is the one it was created with) and empties `_tmp/`;
3. runs the episodes without a published directory (earlier infrastructure failures
   included) in chunks of one gain set: in this process (`workers=0`) or as Ray tasks
   (`workers ≥ 1`, a local cluster, or `address`); a chunk that fails for any reason outside
   an episode (a worker lost, a disk error) goes to `infrastructure_errors/` and is retried by
   the next invocation, never in this one;
4. appends the finished episodes to summary.jsonl as chunks finish, rebuilds summary.csv /
   summary.parquet, writes manifest_<run_id>.json.

Killing the driver at any point loses at most the chunks in flight: their directories are
either published or left under `_tmp/` (removed by the next invocation).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..catalog import Lake, is_session, sha256_file

from .episode import EpisodeSpec, episode_config, plan_episodes
from .execution import FAULT_ENV, ChunkJob, run_chunk, run_chunk_shipped
from .gains import GainSet, base_gains, gains_grid
from ..daemon.guards import DEFAULT_TRACKING_RULE

from .nominal import check_nominal, nominal_episode
from .outcome import DEFAULT_TRACKING_LIMIT_RAD, GuardLimits
from .reference import Reference, from_csv, from_run
from .sampling import POSTERIOR, SAMPLE_MODES, ParameterDistribution, declared, parse_ranges, posterior
from .store import CampaignStore, canonical_json, flat_row, sha256_text

CAMPAIGN_SCHEMA = "twinlake.campaign/v1"
DEFAULT_CHUNK = 32


@dataclass
class CampaignRequest:
    """What `twinlake campaign run` was asked (units in the names; None = default)."""

    fit: str
    episodes: int
    reference_csv: str | None = None
    run: str | None = None
    sample: str = POSTERIOR
    ranges: str | None = None
    kp: list[float] | None = None
    kd: list[float] | None = None
    filter_alpha: float | None = None
    gains_grid: str | None = None
    controller: str | None = None
    seed: int = 0
    campaign_id: str | None = None
    samples: str = "parquet"  # parquet | none
    tail_s: float = 1.0
    tracking_limit_rad: float = DEFAULT_TRACKING_LIMIT_RAD
    speed_limit_rad_s: float | None = None
    chunk_episodes: int = DEFAULT_CHUNK
    tracking_rule: str = DEFAULT_TRACKING_RULE
    allow_aborting_reference: bool = False


@dataclass
class PreparedCampaign:
    """A validated campaign: its id, config (campaign.json), inputs and episodes."""

    campaign_id: str
    config: dict
    config_hash: str
    reference: Reference
    distribution: ParameterDistribution
    gain_sets: list[GainSet]
    specs: list[EpisodeSpec]
    limits: GuardLimits
    fit_sha256: str
    request: CampaignRequest


@dataclass
class CampaignReport:
    """What one invocation did."""

    campaign_id: str
    run_id: str
    planned: int
    already_done: int
    ran: int
    infrastructure_errors: int
    total_done: int
    outcomes: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    path: Path | None = None
    nominal: dict | None = None  # the nominal episode (campaign/nominal.py)


def _distribution(lake: Lake, req: CampaignRequest):
    """(the episodes' distribution, the fit's sha256, the fit's own parameter vector)."""
    from ..fit.reports.export import randomization_doc
    from ..fit.records.record import load_fit

    rec = load_fit(lake, req.fit)
    fit_sha = sha256_file(rec.path / "fit.parquet")
    if req.sample not in SAMPLE_MODES:
        raise ValueError(f"--sample {req.sample!r}: expected one of {', '.join(SAMPLE_MODES)}")
    if req.sample == POSTERIOR:
        if req.ranges:
            raise ValueError("--ranges is for --sample ranges (the posterior comes from the fit)")
        return posterior(randomization_doc(rec)), fit_sha, rec.vector
    if not req.ranges:
        raise ValueError("--sample ranges needs --ranges SPEC (e.g. 'mu_static=0.5:1.5;delay=0:2')")
    return declared(parse_ranges(req.ranges), rec.vector), fit_sha, rec.vector


def _reference(lake: Lake, req: CampaignRequest) -> Reference:
    if (req.reference_csv is None) == (req.run is None):
        raise ValueError("give exactly one of --reference reference.csv or --run [ROBOT/]RUN")
    if req.reference_csv is not None:
        return from_csv(req.reference_csv, tail_s=req.tail_s, speed_limit_rad_s=req.speed_limit_rad_s)
    return from_run(lake, req.run, tail_s=req.tail_s, speed_limit_rad_s=req.speed_limit_rad_s)


def _gain_sets(req: CampaignRequest) -> list[GainSet]:
    base = base_gains(req.kp, req.kd, req.filter_alpha)
    return gains_grid(req.gains_grid, base) if req.gains_grid else [base]


def prepare(lake: Lake | str | Path, req: CampaignRequest) -> PreparedCampaign:
    """Validate every input and plan the episodes (nothing is written)."""
    lake = lake if isinstance(lake, Lake) else Lake(Path(lake))
    if req.episodes < 1:
        raise ValueError(f"--episodes: expected >= 1, got {req.episodes}")
    if req.samples not in ("parquet", "none"):
        raise ValueError(f"--samples {req.samples!r}: expected parquet or none")
    if req.chunk_episodes < 1:
        raise ValueError(f"--chunk: expected >= 1, got {req.chunk_episodes}")
    if not req.tracking_limit_rad > 0:
        raise ValueError(f"--tracking-limit: expected > 0 rad, got {req.tracking_limit_rad}")
    distribution, fit_sha, fit_vector = _distribution(lake, req)
    reference = _reference(lake, req)
    gain_sets = _gain_sets(req)
    if req.controller:
        from .plugin import check_plugin_parameters, load_factory

        load_factory(req.controller)
        check_plugin_parameters(distribution, fit_vector)
    limits = GuardLimits(req.tracking_limit_rad, reference.speed_limit_rad_s, req.tracking_rule)
    limits.bounds()  # ValueError naming a bad rule or bound
    nominal = nominal_episode(reference, gain_sets[0], fit_vector, limits)
    check_nominal(nominal, req.allow_aborting_reference, reference.source)
    config = {"schema": CAMPAIGN_SCHEMA, "fit": req.fit, "fit_sha256": fit_sha, "reference": reference.to_dict(),
              "sample": req.sample, "ranges": req.ranges, "distribution": distribution.to_dict(),
              "gain_sets": [g.to_dict() for g in gain_sets], "controller": req.controller or "builtin",
              "episodes_per_gain_set": req.episodes, "seed": int(req.seed), "samples": req.samples,
              "guards": asdict(limits), "nominal_reference": nominal,
              "allow_aborting_reference": bool(req.allow_aborting_reference)}
    digest = sha256_text(canonical_json(config))
    campaign_id = req.campaign_id or f"c-{digest[:12]}"
    specs = plan_episodes(distribution, req.seed, req.episodes, gain_sets)
    return PreparedCampaign(campaign_id, config, digest, reference, distribution, gain_sets, specs, limits, fit_sha, req)


def _common(prep: PreparedCampaign) -> dict:
    """The campaign settings every episode config carries (no campaign id: same bytes under any id)."""
    c = prep.config
    return {"fit": c["fit"], "fit_sha256": c["fit_sha256"], "reference": c["reference"], "sample": c["sample"],
            "controller": c["controller"], "seed": c["seed"], "guards": c["guards"], "samples": c["samples"]}


def _jobs(lake: Lake, prep: PreparedCampaign, todo: list[EpisodeSpec], nthread: int) -> list[ChunkJob]:
    jobs, chunk = [], prep.request.chunk_episodes
    common = _common(prep)
    for gains in prep.gain_sets:
        mine = [s for s in todo if s.gains.gains_id == gains.gains_id]
        for start in range(0, len(mine), chunk):
            jobs.append(ChunkJob(str(lake.root), prep.campaign_id, prep.reference, gains, mine[start:start + chunk],
                                 common, prep.limits, prep.request.samples == "parquet", prep.request.controller,
                                 nthread, os.environ.get(FAULT_ENV, ""), is_session(lake.root)))
    return jobs


def _record_failure(store: CampaignStore, job: ChunkJob, exc: BaseException, common: dict) -> int:
    """Every episode of a failed chunk not published goes to infrastructure_errors/; returns the count."""
    done, count = store.done(), 0
    ms = int(time.time() * 1000)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for spec in job.specs:
        if spec.episode_id in done:
            continue
        config, digest = episode_config(spec, common)
        store.write_infrastructure_error(spec.episode_id, config, {
            "schema": "twinlake.episode_summary/v1", "episode_id": spec.episode_id, "index": spec.index,
            "config_hash": digest, "status": "infrastructure_error",
            "failure": {"category": type(exc).__name__, "traceback": text}}, ms)
        count += 1
    return count


def _execute(store: CampaignStore, jobs: list[ChunkJob], workers: int, address: str | None, on_rows) -> int:
    """Run the jobs; `on_rows(rows)` per finished chunk; returns the infrastructure error count."""
    errors = 0
    if workers <= 0 and not address:
        for job in jobs:
            try:
                on_rows(run_chunk(job))
            except Exception as exc:  # noqa: BLE001  outside an episode: infrastructure
                errors += _record_failure(store, job, exc, job.common)
        return errors
    if address is None and "ray" not in sys.modules:
        # a new local cluster: choose Ray's default token authentication explicitly, before
        # Ray's first import, as fit/run.py does (docs/ray.md); a user's own setting is kept
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    from ..fit.core.pool import ensure_ray

    started_here = not ray.is_initialized()
    ensure_ray(address, None if address else max(1, workers))
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_chunk)
        shipped = ray.remote(num_cpus=1, max_retries=0)(run_chunk_shipped)
        queue, running = list(jobs), {}
        inflight = max(1, workers) * 2
        while queue or running:
            while queue and len(running) < inflight:
                job = queue.pop(0)
                running[(shipped if job.ship_files else task).remote(job)] = job
            ready, _ = ray.wait(list(running), num_returns=1)
            job = running.pop(ready[0])
            try:
                on_rows(_adopted(store, job, ray.get(ready[0])))
            except Exception as exc:  # noqa: BLE001  a lost worker, a failed task: infrastructure
                errors += _record_failure(store, job, exc, job.common)
    finally:
        if started_here:
            ray.shutdown()
    return errors


def _adopted(store: CampaignStore, job: ChunkJob, result) -> list[dict]:
    """A task's summaries; a shipped task's episode files are published here first."""
    if not job.ship_files:
        return result
    rows, files = result
    for episode_id, episode_files in files.items():
        store.adopt_episode(episode_id, episode_files)
    return rows


def _environment(workers: int, address: str | None) -> dict:
    import mujoco
    import numpy

    return {"python": sys.version.split()[0], "platform": platform.platform(), "host": socket.gethostname(),
            "numpy": numpy.__version__, "mujoco": mujoco.__version__, "workers": workers, "address": address,
            "pid": os.getpid()}


def run_campaign(lake: Lake | str | Path, req: CampaignRequest, *, workers: int = 0, address: str | None = None,
                 progress=None, nthread: int = 1) -> CampaignReport:
    """Run (or resume) a campaign; returns what this invocation did."""
    lake = lake if isinstance(lake, Lake) else Lake(Path(lake))
    started, started_utc = time.perf_counter(), datetime.now(timezone.utc)
    prep = prepare(lake, req)
    store = CampaignStore(lake, prep.campaign_id)
    row = {"campaign_id": prep.campaign_id, "fit": req.fit, "sample": req.sample, "controller": prep.config["controller"],
           "episodes_per_gain_set": req.episodes, "gain_sets": len(prep.gain_sets), "episodes": len(prep.specs),
           "seed": int(req.seed), "reference": prep.reference.source, "reference_sha256": prep.reference.sha256,
           "config_hash": prep.config_hash, "created_utc": started_utc.isoformat(), "config_json": canonical_json(prep.config)}
    store.lock()
    try:
        return _run_locked(store, prep, req, row, started, started_utc, workers, address, progress, nthread)
    finally:
        store.unlock()


def _run_locked(store: CampaignStore, prep: PreparedCampaign, req: CampaignRequest, row: dict, started: float,
                started_utc: datetime, workers: int, address: str | None, progress, nthread: int) -> CampaignReport:
    lake = store.lake
    store.open(prep.config, row)
    run_id = f"{started_utc.strftime('%Y%m%dT%H%M%S%fZ')}-{os.getpid()}"
    done = store.done()
    todo = [s for s in prep.specs if s.episode_id not in done]
    finished: list[dict] = []

    def on_rows(rows: list[dict]) -> None:
        store.append_jsonl([{**flat_row(r), "run_id": run_id} for r in rows])
        finished.extend(rows)
        if progress is not None:
            progress(len(done) + len(finished), len(prep.specs))

    errors = _execute(store, _jobs(lake, prep, todo, nthread), workers, address, on_rows)
    total = store.rebuild_tables()
    outcomes: dict[str, int] = {}
    for s in store.summaries():
        outcomes[s["outcome"]] = outcomes.get(s["outcome"], 0) + 1
    report = CampaignReport(prep.campaign_id, run_id, len(prep.specs), len(done), len(finished), errors, total,
                            dict(sorted(outcomes.items())), time.perf_counter() - started, store.root,
                            prep.config["nominal_reference"])
    store.write_manifest(run_id, {
        "schema": "twinlake.campaign_manifest/v1", "campaign": prep.campaign_id, "run_id": run_id,
        "started_utc": started_utc.isoformat(), "finished_utc": datetime.now(timezone.utc).isoformat(),
        "config_hash": prep.config_hash,
        "inputs": {"fit": req.fit, "fit_sha256": prep.fit_sha256, "reference": prep.reference.source,
                   "reference_sha256": prep.reference.sha256, "controller": prep.config["controller"]},
        "environment": _environment(workers, address),
        "counts": {"planned": report.planned, "already_done": report.already_done, "ran": report.ran,
                   "infrastructure_errors": errors, "total_done": total, "outcomes": report.outcomes},
        "config_hashes": {r["episode_id"]: r["config_hash"] for r in finished},
        "episode_wall_s": {r["episode_id"]: {**r["wall"], "write_s": r.get("write_s")} for r in finished},
        "wall_s": report.wall_s})
    return report


__all__ = ["CAMPAIGN_SCHEMA", "CampaignReport", "CampaignRequest", "PreparedCampaign", "prepare", "run_campaign"]
