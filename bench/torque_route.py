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
the error in its stated standard errors (HAC plus, under Stribeck, the rest rule's systematic
part) and in per cent, per group the worst |z| with the stated and with the HAC bars alone and
how much wider the stated bars are, the delay, the payload. `--noise-seed K` records the twin's
runs with another measurement-noise realisation (same excitation).
Targets (issue 24): every excited parameter within 3 stated standard errors and within 5 %
(truths near zero within 0.02 absolute), the delay exact, ≤ 5 s; measured: payload mass within
2 %, CoM within 5 mm.

With `--replay` (the peer, in the same run): the replay fit (`fit run`'s local search, 2 Ray
workers) on problem 1's runs, from the nominal parameters (3 starts) and `--start-from` the
torque fit (1 start); wall time of each and the ratio.

With `--payload-run` instead: the real payload run's shape on the independent plant
(tests/plant/payload_run.py: 1.2 s at rest, a 0.5 s move turning the flange 40°, 10.5 s at rest
with a 0.33 kg tool ringing at 7 Hz, sensor offsets), two runs; the measured route (Stribeck,
the default) on one, held out on the other: mass, CoM, statuses, and per joint the held-out
torque RMSE of the fit against the nominal model's (the peer, same rows). Then the route's CPU
time (`time.process_time`) on a 21 s, 1 kHz PC-logged plant run with `+links` (target ≤ 10 s)
against the same fit without `+links` (the peer), and its held-out RMSE against nominal.

With `--coverage K` instead: both families recorded with K noise realisations (seeds 0..K−1,
same excitation) and fitted; per family the share of free parameters whose truth lies inside
its stated 95 % interval (|z| ≤ 1.96), with a Wilson 95 % interval that treats the parameters
as independent (they are not: one fit's parameters share its noise, so the true uncertainty
of the share is wider), the RMS z and the worst.

    python bench/torque_route.py [--seconds 12] [--noise-seed 0] [--replay]
    python bench/torque_route.py --coverage 10
    python bench/torque_route.py --payload-run
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


def group_lines(rec, truth_vec) -> list[str]:
    """Per parameter group: worst |z| with the stated bars and (β entries only) with the HAC
    bars alone, and how much wider the stated bars are than the HAC ones (median, max)."""
    from twinlake.sim import PARAM_NAMES

    bars = {e["name"]: e for e in rec.identifiability["parameters"]}
    beta = {b["name"]: b for b in json.loads(rec.extra["torque_json"])["beta"]}
    groups: dict[str, list[str]] = {}
    for name in PARAM_NAMES:
        if bars[name]["free"]:
            groups.setdefault(name.rsplit("_j", 1)[0] if "_j" in name else "payload", []).append(name)
    out = []
    for group, names in groups.items():
        z = [abs(rec.vector[PARAM_NAMES.index(n)] - truth_vec[PARAM_NAMES.index(n)]) / bars[n]["stderr"] for n in names]
        direct = [n for n in names if n in beta and not n.startswith("payload")]  # β's payload θ is not the twin's
        z_hac = [abs(rec.vector[PARAM_NAMES.index(n)] - truth_vec[PARAM_NAMES.index(n)]) / beta[n]["stderr_hac"]
                 for n in direct]
        ratio = [beta[n]["stderr"] / beta[n]["stderr_hac"] for n in direct]
        line = f"  {group:18s} worst |z| {max(z):5.2f}"
        if direct:
            line += (f" (HAC alone {max(z_hac):5.2f}); stated/HAC standard error median {np.median(ratio):.2f}x, "
                     f"max {max(ratio):.2f}x")
        out.append(line)
    return out


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
        flag = " (the fit: unidentifiable)" if "unidentifiable" in (e.get("flags") or []) else ""
        lines.append(f"  {name:22s} {est:10.5g} truth {tru:10.5g}  z {z:+6.2f}  {rel:>9s} {'ok' if ok else 'FAIL'}{flag}")
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
    print("\n".join(group_lines(rec, truth.to_vector())))
    print("  " + json.loads(rec.extra["torque_json"])["error_bar_note"])
    print("  " + json.loads(rec.extra["torque_json"])["adequacy_lines"][0][0])
    return rec, wall


