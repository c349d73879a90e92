"""Benchmark: the torque route's accuracy and time, and the replay fit with and without
`--start-from` the torque fit.

Problems (three training runs of `--seconds` (12) s each, multisine of all 7 joints, recorded
and ingested into a temporary lake; tests/fit/torque_runs.py):
1. the twin's own recorder, default family (Stribeck, delay 2 ms) — commanded route;
2. the twin's own recorder, extended family (payload, tanh friction, asymmetry, bias, delay
   3 ms) — commanded route with +payload +asymmetry +bias;
3. the independent plant (tests/plant) — measured route (payload from tau_J).
Printed per problem: the torque route's wall time (whole `fit_torque`: data, filter,
regressor, solve, scores; the process's first call also loads Pinocchio), per free parameter
the error in its stated (HAC) standard errors and in per cent, the delay, the payload.
Targets (issue 24): every excited parameter within 3 stated standard errors and within 5 %
(truths near zero within 0.02 absolute), the delay exact, ≤ 5 s; measured: payload mass within
2 %, CoM within 5 mm.

With `--replay` (the peer, in the same run): the replay fit (`fit run`'s local search, 2 Ray
workers) on problem 1's runs, from the nominal parameters (3 starts) and `--start-from` the
torque fit (1 start); wall time of each and the ratio.

    python bench/torque_route.py [--seconds 12] [--replay]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fit"))
sys.path.insert(0, str(REPO / "tests"))


def check(rec, truth_vec) -> tuple[int, int, list[str]]:
    """(free, failing, lines) of a commanded torque fit against the truth vector."""
    from twinlake.sim import PARAM_NAMES

    bars = {e["name"]: e for e in rec.identifiability["parameters"]}
    lines, bad, free = [], 0, 0
    for i, name in enumerate(PARAM_NAMES):
        e = bars[name]
        if not e["free"]:
            continue
        free += 1
        est, tru = rec.vector[i], truth_vec[i]
        z = (est - tru) / e["stderr"] if e["stderr"] else float("inf")
        near_zero = abs(tru) < 0.05 if not name.startswith("payload_i") else True
        ok_size = abs(est - tru) <= (0.02 if not name.startswith("payload_i") else 5e-4) if near_zero \
            else abs(est - tru) <= 0.05 * abs(tru)
        ok = abs(z) <= 3 and ok_size
        bad += not ok
        rel = "" if near_zero else f"{100 * (est - tru) / tru:+.2f} %"
        lines.append(f"  {name:22s} {est:10.5g} truth {tru:10.5g}  z {z:+6.2f}  {rel:>9s} {'ok' if ok else 'FAIL'}")
    return free, bad, lines


def commanded(lake, family, robot, truth, law, params):
    from twinlake.fit.torque import TorqueFitSettings, fit_torque

    settings = TorqueFitSettings(train=[f"{robot}/a", f"{robot}/b", f"{robot}/c"], friction_law=law, params=params)
    t0 = time.perf_counter()
    rec = fit_torque(lake, settings, fit_id=f"torque-{family}")
    wall = time.perf_counter() - t0
    free, bad, lines = check(rec, truth.to_vector())
    print(f"\n{family} family (commanded, {law}): torque route {wall:.2f} s wall, load {os.getloadavg()[0]:.1f}; "
          f"delay {rec.params.motor_delay_ms} (truth {truth.motor_delay_ms}); {free - bad}/{free} free parameters "
          "within 3 se and 5 % (0.02 near zero)")
    print("\n".join(lines))
    print("  " + json.loads(rec.extra["torque_json"])["adequacy_lines"][0][0])
    return rec, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--replay", action="store_true", help="also time the replay fit with and without --start-from")
    args = ap.parse_args()
    import torque_runs

    from twinlake.fit.torque import TorqueFitSettings, fit_torque

    root = Path(tempfile.mkdtemp(prefix="torque-bench-"))
    print(f"bench/torque_route.py: {args.seconds:g} s runs x 3, lake {root}, load {os.getloadavg()}")
    lake, truth, law = torque_runs.twin_runs(root, "def", ("a", "b", "c"), family="default", seconds=args.seconds)
    default_rec, _ = commanded(lake, "default", "def", truth, law, [])
    _, truth_x, law_x = torque_runs.twin_runs(root, "ext", ("a", "b", "c"), family="extended", seconds=args.seconds)
    commanded(lake, "extended", "ext", truth_x, law_x, ["+payload", "+asymmetry", "+bias"])
    _, plant = torque_runs.plant_runs(root, "plant", ("a", "b", "c"), seconds=args.seconds)
    t0 = time.perf_counter()
    rec = fit_torque(lake, TorqueFitSettings(train=["plant/a", "plant/b", "plant/c"], torque="measured",
                                             friction_law="tanh"), fit_id="torque-measured")
    wall = time.perf_counter() - t0
    pay = json.loads(rec.extra["torque_json"])["payload"]
    com_err = np.abs(np.array(pay["com_m"]) - plant.payload_com_m).max()
    print(f"\nindependent plant (measured tau_J): torque route {wall:.2f} s wall, load {os.getloadavg()[0]:.1f}; "
          f"payload {pay['mass_kg']:.4f} kg (truth {plant.payload_mass_kg}, "
          f"{100 * (pay['mass_kg'] / plant.payload_mass_kg - 1):+.2f} %), CoM error {1e3 * com_err:.2f} mm")
    if args.replay:
        replay(lake, default_rec)


def replay(lake: Path, start) -> None:
    from twinlake.fit.run import FitSettings, run_fit
    from twinlake.sim import PARAM_NAMES

    train = ["def/a", "def/b", "def/c"]
    out = {}
    for label, extra in (("nominal (3 starts)", {}),
                         ("--start-from the torque fit (1 start)",
                          {"start_from": start.fit_id, "start_params": start.vector.tolist(), "starts": 1})):
        settings = FitSettings(train=train, method="local", refine_iterations=10, **extra)
        t0 = time.perf_counter()
        rec = run_fit(lake, settings, workers=2, progress=False)
        out[label] = time.perf_counter() - t0
        truth = __import__("torque_runs").DEFAULT_TRUTH.to_vector()
        worst = max(abs(rec.vector[i] / truth[i] - 1) for i, n in enumerate(PARAM_NAMES[:28])
                    if not n.startswith(("mu_static", "dynamic_ratio")))
        print(f"\nreplay fit from {label}: {out[label]:.1f} s wall, load {os.getloadavg()[0]:.1f}, "
              f"best loss {rec.best_loss:.5g}, delay {rec.params.motor_delay_ms}, worst armature/viscous error "
              f"{100 * worst:.2f} %, gates {rec.extra.get('local_gates')}")
    a, b = out.values()
    print(f"\nreplay fit: {a:.1f} s from nominal, {b:.1f} s with --start-from: {a / b:.2f}x")


if __name__ == "__main__":
    main()
