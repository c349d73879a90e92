"""Benchmark: seconds per generation of a FrankaTwin-size fit on Ray, 1 and 2 workers.

Problem (FrankaTwin's v3 report): 29 parameters, population 128,
three runs of 12 s at 1 kHz (here: multisine joint-impedance recordings of the demo robot made
with the daemon's offline recorder and ingested into a temporary lake). One generation =
128 candidates × 36 000 replayed ticks, evaluated by the fit's own pool (`auto_chunk`: one
chunk of ≤ 64 candidates per Ray actor); the first generation (which also builds each actor's
batch and buffers) is timed apart from the `--generations` after it. The peer is FrankaTwin's published ≈378 s per iteration (128 envs, 3 runs,
one GPU, old sequential code) — a published figure, not re-measured here.

    python bench/fit_scale.py [--population 128] [--seconds 12] [--runs 3]
                                             [--generations 2] [--workers 1,2]

Target: ≤ 20 s per generation (a 40-generation fit in under 15 minutes).

Peer measured in the same run ("mj_step alone"): the same generation's candidates as MuJoCo
models of their own (armature, damping, breakaway level written in, as the population engine
expands them), stepped open loop by `mujoco.rollout` with `nthread` threads over the joint
torques the engine applied (delayed commands + sliding relief), i.e. the generation's steps
with no controller, no delay line, no loss sums, no Ray. Targets (issue "speed"): a generation
on `max(--workers)` workers within 1.1× of that peer, and 2 workers ≥ 1.8× one worker (on
idle cores: the bench prints the load average, which says whether they were).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the replay bench's peer

FRANKATWIN_S_PER_ITER = 378.0


def make_lake(root: Path, runs: int, seconds: float) -> list[str]:
    """Record (on the bundled demo robot) and ingest `runs` multisine runs of `seconds` each
    (twinlake.synthetic); returns their selectors."""
    from twinlake.synthetic import multisine_run, record_and_ingest

    specs = [multisine_run(f"run{i}", (0.3, 0.7, 1.3), i, seconds=seconds, amplitude_deg=12.0, ramp_s=1.0,
                           hold_s=0.0, tail_s=0.0) for i in range(runs)]
    return record_and_ingest(specs, root / "recordings", root / "lake", robot="bench")


def time_generations(data, population: int, generations: int, workers: int) -> tuple[float, float, float]:
    """(first generation's seconds, seconds per later generation, evaluations per second) with
    `workers` Ray actors. The first generation also builds each actor's batch and buffers."""
    from twinlake.fit.core.pool import RayPool, auto_chunk
    from twinlake.fit.replay.search import MixedSearch
    from twinlake.fit.core.space import ParameterSpace

    pool = RayPool(data, workers, chunk=auto_chunk(population, workers))
    try:
        search = MixedSearch(ParameterSpace(), population, seed=0)
        pool.evaluate(search.ask().params[:workers])  # actors started, data loaded, kernels compiled
        started = time.perf_counter()
        prop = search.ask()
        search.tell(prop, pool.evaluate(prop.params) @ data.weights / data.weights.sum())
        first = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(generations):
            prop = search.ask()
            losses = pool.evaluate(prop.params) @ data.weights / data.weights.sum()
            search.tell(prop, losses)
        per_gen = (time.perf_counter() - started) / generations
    finally:
        pool.close()
    return first, per_gen, population / per_gen


def time_mj_step_alone(data, params, nthread: int) -> tuple[float, int]:
    """(seconds, steps) of the peer: every interval's candidates stepped open loop by
    mujoco.rollout over the torques the population engine applied to them (bench/replay.py's
    construction), in chunks of 32 candidates (the rollout's state output stays small)."""
    from replay import applied_torques, candidate_models, rollout_seconds

    from twinlake.sim import PopulationEngine, load_model

    model = load_model()
    seconds, steps = 0.0, 0
    for inp in data.inputs:
        engine = PopulationEngine([inp], model=model, nthread=nthread, friction_law=data.friction_law)
        for lo in range(0, len(params), 32):
            chunk = params[lo:lo + 32]
            result = engine.run(chunk)[0]
            tau = applied_torques(chunk, result.tau_cmd, result.dq)
            seconds += rollout_seconds(candidate_models(model, chunk), tau, nthread, inp.q0, inp.dq0)
            steps += len(chunk) * inp.n_ticks
    return seconds, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--generations", type=int, default=2, help="timed generations after the first")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()

    os.environ.setdefault("RAY_AUTH_MODE", "token")  # chosen explicitly: no start-up warning (docs/ray.md)
    import ray

    from twinlake.fit.core.objective import build_data

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        selectors = make_lake(root, args.runs, args.seconds)
        data = build_data(root / "lake", selectors)
        print(f"data: {args.runs} runs × {args.seconds:g} s, {data.ticks_per_rollout} ticks per candidate "
              f"(recorded + ingested in {time.perf_counter() - t0:.1f} s)")
        worker_counts = [int(w) for w in args.workers.split(",")]
        ray.init(num_cpus=max(worker_counts), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        results = {}
        for w in worker_counts:
            first, per_gen, evals = time_generations(data, args.population, args.generations, w)
            results[w] = per_gen
            print(f"{w} worker(s): {per_gen:7.1f} s/generation (first {first:.1f} s), {evals:6.2f} evals/s, "
                  f"{args.population * data.ticks_per_rollout / per_gen / 1e3:7.1f} k candidate-ticks/s, "
                  f"40 generations ≈ {(first + 39 * per_gen) / 60:.1f} min")
        ray.shutdown()
        from twinlake.fit.replay.search import MixedSearch
        from twinlake.fit.core.space import ParameterSpace

        peer_params = MixedSearch(ParameterSpace(), args.population, seed=0).ask().params
        peer_s, peer_steps = time_mj_step_alone(data, peer_params, max(worker_counts))
        print(f"mj_step alone (mujoco.rollout, {max(worker_counts)} threads, open loop): {peer_s:.1f} s for "
              f"{peer_steps / 1e6:.2f} M steps ({peer_steps / peer_s / 1e3:.1f} k steps/s)")
        print(f"generation on {max(worker_counts)} workers / mj_step alone: "
              f"{results[max(worker_counts)] / peer_s:.2f}× (target ≤ 1.1×)")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (cores: {os.cpu_count()})")
    best = min(results.values())
    print(f"FrankaTwin (published, 128 envs × 3 runs, GPU): {FRANKATWIN_S_PER_ITER:.0f} s/iteration")
    print(f"ratio FrankaTwin / twinlake (best of {sorted(results)} workers): {FRANKATWIN_S_PER_ITER / best:.2f}×; "
          f"target ≤ 20 s/generation: {'met' if best <= 20 else 'NOT met'} ({best:.1f} s)")
    if len(results) > 1:
        ws = sorted(results)
        print(f"scaling {ws[0]}→{ws[-1]} workers: {results[ws[0]] / results[ws[-1]]:.2f}× (target ≥ 1.8× for 1→2)")


if __name__ == "__main__":
    main()