def z_values(rec, truth_vec) -> list[tuple[str, float]]:
    """(name, (estimate − truth) / stated standard error) of every free parameter of a fit."""
    from twinlake.sim import PARAM_NAMES

    out = []
    for e in rec.identifiability["parameters"]:
        if e["free"] and e["stderr"]:
            i = PARAM_NAMES.index(e["name"])
            out.append((e["name"], float((rec.vector[i] - truth_vec[i]) / e["stderr"])))
    return out


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion hits/n."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def coverage(seconds: float, seeds: int) -> None:
    """The stated intervals' coverage over `seeds` noise realisations of both families."""
    import torque_runs

    from twinlake.fit.torque import TorqueFitSettings, fit_torque

    root = Path(tempfile.mkdtemp(prefix="torque-coverage-"))
    print(f"bench/torque_route.py --coverage {seeds}: {seconds:g} s runs x 3 per seed, lake {root}, "
          f"load {os.getloadavg()}")
    for family, presets in (("default", []), ("extended", ["+payload", "+asymmetry", "+bias"])):
        zs, t0 = [], time.perf_counter()
        for seed in range(seeds):
            robot = f"{family[:3]}{seed}"
            lake, truth, law = torque_runs.twin_runs(root, robot, ("a", "b", "c"), family=family, seconds=seconds,
                                                     noise_seed=seed)
            rec = fit_torque(lake, TorqueFitSettings(train=[f"{robot}/{r}" for r in "abc"], friction_law=law,
                                                     params=presets), fit_id=f"cov-{robot}", publish=False)
            zs += z_values(rec, truth.to_vector())
        z = np.array([v for _, v in zs])
        hits = int(np.sum(np.abs(z) <= 1.96))
        lo, hi = wilson(hits, len(z))
        worst = max(zs, key=lambda t: abs(t[1]))
        print(f"{family} family: {hits}/{len(z)} truths inside the stated 95 % intervals ({100 * hits / len(z):.1f} %, "
              f"Wilson [{100 * lo:.1f}, {100 * hi:.1f}] %), RMS z {np.sqrt(np.mean(z ** 2)):.2f}, worst |z| "
              f"{abs(worst[1]):.2f} ({worst[0]}); {seeds} seeds in {time.perf_counter() - t0:.0f} s, "
              f"load {os.getloadavg()[0]:.1f}")


def _rmse_lines(torque: dict) -> str:
    fit, nom, floor = (np.array(torque[k][f]) for k, f in (("holdout", "rmse_raw_nm"), ("nominal_holdout", "rmse_raw_nm"),
                                                           ("nominal_holdout", "floor_nm")))
    return "  held-out RMSE fit / nominal [N·m] (floor): " + ", ".join(
        f"J{j + 1} {fit[j]:.3f}/{nom[j]:.3f} = {fit[j] / nom[j]:.2f}x ({floor[j]:.3f})" for j in range(7))


