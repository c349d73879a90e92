"""Running a chunk of episodes: the unit of work a worker (or the driver itself) executes.

Built-in joint impedance: the chunk's episodes share the reference and one gain set, so they
are ONE population through `twinlake.sim.PopulationEngine` (one `mujoco.batch` replay of the
whole episode per shard, the compiled control loop), scored together (campaign/outcome.py)
and then written one directory each. Plug-in controllers run episode by episode
(campaign/plugin.py). The worker publishes the episode directories itself (the lake must be
on its filesystem) and returns the summaries; for a lake the workers do not see (a bucket
lake's session on the driver's host, catalog/session.py), `run_chunk_shipped` writes them in a
directory of the worker's own and returns their files, which the driver publishes.

Anything that escapes `run_chunk` (a disk error, a lost worker) is an infrastructure failure:
the driver records it apart and a later invocation retries the episode (campaign/runner.py).
`TWINLAKE_CAMPAIGN_FAULT=kill_worker:<episode_id>:<marker file>` in the driver's environment
makes the process running that episode SIGKILL itself once (when the marker does not exist yet; it creates it): the
hook the tests use to lose a worker for real.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .episode import EpisodeSpec, episode_config, samples_bytes
from .gains import GainSet
from .outcome import GuardLimits, score
from .reference import Reference
from .store import CampaignStore

SUMMARY_SCHEMA = "twinlake.episode_summary/v1"
FAULT_ENV = "TWINLAKE_CAMPAIGN_FAULT"
_ENGINE_CACHE: dict = {}  # (reference sha, gains id, nthread) -> PopulationEngine; one per worker process


@dataclass
class ChunkJob:
    """Episodes of one gain set for one worker; `common` is the campaign part of every episode config."""

    lake_root: str
    campaign_id: str
    reference: Reference
    gains: GainSet
    specs: list[EpisodeSpec]
    common: dict
    limits: GuardLimits
    write_samples: bool = True
    controller: str | None = None
    nthread: int = 1
    fault: str = ""  # the driver's TWINLAKE_CAMPAIGN_FAULT (tests), carried to the worker
    ship_files: bool = False  # the worker does not see the lake: run_chunk_shipped


def _maybe_fault(specs: list[EpisodeSpec], text: str) -> None:
    kind, _, rest = text.partition(":")
    target, _, marker = rest.partition(":")
    if kind != "kill_worker" or not marker or target not in {s.episode_id for s in specs}:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _engine(job: ChunkJob):
    from ..sim import PopulationEngine

    key = (job.reference.sha256, job.reference.n_ticks, job.gains, job.nthread)
    if key not in _ENGINE_CACHE:
        for old in _ENGINE_CACHE.values():
            old.close()
        _ENGINE_CACHE.clear()
        _ENGINE_CACHE[key] = PopulationEngine([job.reference.replay_input(job.gains)], nthread=job.nthread)
    return _ENGINE_CACHE[key]


def _summary(spec: EpisodeSpec, config_hash: str, outcome: str, metrics: dict, job: ChunkJob,
             failure: dict | None, wall: dict) -> dict:
    return {"schema": SUMMARY_SCHEMA, "episode_id": spec.episode_id, "index": spec.index,
            "sample_index": spec.sample_index, "gains_id": spec.gains.gains_id, "seed": job.common["seed"],
            "config_hash": config_hash, "status": "ok", "outcome": outcome, "metrics": metrics,
            "parameters": spec.parameters(), "gains_columns": spec.gains.columns(),
            "controller": job.controller or "builtin", "failure": failure, "wall": wall}


def _publish(store: CampaignStore, spec: EpisodeSpec, config: dict, samples: bytes | None, summary: dict,
             started: float) -> dict | None:
    """Write one episode unless it exists already (another attempt finished it)."""
    if (store.episodes_dir / spec.episode_id).exists():
        return None
    t0 = time.perf_counter()
    summary["wall"]["total_s"] = t0 - started  # up to the write (the write's own time is in the manifest)
    store.write_episode(spec.episode_id, config, samples, summary)
    return {**summary, "write_s": time.perf_counter() - t0}


def _run_builtin(job: ChunkJob, store: CampaignStore, specs: list[EpisodeSpec]) -> list[dict]:
    t0 = time.perf_counter()
    engine = _engine(job)
    result = engine.run(np.stack([s.vector for s in specs]))[0]
    sim_s = (time.perf_counter() - t0) / len(specs)
    t1 = time.perf_counter()
    ref = job.reference
    ticks = ref.tick_targets()
    scored = score(result.q, result.dq, result.tau_cmd, ticks, ref.command_ticks, ref.targets_rad, job.limits)
    score_s = (time.perf_counter() - t1) / len(specs)
    out = []
    for p, (spec, sc) in enumerate(zip(specs, scored)):
        started = time.perf_counter()
        config, digest = episode_config(spec, job.common)
        samples = samples_bytes(ticks, result.q[p], result.dq[p], result.tau_cmd[p]) if job.write_samples else None
        wall = {"sim_s": sim_s, "score_s": score_s, "controller_s": 0.0}
        row = _publish(store, spec, config, samples, _summary(spec, digest, sc["outcome"], sc["metrics"], job, None, wall),
                       started - sim_s - score_s)
        if row is not None:
            out.append(row)
    return out


def _run_plugins(job: ChunkJob, store: CampaignStore, specs: list[EpisodeSpec]) -> list[dict]:
    from .plugin import load_factory, run_plugin_episode

    factory = load_factory(job.controller)
    ref = job.reference
    ticks = ref.tick_targets()
    out = []
    for spec in specs:
        started = time.perf_counter()
        config, digest = episode_config(spec, job.common)
        run = run_plugin_episode(factory, config, spec.vector, ticks, job.gains)
        sim_s = time.perf_counter() - started
        k = run.q.shape[0]
        keep = ref.command_ticks < k
        sc = score(run.q[None], run.dq[None], run.tau[None], run.q_target, ref.command_ticks[keep],
                   run.q_target[ref.command_ticks[keep]] if k else ref.targets_rad[:0], job.limits)[0]
        outcome = run.outcome or sc["outcome"]
        samples = samples_bytes(run.q_target, run.q, run.dq, run.tau) if job.write_samples else None
        wall = {"sim_s": sim_s - run.controller_s, "score_s": 0.0, "controller_s": run.controller_s}
        row = _publish(store, spec, config, samples, _summary(spec, digest, outcome, sc["metrics"], job, run.failure, wall),
                       started)
        if row is not None:
            out.append(row)
    return out


def run_chunk(job: ChunkJob) -> list[dict]:
    """Run and publish the chunk's episodes not yet published; returns their summaries."""
    store = CampaignStore(Path(job.lake_root), job.campaign_id)
    done = store.done()
    specs = [s for s in job.specs if s.episode_id not in done]
    if not specs:
        return []
    _maybe_fault(specs, job.fault)
    if job.controller:
        return _run_plugins(job, store, specs)
    return _run_builtin(job, store, specs)


__all__ = ["ChunkJob", "FAULT_ENV", "SUMMARY_SCHEMA", "run_chunk"]


def run_chunk_shipped(job: ChunkJob) -> tuple[list[dict], dict[str, dict[str, bytes]]]:
    """`run_chunk` into a temporary lake directory of this worker; returns the summaries and
    each published episode's files (`episode id -> file name -> bytes`) for the driver to
    publish (`CampaignStore.adopt_episode`): the worker never needs the driver's lake."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="twinlake-episodes-") as tmp:
        store = CampaignStore(Path(tmp), job.campaign_id)
        store.episodes_dir.mkdir(parents=True)
        store.tmp_dir.mkdir()
        rows = run_chunk(replace(job, lake_root=tmp, ship_files=False))
        files = {e: {p.name: p.read_bytes() for p in (store.episodes_dir / e).iterdir() if p.is_file()}
                 for e in sorted(store.done())}
    return rows, files
