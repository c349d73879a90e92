"""Benchmark: time to a trusted fit of a FrankaTwin-size problem, three methods side by side.

Problem: 29 parameters (`twinlake.sim.LAYOUT`, FrankaTwin's), three training runs of
`--seconds` (12) s at 1 kHz and one held-out run, multisine excitations of all 7 joints recorded
by the offline recorder on a truth drawn inside the published per-joint spans (bench/recovery.py:
`sample_truth`, `record`), ingested into a temporary lake. Each method gets the same lake and
a local Ray cluster of `--workers` CPUs (started before the clock; the fits' actors start inside it):

1. `local` — the default of `fit run` (fit/replay/local_search.py), with `fit run`'s defaults;
2. `cma` — `fit run --method cma` (CMA-ES population 32 × 20 generations, then 10 LM iterations);
3. MuJoCo's `mujoco.minimize.least_squares` (the optimizer `mujoco.sysid` runs) on the same
   residuals (`FitProblem.residuals`, its vectorised Jacobian columns evaluated as one batch on
   the same Ray pool), over the 28 continuous parameters in the same normalised box, from the
   nominal parameters, finite-difference step 1e-3 like ours. It cannot search an integer, so
   it is given the delay the `local` fit found (an advantage it gets for free).

Wall time of a twinlake method is the whole `run_fit` (data read, actors, search, error bars,
holdout scoring, publication); beside it the seconds per stage, the CPU seconds of the
driver and of the fit's Ray actors (read from /proc at the fit's last stage or generation
callback, Linux only) and the load average, since the machine may be shared. Printed per method: wall time, the worst relative error over
the excited parameters (armature, Coulomb = mu_static·dynamic_ratio, viscous: 21 values; and
separately over the static-friction split), the delay against the truth, the held-out q RMSE
against the noise floor (the truth replayed), and the ratio of FrankaTwin's published
40 iterations × 378 s to it. Targets: every excited parameter within 5 %, the delay exact,
held-out ≤ 1.2× the floor, ≤ 60 s wall on 2 cores.

    python bench/fit_speed.py [--seed 0] [--seconds 12] [--workers 2] [--methods local,cma,mujoco]

`--truths K` (bench/fit_truths.py): K own-family truths, each with its own tone sets and
phases, and the independent test plant (tests/plant: an unknown payload, tanh friction,
asymmetric Coulomb) with the default and the extended parameter set; prints the median and
worst time to a result, how often the fallback ran, accuracy per truth, and the ratios to
`--method cma` and MuJoCo measured in the same run:

    python bench/fit_speed.py --truths 6 [--seconds 12] [--log out.jsonl] [--no-plant]

`--loop-noise PAIRS`: the default `local` fit with its error bars' two extra steps, the
closed-loop noise bootstrap (the default `loop_noise_draws`, fit/core/loop_noise.py) and the
intervals' check against the loss (`profile_check`, fit/core/profile_check.py), against the
same code with both off (`loop_noise_draws=0, profile_check=False`), on the same lake,
alternated PAIRS times (off, on, off, on, …) so a changing load hits both; prints each wall
time and the ratio of the medians (target ≤ 1.5):

    python bench/fit_speed.py --loop-noise 2 [--seconds 12] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_methods import _delay_ms, errors, make_lake, run_methods  # noqa: E402
from recovery import holdout_rmse  # noqa: E402

from twinlake.commands.fit import REFINE_ITERATIONS  # noqa: E402  `fit run --refine`'s default

FRANKATWIN_S = 40 * 378.0  # published: 40 iterations × ≈378 s (128 envs, 3 runs, one GPU)


def _seven(text: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split(","))
    if len(values) != 7:
        raise argparse.ArgumentTypeError(f"expected 7 comma-separated numbers, got {text!r}")
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="truth and fit seed")
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--methods", default="local,cma,mujoco")
    ap.add_argument("--mujoco-iterations", type=int, default=20)
    ap.add_argument("--truths", type=int, default=0,
                    help="K > 0: K own-family truths (seeds SEED..SEED+K-1, own tones and phases) and the "
                         "independent plant (bench/fit_truths.py)")
    ap.add_argument("--plant-methods", default="local,cma", help="--truths: methods on the plant's default set")
    ap.add_argument("--extended-methods", default="local", help="--truths: methods on the plant's extended set")
    ap.add_argument("--no-plant", action="store_true", help="--truths: own-family truths only")
    ap.add_argument("--plant-sets", default="default,extended",
                    help="--truths: the plant's parameter sets, of default, payload (+payload), extended")
    ap.add_argument("--plant-link-scale", type=_seven, default=(1.0,) * 7, metavar="S1,...,S7",
                    help="--truths: the plant's link masses relative to the MJCF's (the firmware keeps the file's)")
    ap.add_argument("--plant-load-friction", type=float, default=0.0, metavar="K",
                    help="--truths: the plant's Coulomb level grows by K per N·m transmitted, every joint")
    ap.add_argument("--log", type=Path, default=None, help="--truths: append one JSON line per result here")
    ap.add_argument("--loop-noise", type=int, default=0, metavar="PAIRS",
                    help="time the default fit with and without its loop-noise bootstrap and profile check, PAIRS alternations")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]

    import os

    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    if args.loop_noise:
        loop_noise_ratio(args)
        return
    if args.truths:
        from fit_truths import run_truths

        ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        try:
            run_truths(args, methods)
        finally:
            ray.shutdown()
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        truth, train, holdout = make_lake(root, args.seed, args.seconds)
        lake = root / "lake"
        print(f"truth seed {args.seed} (delay {truth.motor_delay_ms} ms); 3 × {args.seconds:g} s train + 1 held-out, "
              f"recorded + ingested in {time.perf_counter() - t0:.0f} s; {args.workers} Ray workers")
        ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        results = run_methods(lake, train, holdout, truth.motor_delay_ms, methods, args.seed, args.workers,
                              args.mujoco_iterations)
        ray.shutdown()
        rmse = holdout_rmse(lake, holdout, {**{m: r[0] for m, r in results.items()}, "truth": truth.to_vector()})
    floor = rmse["truth"]
    print(f"\n{'method':8s} {'wall s':>7s} {'worst err %':>12s} {'(param)':16s} {'static %':>9s} {'delay':>6s} "
          f"{'held-out':>9s} {'FrankaTwin ×':>13s}  gates")
    summary = {}
    for m, (vec, wall, gates, _rec) in results.items():
        worst, name, static = errors(vec, truth)
        delay = _delay_ms(vec)
        ratio = rmse[m] / floor
        print(f"{m:8s} {wall:7.1f} {worst:12.2f} {name:16s} {static:9.1f} {delay:3d}/{truth.motor_delay_ms:<2d} "
              f"{ratio:8.2f}× {FRANKATWIN_S / wall:12.0f}×  {gates or ''}")
        summary[m] = {"wall_s": wall, "worst_err_pct": worst, "worst_param": name, "static_err_pct": static,
                      "delay_ms": delay, "truth_delay_ms": truth.motor_delay_ms, "holdout_ratio": ratio,
                      "frankatwin_ratio": FRANKATWIN_S / wall}
    print("(mujoco: given the delay found by `local`; it cannot search an integer)" if "mujoco" in results else "")
    ok = summary.get("local")
    if ok:
        met = ok["worst_err_pct"] <= 5 and ok["delay_ms"] == ok["truth_delay_ms"] and ok["holdout_ratio"] <= 1.2 \
            and ok["wall_s"] <= 60
        print(f"target (local): ≤ 5 %, delay exact, ≤ 1.2× floor, ≤ 60 s: {'met' if met else 'NOT met'}")
    print(json.dumps(summary))


def loop_noise_ratio(args) -> None:
    """The default local fit (`FitSettings`' defaults: the closed-loop noise bootstrap and the
    profile check on) and the same with both off, on one lake, alternated `args.loop_noise` times."""
    import os

    import numpy as np
    import ray

    from twinlake.fit.run import FitSettings, run_fit

    on = FitSettings(train=[]).loop_noise_draws
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth, train, holdout = make_lake(root, args.seed, args.seconds)
        ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        walls: dict[int, list[float]] = {0: [], on: []}
        for k in range(args.loop_noise):
            for draws in (0, on):
                settings = FitSettings(train=train, holdout=holdout, seed=args.seed, refine_iterations=REFINE_ITERATIONS,
                                       loop_noise_draws=draws, profile_check=bool(draws))  # else `fit run`'s defaults
                load0, t0 = os.getloadavg()[0], time.perf_counter()
                rec = run_fit(root / "lake", settings, fit_id=f"loop-{draws}-{k}", workers=args.workers, progress=False)
                walls[draws].append(time.perf_counter() - t0)
                widened = json.loads(rec.extra["identifiability_json"]).get("profile_check", {}).get("widened", {})
                print(f"  {'default' if draws else 'both off'}: wall {walls[draws][-1]:.1f} s (error bars, with the "
                      f"bootstrap and check if on: {rec.extra['error_bars_s']:.1f} s; widened {sorted(widened) or 'none'}), "
                      f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
        ray.shutdown()
    ratio = float(np.median(walls[on]) / np.median(walls[0]))
    print(f"3 × {args.seconds:g} s runs, {args.workers} workers: median wall {np.median(walls[on]):.1f} s by default "
          f"({on} draws, profile check), {np.median(walls[0]):.1f} s with both off: ratio {ratio:.2f} (target ≤ 1.5)")
    print(json.dumps({"with_s": walls[on], "without_s": walls[0], "draws": on, "ratio": ratio}))


if __name__ == "__main__":
    main()