def payload_run() -> None:
    """--payload-run (module docstring)."""
    import torque_runs

    from twinlake.fit.trust.statuses import fit_statuses
    from twinlake.fit.torque import TorqueFitSettings, fit_torque

    root = Path(tempfile.mkdtemp(prefix="torque-payload-"))
    print(f"bench/torque_route.py --payload-run: lake {root}, load {os.getloadavg()}")
    lake, truth = torque_runs.payload_runs(root, "tool", ("a", "b"))
    t0 = time.process_time()
    rec = fit_torque(lake, TorqueFitSettings(train=["tool/a"], holdout=["tool/b"], torque="measured"), fit_id="payload")
    cpu = time.process_time() - t0
    torque = json.loads(rec.extra["torque_json"])
    pay = torque["payload"]
    status = {s.name: s for s in fit_statuses(rec)}
    print(f"payload run (measured, {torque['friction_law']}): {cpu:.2f} CPU s, load {os.getloadavg()[0]:.1f}; "
          f"mass {pay['mass_kg']:.4f} kg (truth {truth.payload_mass_kg}, {100 * (pay['mass_kg'] / truth.payload_mass_kg - 1):+.1f} %), "
          "CoM " + ", ".join(f"{a} {1e3 * (c - t):+.1f} mm ({status[f'payload_com_{a}'].status.label})"
                             for a, c, t in zip("xyz", pay["com_m"], truth.payload_com_m))
          + f"; standstill rows {torque['standstill']['rows']} of {torque['rows']}")
    print(_rmse_lines(torque))
    for text, ok in torque["adequacy_lines"]:
        print(f"  [{ok}] {text}")
    _, plant = torque_runs.plant_runs(root, "plant", ("a", "b"), seconds=21.0)
    torque_runs.pc_log_copies(root, lake, "panda", ("a", "b"), "plant")
    cpu = {}
    for label, params in (("+links", ["+links"]), ("payload only", [])):
        t0 = time.process_time()
        rec = fit_torque(lake, TorqueFitSettings(train=["panda/a"], holdout=["panda/b"], torque="measured", params=params),
                         fit_id=f"pc-{len(params)}")
        cpu[label] = time.process_time() - t0
        print(f"21 s PC-logged plant run, measured {label}: {cpu[label]:.2f} CPU s (time.process_time), "
              f"load {os.getloadavg()[0]:.1f}")
        print(_rmse_lines(json.loads(rec.extra["torque_json"])))
    print(f"+links / payload only CPU: {cpu['+links'] / cpu['payload only']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--replay", action="store_true", help="also time the replay fit with and without --start-from")
    ap.add_argument("--noise-seed", type=int, default=0,
                    help="another measurement-noise realisation of the twin's runs (0: the one so far)")
    ap.add_argument("--coverage", type=int, default=0, metavar="K",
                    help="instead: the stated intervals' coverage over K noise realisations of both families")
    ap.add_argument("--payload-run", action="store_true",
                    help="instead: the payload run's shape and the +links CPU time on a 21 s PC-logged run")
    args = ap.parse_args()
    if args.payload_run:
        payload_run()
        return
    if args.coverage:
        coverage(args.seconds, args.coverage)
        return
    import torque_runs

    from twinlake.fit.torque import TorqueFitSettings, fit_torque

    root = Path(tempfile.mkdtemp(prefix="torque-bench-"))
    print(f"bench/torque_route.py: {args.seconds:g} s runs x 3, noise seed {args.noise_seed}, lake {root}, "
          f"load {os.getloadavg()}")
    lake, truth, law = torque_runs.twin_runs(root, "def", ("a", "b", "c"), family="default", seconds=args.seconds,
                                             noise_seed=args.noise_seed)
    default_rec, _ = commanded(lake, "default", "def", truth, law, [])
    _, truth_x, law_x = torque_runs.twin_runs(root, "ext", ("a", "b", "c"), family="extended",
                                                 seconds=args.seconds, noise_seed=args.noise_seed)
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


def print_comparison(torque_rec, replay_rec) -> None:
    """`fit compare` of the torque fit and a replay fit on the same runs: how many parameters agree
    within 3 combined standard errors, the worst |z| and every disagreeing one."""
    from twinlake.fit.trust.compare import compare_fits

    cmp = compare_fits(torque_rec, replay_rec, 3.0)
    zs = [(abs(p.z), p.name) for p in cmp.parameters if p.z is not None]
    agree = sum(p.verdict == "agree" for p in cmp.parameters)
    worst = max(zs) if zs else (float("nan"), "-")
    print(f"  fit compare {torque_rec.fit_id} {replay_rec.fit_id}: {agree}/{len(cmp.parameters)} agree within 3 "
          f"combined standard errors; worst |z| {worst[0]:.2f} ({worst[1]}); disagree: "
          + (", ".join(f"{p.name} z={p.z:+.2f}" for p in cmp.disagreeing) or "none") + f"; {cmp.verdict}")


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
        print_comparison(start, rec)
    a, b = out.values()
    print(f"\nreplay fit: {a:.1f} s from nominal, {b:.1f} s with --start-from: {a / b:.2f}x")


if __name__ == "__main__":
    main()
