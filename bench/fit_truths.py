"""`bench/fit_speed.py --truths K`: time to a result off the benchmark's one path.

1. **Own-family truths** k = 0..K−1: `sample_truth(SEED + k)` (bench/recovery.py, inside the
   published per-joint spans), each with its own training tone set and held-out tone set (three
   tones drawn in 0.12–0.35, 0.35–0.8 and 0.8–1.6 Hz) and its own phases and noise (the
   recorder's seeds); three training runs of `--seconds` and one held-out run, each truth in its
   own lake. Every method in `--methods` runs on the same lake (MuJoCo given `local`'s delay).
2. **The independent plant** (tests/plant: shares no code with sim/): a 0.8 kg flange payload
   its firmware does not know, friction −c(q̇)·tanh(q̇/v_s) − b·q̇ with c⁺ ≠ c⁻, a 2 ms delay;
   v_s set to the twin's fixed tanh velocity (0.02 rad/s). Fitted with the default 29
   parameters (`--plant-methods`) and the extended set `+payload +smooth-friction +asymmetry`
   (`--extended-methods`).

Prints one line per fit as it finishes (and appends it as JSON to `--log`), then per truth the
accuracy (worst excited-parameter error, delay) of each method, and the summary: median and
worst wall time of `local`, how often its fallback ran, and the ratios of its wall time to
`cma`'s and MuJoCo's on the same truths, measured in this run; for the plant the loss against
`cma`'s and the train/held-out ratios to the noise floor.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fit_methods import _delay_ms, errors, make_lake, run_methods
from recovery import holdout_rmse

TONE_BANDS_HZ = ((0.12, 0.35), (0.35, 0.8), (0.8, 1.6))
PLANT_RUNS = (("train-1", 1), ("train-2", 2), ("train-3", 3))
EXTENDED = ["+payload", "+smooth-friction", "+asymmetry"]


def truth_tones(seed: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(training tones, held-out tones) [Hz] of truth `seed`: one draw per band each, rounded to 0.01 Hz."""
    rng = np.random.default_rng([seed, 41])
    draw = lambda: tuple(round(float(rng.uniform(lo, hi)), 2) for lo, hi in TONE_BANDS_HZ)  # noqa: E731
    return draw(), draw()


def _load() -> str:
    import os

    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _emit(log: Path | None, row: dict) -> None:
    print("  " + json.dumps(row), flush=True)
    if log is not None:
        with open(log, "a") as f:
            f.write(json.dumps(row) + "\n")


