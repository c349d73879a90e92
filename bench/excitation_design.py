"""Benchmark: does a designed excitation narrow the fitted intervals as predicted?

Two 40 s excitations of all seven joints, both within fr3_stack's preflight bounds, made by
the user's commands:

- ``documented``: `twinlake excite --mode multisine --joints 1 2 3 4 5 6 7 --seconds 40`
  (fr3_stack's documented tones 0.1/0.23/0.41 Hz, 1°, seed 0);
- ``designed``: `twinlake excite --design --seconds 40` (linearised at the nominal
  parameters; its metadata.json carries the predicted relative 95 % half-width of every
  parameter, from one replay Jacobian of the design and the fit's HAC rule);
- with ``--redesign``, also ``redesigned``: `twinlake excite --design --seconds 40 --for
  fit-designed` (the issue's `--for FIT`: designed again, linearised at the first fit's estimate).

Each reference is recorded on the test plant (tests/plant, its own MuJoCo loop; noise seed
`--noise-seed` + 0/1/2 per run), ingested, and fitted by `twinlake fit run` with its
defaults (FrankaTwin's 29 parameters, the local search). `--plant`:

- ``independent`` (default): the plant's default truth — a tanh friction law, a 1.2 kg
  payload the firmware does not know — which the default model cannot explain;
- ``explained``: the same arm with the twin's own Stribeck law (`friction_law="stribeck"`),
  no payload, interior parameters (`EXPLAINED`): a plant the default 29 parameters explain.

Printed per parameter: the realised relative 95 % half-width (the stored 95 % interval's
(high − low) / 2 / |estimate|, fit/records/design_check) of each fit beside the design's
prediction; then the worst over all 28 continuous default parameters (a fixed set), the
ratio documented / designed (target ≥ 2), the worst realised / worst predicted (target
≤ 1.5), how many parameters' realised / predicted lie within [1/1.5, 1.5], and on the
explained plant how many truths lie inside the fit's intervals. What it cannot show: one
noise draw per run, so every ratio carries one replicate's scatter.

    python bench/excitation_design.py [--plant explained|independent] [--redesign]
                                      [--noise-seed N] [--seconds 40] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DESIGN = ["--design"]
EXCITATIONS = {
    "documented": ["--mode", "multisine", "--joints", "1", "2", "3", "4", "5", "6", "7"],
    "designed": DESIGN,
}
# the explained plant's truth, in the twin's terms (tests/plant IndependentPlant, stribeck law)
EXPLAINED = {
    "armature": (0.21, 0.20, 0.17, 0.16, 0.085, 0.080, 0.065),
    "mu_viscous": (0.30, 0.28, 0.25, 0.22, 0.12, 0.10, 0.08),
    "mu_static": (0.90, 1.00, 0.75, 0.80, 0.45, 0.35, 0.22),
    "dynamic_ratio": (0.70, 0.75, 0.65, 0.70, 0.80, 0.75, 0.70),
    "motor_delay_ms": 2,
}
WITHIN = 1.5


def _twinlake(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "twinlake", *args], capture_output=True, text=True)
    if out.returncode:
        raise subprocess.CalledProcessError(out.returncode, ["twinlake", *args], out.stdout, out.stderr)
    return out.stdout


def plant_truth(kind: str, seed: int):
    """The tests/plant truth of `kind` with noise seed `seed`."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from plant import IndependentPlant

    if kind == "independent":
        return IndependentPlant(seed=seed)
    e = EXPLAINED
    return IndependentPlant(friction_law="stribeck", payload_mass_kg=0.0, armature_kgm2=e["armature"],
                            viscous_nms_rad=e["mu_viscous"], coulomb_pos_nm=e["mu_static"],
                            coulomb_neg_nm=e["mu_static"], dynamic_ratio=e["dynamic_ratio"],
                            smoothing_velocity_rad_s=0.02, motor_delay_ms=e["motor_delay_ms"], seed=seed)


def make_run(root: Path, name: str, args: list[str], seconds: float, plant) -> Path:
    """`twinlake excite` preview → recorded on the plant → ingested as plant/<name>."""
    from plant import record

    from twinlake.catalog import Lake
    from twinlake.ingest import ReadOptions, ingest_paths

    folder = root / name
    if (root / f"{name}.csv").exists():  # --keep: recorded and ingested by an earlier run
        return folder
    started = time.perf_counter()
    _twinlake("excite", *args, "--seconds", str(seconds), "--output", str(folder))
    print(f"{name}: excite {time.perf_counter() - started:.1f} s", flush=True)
    rec = record(folder / "reference.csv", root / f"{name}.csv", plant=plant, settle_s=1.0, tail_s=0.3)
    for outcome in ingest_paths(Lake(root / "lake"), [rec.csv_path], ReadOptions(robot="plant", run=name)):
        if outcome.status != "published":
            raise RuntimeError(f"{name}: {outcome.message}")
    return folder


