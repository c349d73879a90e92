"""Benchmark: a randomisation campaign against the bare population replay of the same ticks.

A multisine excitation reference planned so that an episode (reference plus its 1 s tail)
lasts about `--seconds`, a fit at the demo robot's parameters with error bars, `--episodes` posterior episodes through
`twinlake campaign run`'s code path (`run_campaign`, `--workers` Ray workers, `--chunk`
episodes per batch, `--samples none|parquet`). The baseline replays the same number of
episodes of the same ticks with `PopulationEngine.run` in this process (nthread = workers,
chunks of `--chunk`), nothing else: no sampling, scoring, files or Ray. Prints episodes/s of
both, their ratio, the campaign's wall time split and its size on disk.

    python bench/campaign.py [--episodes 1000] [--seconds 10] [--workers 2] [--chunk 32]
                             [--samples none] [--baseline-episodes 128] [--keep DIR]

Target (docs/campaigns.md): 1000 episodes of 10 s on 2 cores in <= 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "campaign"))

from campaign_inputs import FIT_ID, make_fit  # noqa: E402  the tests' fixture makers
from twinlake.daemon import Plan  # noqa: E402
from twinlake.daemon.excitation import PREVIEW_ANCHOR_Q  # noqa: E402
from twinlake.daemon.excite_files import reference_table, write_reference_csv  # noqa: E402


# a lively 4° multisine (0.07 rad from its anchor): fr3_stack's bounds raised explicitly, as a user
# would (`--max-velocity 3 ... --tracking-error 0.2`), and recorded in metadata.json
TRACKING_ERROR_RAD = 0.2


def make_reference(directory: Path, seconds: float) -> Path:
    """A multisine reference of all joints lasting `seconds` − 1 s (the episode's tail is 1 s),
    with its metadata.json (the plan's raised bounds and the raised tracking guard)."""
    plan = Plan(mode="multisine", joints=(1, 2, 3, 4, 5, 6, 7), amplitude_deg=4.0, seconds=max(1.0, seconds - 1.1),
                ramp=0.25, hold=0.05, tones=(0.3, 0.7, 1.3), seed=1, rate=100.0, max_velocity=3.0,
                max_acceleration=30.0, max_jerk=500.0)
    path = directory / "reference.csv"
    write_reference_csv(path, reference_table(plan, PREVIEW_ANCHOR_Q))
    (directory / "metadata.json").write_text(json.dumps({"plan": plan.to_dict(), "guard_settings": {
        "tracking_error": TRACKING_ERROR_RAD, "stale_after": 0.2, "max_lateness": 0.05, "tracking_rule": "anchor"}}))
    return path


def baseline(prep, episodes: int, chunk: int, nthread: int) -> float:
    """Seconds of PopulationEngine.run over `episodes` of the campaign's draws, in chunks."""
    from twinlake.sim import PopulationEngine

    engine = PopulationEngine([prep.reference.replay_input(prep.gain_sets[0])], nthread=nthread)
    matrix = np.stack([s.vector for s in prep.specs[:episodes]])
    engine.run(matrix[:2])  # compile / warm up
    started = time.perf_counter()
    for a in range(0, episodes, chunk):
        engine.run(matrix[a:a + chunk])
    elapsed = time.perf_counter() - started
    engine.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=32)
    ap.add_argument("--samples", choices=("none", "parquet"), default="none")
    ap.add_argument("--baseline-episodes", type=int, default=128)
    ap.add_argument("--keep", type=Path, default=None, help="Keep the lake here (default: a temporary one).")
    args = ap.parse_args()

    from twinlake.campaign import CampaignRequest, prepare, run_campaign

    root = Path(tempfile.mkdtemp(prefix="bench-campaign-")) if args.keep is None else args.keep
    lake = root / "lake"
    make_fit(lake, delay_probs=[0.1, 0.6, 0.3, 0.0, 0.0])
    ref = make_reference(root, args.seconds)
    req = CampaignRequest(fit=FIT_ID, episodes=args.episodes, reference_csv=str(ref), campaign_id="bench",
                          samples=args.samples, chunk_episodes=args.chunk, tracking_limit_rad=TRACKING_ERROR_RAD)
    prep = prepare(lake, req)
    ticks = prep.reference.n_ticks
    print(f"{args.episodes} episodes x {ticks} ticks ({ticks / 1000:.2f} s), {args.workers} workers, "
          f"chunk {args.chunk}, samples {args.samples}")
    base_n = min(args.baseline_episodes, args.episodes)
    base_s = baseline(prep, base_n, args.chunk, max(1, args.workers))
    base_rate = base_n / base_s
    print(f"population replay (PopulationEngine.run, nthread {max(1, args.workers)}): {base_n} episodes in "
          f"{base_s:.1f} s = {base_rate:.2f} episodes/s ({base_rate * ticks / 1e3:.0f}k ticks/s)")
    started = time.perf_counter()
    report = run_campaign(lake, req, workers=args.workers)
    wall = time.perf_counter() - started
    rate = report.ran / wall
    rows = [json.loads(line) for line in (report.path / "summary.jsonl").read_text().splitlines()]
    sim = sum(r["wall_sim_s"] or 0.0 for r in rows)
    total = sum(r["wall_total_s"] or 0.0 for r in rows)
    size = subprocess.run(["du", "-sh", str(report.path)], capture_output=True, text=True).stdout.split()[0]
    print(f"campaign: {report.ran} episodes in {wall:.1f} s = {rate:.2f} episodes/s "
          f"(incl. Ray start-up); outcomes {report.outcomes}; {report.infrastructure_errors} infrastructure errors")
    print(f"  per-episode worker time: sim {sim:.1f} s, other (score, config, samples) {total - sim:.1f} s "
          f"(summed over workers); on disk {size}")
    print(f"ratio to the population replay: {rate / base_rate:.2f}x; target 1000 x 10 s in <= 180 s: "
          f"{'met' if args.episodes >= 1000 and args.seconds >= 10 and wall <= 180 else 'see the numbers'}")
    if args.keep is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