def own_family(k: int, args, methods: list[str]) -> dict:
    seed = args.seed + k
    tones = truth_tones(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth, train, holdout = make_lake(root, seed, args.seconds, tones, phase_seed=100 * (k + 1))
        print(f"truth {k} (seed {seed}, delay {truth.motor_delay_ms} ms, train tones {tones[0]}, held-out {tones[1]}); "
              f"load {_load()}", flush=True)
        results = run_methods(root / "lake", train, holdout, truth.motor_delay_ms, methods, seed, args.workers,
                              args.mujoco_iterations)
        rmse = holdout_rmse(root / "lake", holdout, {**{m: r[0] for m, r in results.items()}, "truth": truth.to_vector()})
    out = {}
    for m, (vec, wall, gates, _rec) in results.items():
        worst, name, _static = errors(vec, truth)
        out[m] = {"kind": "own", "truth": k, "seed": seed, "method": m, "wall_s": round(wall, 1),
                  "worst_err_pct": round(worst, 3), "worst_param": name, "delay_ok": _delay_ms(vec) == truth.motor_delay_ms,
                  "holdout_ratio": round(rmse[m] / rmse["truth"], 3), "gates": gates, "load": _load()}
        _emit(args.log, out[m])
    return out


PLANT_SETS = {"default": [], "payload": ["+payload"], "extended": EXTENDED, "links": EXTENDED + ["+links"],
              "links-friction": EXTENDED + ["+links", "+load-friction"]}


def plant_lake(root: Path, seconds: float, link_scale: tuple[float, ...] = (1.0,) * 7,
               load_friction: float = 0.0) -> tuple[Path, list[str], list[str]]:
    """The independent plant's three training runs and one held-out run (other tones), ingested.
    link_scale: its links' masses and inertias relative to the MJCF's (the firmware keeps the
    file's); load_friction: the Coulomb level's growth per N·m transmitted, every joint."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from plant import IndependentPlant, record

    from twinlake.catalog import Lake
    from twinlake.ingest import ReadOptions, ingest_paths
    from twinlake.synthetic import multisine_run, write_reference

    plant = IndependentPlant(payload_mass_kg=0.8, smoothing_velocity_rad_s=(0.02,) * 7,
                             link_mass_scale=link_scale, coulomb_load_per_nm=(load_friction,) * 7)
    lake = root / "lake"
    runs = [(run, (0.3, 0.7, 1.3), seed) for run, seed in PLANT_RUNS] + [("held-out", (0.4, 0.9, 1.7), 4)]
    for run, tones, seed in runs:
        folder = root / run
        folder.mkdir()
        spec = multisine_run(run, tones, seed, seconds=seconds, amplitude_deg=10.0, ramp_s=1.0, hold_s=0.3)
        ref = write_reference(spec, folder / "reference.csv")
        rec = record(ref, folder / f"{run}.csv", plant=plant.replace(seed=seed), settle_s=1.0, tail_s=0.3)
        for outcome in ingest_paths(Lake(lake), [rec.csv_path], ReadOptions(robot="plant", run=run)):
            if outcome.status != "published":
                raise RuntimeError(f"plant run {run}: {outcome.message}")
    return lake, [f"plant/{r}" for r, _ in PLANT_RUNS], ["plant/held-out"]


def plant_fits(args) -> dict:
    from twinlake.fit.core.space import parse_space

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        lake, train, holdout = plant_lake(Path(tmp), args.seconds, args.plant_link_scale, args.plant_load_friction)
        sets = [(label, PLANT_SETS[label], args.extended_methods if label == "extended" else args.plant_methods)
                for label in args.plant_sets.split(",") if label]
        for label, specs, methods in sets:
            print(f"plant, {label} set; load {_load()}", flush=True)
            space = parse_space(specs).to_json()
            res = run_methods(lake, train, holdout, 2, [m for m in methods.split(",") if m], args.seed, args.workers,
                              args.mujoco_iterations, space)
            for m, (vec, wall, gates, rec) in res.items():
                row = {"kind": "plant", "set": label, "method": m, "wall_s": round(wall, 1), "delay_ok": _delay_ms(vec) == 2,
                       "loss": rec.best_loss, "train_floor_ratio": rec.extra.get("train_floor_ratio"),
                       "holdout_floor_ratio": rec.extra.get("holdout_floor_ratio"),
                       "payload_kg": float(rec.params.payload_mass), "gates": gates, "load": _load()}
                out[(label, m)] = row
                _emit(args.log, row)
    return out


def run_truths(args, methods: list[str]) -> None:
    started = time.perf_counter()
    print(f"--truths {args.truths}: methods {','.join(methods)}, {args.seconds:g} s runs, {args.workers} workers, "
          f"load {_load()}", flush=True)
    own = [own_family(k, args, methods) for k in range(args.truths)] if methods else []  # --methods "": plant only
    plant = {} if args.no_plant else plant_fits(args)
    summarise(own, plant)
    print(f"bench wall {time.perf_counter() - started:.0f} s, load at the end {_load()}")


def summarise(own: list[dict], plant: dict) -> None:
    print(f"\n{'truth':>5s} {'method':7s} {'wall s':>7s} {'worst err %':>11s} {'delay':>5s} {'held-out':>8s}  gates")
    for rows in own:
        for m, r in rows.items():
            print(f"{r['truth']:5d} {m:7s} {r['wall_s']:7.1f} {r['worst_err_pct']:11.2f} {'ok' if r['delay_ok'] else 'WRONG':>5s} "
                  f"{r['holdout_ratio']:7.2f}×  {(r['gates'] or '')[:100]}")
    local = [rows["local"] for rows in own if "local" in rows]
    if local:
        walls = [r["wall_s"] for r in local]
        fallback = sum(1 for r in local if (r["gates"] or "").startswith("fallback"))
        print(f"local: median {statistics.median(walls):.1f} s, worst {max(walls):.1f} s over {len(walls)} truths; "
              f"fallback ran on {fallback} of {len(walls)}")
        for peer in ("cma", "mujoco"):
            pairs = [(rows["local"]["wall_s"], rows[peer]["wall_s"]) for rows in own if "local" in rows and peer in rows]
            if pairs:
                print(f"local / {peer} wall time: " + ", ".join(f"{a / b:.2f}" for a, b in pairs)
                      + f" (median {statistics.median(a / b for a, b in pairs):.2f})")
        if all("cma" in rows for rows in own):
            gap = max(rows["local"]["worst_err_pct"] - rows["cma"]["worst_err_pct"] for rows in own)
            print(f"worst excited-parameter error, local minus cma, worst truth: {gap:+.2f} percentage points; "
                  f"delay exact on {sum(r['delay_ok'] for r in local)} of {len(local)}")
    for (label, m), r in plant.items():
        print(f"plant {label:8s} {m:6s} {r['wall_s']:7.1f} s  loss {r['loss']:.5g}  train {r['train_floor_ratio'] or float('nan'):.2f}× "
              f"held-out {r['holdout_floor_ratio'] or float('nan'):.2f}× the floor  {(r['gates'] or '')[:100]}")
    if ("default", "local") in plant and ("default", "cma") in plant:
        a, b = plant[("default", "local")]["loss"], plant[("default", "cma")]["loss"]
        print(f"plant default: local loss / cma loss = {a / b:.4f} (target ≤ 1.02)")