def fitted(root: Path, name: str) -> tuple[dict, float | None]:
    """(`fit show --json` of the default fit of plant/<name>, its wall seconds; None: fitted
    by an earlier --keep run)."""
    show = ("fit", "show", f"fit-{name}", "--json", "--lake", str(root / "lake"))
    wall = None
    try:
        shown = json.loads(_twinlake(*show))
    except subprocess.CalledProcessError:
        started = time.perf_counter()
        _twinlake("fit", "run", "--train", f"plant/{name}", "--id", f"fit-{name}", "--lake", str(root / "lake"),
                  "--seed", "0")
        wall = time.perf_counter() - started
        shown = json.loads(_twinlake(*show))
    print(f"{name}: fit {wall if wall is None else round(wall, 1)} s", flush=True)
    return shown, wall


def realised(shown: dict) -> tuple[dict[str, float | None], set[str], dict]:
    """name → relative 95 % half-width (fit/records/design_check: `fit show`'s own; None: no
    interval) of every free parameter, the names at a bound, and name → stored parameter row."""
    from twinlake.fit.records.design_check import realised_half_widths

    ident = shown.get("identifiability") or shown.get("record", {}).get("identifiability") or {}
    found = realised_half_widths(ident)
    rows = {p["name"]: p for p in ident.get("parameters", [])}
    return {n: rel for n, (rel, _) in found.items()}, {n for n, (_, bound) in found.items() if bound}, rows


def _pct(value) -> str:
    return "none" if value is None else f"{value:.2%}"


def _worst(values: dict, names: list[str]) -> float:
    return max(float("inf") if values.get(n) is None else values[n] for n in names)


def report(names: list[str], predicted: dict[str, dict], fits: dict[str, tuple], truth: dict | None) -> None:
    """The per-parameter table and the acceptance lines."""
    cols = list(fits)
    head = "".join(f"{'pred ' + k[:9]:>16}{k[:12]:>13}" if k in predicted else f"{k[:12]:>13}" for k in cols)
    print(f"{'parameter':<22}{head}  (* at a bound)")
    for n in names:
        cells = ""
        for k in cols:
            rel, bound, _ = fits[k]
            if k in predicted:
                cells += f"{_pct(predicted[k].get(n)):>16}"
            cells += f"{_pct(rel.get(n)):>12}{'*' if n in bound else ' '}"
        print(f"{n:<22}{cells}")
    worst = {k: _worst(fits[k][0], names) for k in cols}
    for k in cols:
        none = [n for n in names if fits[k][0].get(n) is None]
        if none:
            print(f"{k}: no interval (its worst counts as unbounded) for {', '.join(none)}")
    for k in predicted:
        ratio = {n: fits[k][0][n] / predicted[k][n] for n in names
                 if fits[k][0].get(n) is not None and predicted[k].get(n)}
        inside = sum(1 / WITHIN <= r <= WITHIN for r in ratio.values())
        worst_pred = _worst(predicted[k], names)
        print(f"{k}: worst over {len(names)}: realised {worst[k]:.3%}, predicted {worst_pred:.3%}; "
              f"documented / {k} {worst['documented'] / worst[k]:.2f}x (target >= 2); worst realised / worst "
              f"predicted {worst[k] / worst_pred:.2f}x (target <= {WITHIN}); per parameter within {WITHIN}x: "
              f"{inside}/{len(names)} (ratios {min(ratio.values()):.2f}..{max(ratio.values()):.2f}x); "
              f"at a bound {len(fits[k][1] & set(names))}")
    if truth is not None:
        for k in cols:
            rows = fits[k][2]
            hit = sum(1 for n in names if rows.get(n, {}).get("ci95_low") is not None
                      and rows[n]["ci95_low"] <= truth[n] <= rows[n]["ci95_high"])
            print(f"{k}: truth inside the fit's 95 % interval for {hit}/{len(names)}")


def explained_truth() -> dict[str, float]:
    """name → the explained plant's value of every per-joint parameter."""
    return {f"{g}_j{j + 1}": v[j] for g, v in EXPLAINED.items() if isinstance(v, tuple) for j in range(7)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--plant", choices=("independent", "explained"), default="independent")
    ap.add_argument("--redesign", action="store_true", help="design again at the first fit's estimate (--for FIT)")
    ap.add_argument("--noise-seed", type=int, default=1, help="the plant's noise seed of the first run (+1 per run)")
    ap.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="design-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"load {os.getloadavg()[0]:.2f}; plant {args.plant}; work in {root}", flush=True)
    runs = dict(EXCITATIONS)
    if args.redesign:
        runs["redesigned"] = DESIGN + ["--for", "fit-designed", "--lake", str(root / "lake")]
    fits, predicted = {}, {}
    for offset, (name, excite) in enumerate(runs.items()):  # the redesign needs the first fit
        folder = make_run(root, name, excite, args.seconds, plant_truth(args.plant, args.noise_seed + offset))
        shown, _ = fitted(root, name)
        fits[name] = realised(shown)
        if excite[:1] == DESIGN:
            design = json.loads((folder / "metadata.json").read_text())["design"]
            predicted[name] = design["predicted_half_width_rel"]
            print(f"{name}: prediction by {design['prediction']} "
                  f"({design.get('confirmation', {}).get('seconds')}), linearised at {design['linearised_at']}")
    names = list(predicted["designed"])
    print(f"load {os.getloadavg()[0]:.2f}")
    report(names, predicted, fits, explained_truth() if args.plant == "explained" else None)


if __name__ == "__main__":
    main()
