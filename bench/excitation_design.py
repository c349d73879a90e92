"""Benchmark: does a designed excitation narrow the fitted intervals as predicted?

Two 40 s excitations of all seven joints, both within fr3_stack's preflight bounds, made by
the user's commands:

- ``documented``: `twinlake excite --mode multisine --joints 1 2 3 4 5 6 7 --seconds 40`
  (fr3_stack's documented tones 0.1/0.23/0.41 Hz, 1°, seed 0);
- ``designed``: `twinlake excite --design --seconds 40` (the surrogate's choice; its
  metadata.json carries the predicted relative 95 % half-width of every parameter).

Each reference is recorded on the project's independent test plant (tests/plant, its own
MuJoCo loop and friction law, noise seed per run), ingested, and fitted by `twinlake fit run`
with its defaults (FrankaTwin's 29 parameters, the local search). Printed per parameter: the
realised relative 95 % half-width (the stored 95 % interval's (high − low) / 2 / |estimate|) of each fit and the
design's prediction, then the worst over the continuous parameters the design chose, the
ratio documented / designed (target ≥ 2) and realised / predicted for the design (target
≤ 1.5). What it cannot show: one plant and one noise seed per run, so the ratios carry the
scatter of one replicate; the surrogate is linearised at the nominal profile, not the plant.

    python bench/excitation_design.py [--seconds 40] [--keep DIR]
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
EXCITATIONS = {
    "documented": ["--mode", "multisine", "--joints", "1", "2", "3", "4", "5", "6", "7"],
    "designed": ["--design"],
}


def _twinlake(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "twinlake", *args], check=True, capture_output=True, text=True)
    return out.stdout


def make_run(root: Path, name: str, seconds: float, seed: int) -> Path:
    """`twinlake excite` preview → recorded on the plant → ingested as plant/<name>."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from plant import IndependentPlant, record

    from twinlake.catalog import Lake
    from twinlake.ingest import ReadOptions, ingest_paths

    folder = root / name
    if (root / f"{name}.csv").exists():  # --keep: recorded and ingested by an earlier run
        return folder
    _twinlake("excite", *EXCITATIONS[name], "--seconds", str(seconds), "--output", str(folder))
    rec = record(folder / "reference.csv", root / f"{name}.csv", plant=IndependentPlant(seed=seed),
                 settle_s=1.0, tail_s=0.3)
    for outcome in ingest_paths(Lake(root / "lake"), [rec.csv_path], ReadOptions(robot="plant", run=name)):
        if outcome.status != "published":
            raise RuntimeError(f"{name}: {outcome.message}")
    return folder


def realised(root: Path, name: str) -> tuple[dict[str, float], set[str], float]:
    """Relative 95 % half-width (fit/records/design_check: `fit show`'s own) of every free parameter with a stderr of the default fit of
    plant/<name>, the names of those at a bound (their stderr assumes an interior optimum),
    and the fit's wall seconds (None: fitted by an earlier --keep run)."""
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
    from twinlake.fit.records.design_check import realised_half_widths

    ident = shown.get("identifiability") or shown.get("record", {}).get("identifiability") or {}
    found = realised_half_widths(ident)
    out = {name: rel for name, (rel, _) in found.items() if rel is not None}
    at_bound = {name for name, (rel, bound) in found.items() if rel is not None and bound}
    return out, at_bound, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="design-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"load {os.getloadavg()[0]:.2f}; work in {root}", flush=True)
    folders = {name: make_run(root, name, args.seconds, seed) for seed, name in enumerate(EXCITATIONS, start=1)}
    design = json.loads((folders["designed"] / "metadata.json").read_text())["design"]
    predicted = design["predicted_half_width_rel"]
    fits = {name: realised(root, name) for name in EXCITATIONS}
    names = [n for n in predicted if all(n in fits[k][0] for k in fits)]
    missing = [n for n in predicted if n not in names]
    print(f"{'parameter':<22}{'predicted':>11}{'designed':>11}{'documented':>12}  (* at a bound)")
    for n in names:
        mark = {k: "*" if n in fits[k][1] else " " for k in fits}
        print(f"{n:<22}{predicted[n]:>11.2%}{fits['designed'][0][n]:>10.2%}{mark['designed']}"
              f"{fits['documented'][0][n]:>11.2%}{mark['documented']}")
    print(f"compared over {len(names)} of {len(predicted)} designed parameters (no stderr in a fit: "
          f"{', '.join(missing) or 'none'}); load {os.getloadavg()[0]:.2f}")
    interior = [n for n in names if all(n not in fits[k][1] for k in fits)]
    if interior:
        w = {k: max(fits[k][0][n] for n in interior) for k in fits}
        print(f"over the {len(interior)} parameters interior in both fits: worst designed {w['designed']:.2%}, "
              f"documented {w['documented']:.2%}, ratio {w['documented'] / w['designed']:.2f}x")
    worst = {k: max(fits[k][0][n] for n in names) for k in fits}
    print(f"worst relative half-width: designed {worst['designed']:.2%} (predicted {design['predicted_worst_rel']:.2%}), "
          f"documented {worst['documented']:.2%} (predicted {design['baseline_predicted_worst_rel']:.2%})")
    print(f"documented / designed {worst['documented'] / worst['designed']:.2f}x (target >= 2); "
          f"designed realised / predicted {worst['designed'] / design['predicted_worst_rel']:.2f}x (target <= 1.5); "
          f"fit walls (s) {fits['designed'][2]} / {fits['documented'][2]}")


if __name__ == "__main__":
    main()
