"""Benchmark: do the fit's 95 % intervals cover the truth 19 times in 20?

K independent replicates of one truth, each a fresh lake, its own noise seeds and tone phases,
fitted by the project's default fit (`fit run`'s defaults: the local search, FrankaTwin's 29):

- ``own``: the own-family truth (bench/recovery.py `sample_truth(0)`, the twin's own model
  family: the model is exactly right), three `--seconds` (10) s multisines of all 7 joints
  (tones 0.3/0.7/1.3 Hz, 12°), recorded by the offline recorder with its default noise;
- ``gentle``: the own-family truth, two 10 s multisines of 3° (tones 0.13/0.47/1.1 Hz, phases
  and noise seeded per replicate): the small motions a real arm's guards allow, where the
  measurement noise the recorder feeds into its controller (as a real arm's controller acts on
  its noisy encoders) dithers the friction;
- ``demo``: the own-family truth on `twinlake demo`'s runs: two 4 s multisines (tones
  0.2/0.45/0.8 Hz, 1.5 s ramps) at the largest amplitude inside fr3_stack's default guards
  (`gentle_multisine_run`, about 1°), phases and noise seeded per replicate;
  both gentle families are fitted as `fit run` does by default (its `--refine` cap; the
  held-out run of the issue's check is not recorded: the intervals come from the training runs);
- ``plant``: the independent test plant (tests/plant: its own MuJoCo loop, tanh-smoothed
  asymmetric Coulomb, a 0.8 kg payload its firmware does not know), the extended fit
  `--params +payload +smooth-friction +asymmetry`; its truth in the twin's parameters:
  armature, viscous, mu_static = (c⁺ + c⁻)/2, coulomb_asymmetry = (c⁺ − c⁻)/2, the payload.

Per replicate one JSON line is appended to `--out` (so a long run can be read, resumed and
extended: replicates already in the file are skipped): every free parameter's estimate,
truth and the stored standard error of each covariance method (the fit's default HAC, the
iid Gauss–Newton one, the moving-block bootstrap, HAC at twice the bandwidth; all from the
same Jacobian and residuals), the fit's and the error bars' wall seconds, the load.
`--summary` prints, per method and parameter group, the coverage of the 95 % intervals, the
RMS of (estimate − truth) / stderr, and a 95 % interval on the overall coverage from a
bootstrap over replicates (the parameters of one replicate are not independent draws).

    nohup python bench/interval_coverage.py --family own --replicates 20 --out bench/interval-coverage-own.jsonl &
    python bench/interval_coverage.py --summary bench/interval-coverage-own.jsonl

Named interval_coverage.py, not coverage.py: a `coverage.py` beside the bench scripts (their
sys.path[0]) would shadow the `coverage` package, which numba imports (numba.misc.coverage_support)
and uses while it compiles: tried, an @njit function then fails with "AttributeError: module
'coverage' has no attribute 'types'".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from twinlake.commands.fit import REFINE_ITERATIONS

HERE = Path(__file__).resolve().parent
# this file is named like the `coverage` package numba imports: bench/ must not be on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE.parent / "tests"))  # the independent plant (`plant`), last


def _recovery():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_recovery", HERE / "recovery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record, sample_truth = _recovery().record, _recovery().sample_truth

TONES = (0.3, 0.7, 1.3)
GENTLE_TONES, GENTLE_DEG = (0.13, 0.47, 1.1), 3.0
DEMO_TONES = (0.2, 0.45, 0.8)
CLI_REFINE = REFINE_ITERATIONS  # `fit run --refine`'s default (FitSettings' 0 means 4)
PLANT_SPECS = ["+payload", "+smooth-friction", "+asymmetry"]
PLANT_PAYLOAD_KG = 0.8


def own_replicate(root: Path, rep: int, seconds: float):
    """(train selectors, truth vector (n,), fit space specs) of replicate `rep` (own family)."""
    from twinlake.sim import save_profile

    truth = sample_truth(0)
    truth_path = save_profile(truth, root / "truth.json")
    train = [record(root, truth_path, f"train{i}", TONES, 1000 * (rep + 1) + i, seconds) for i in (1, 2, 3)]
    return train, truth.to_vector(), []


def gentle_replicate(root: Path, rep: int, seconds: float):
    """Family ``gentle``: two `seconds` (10) s multisines of 3° on the own-family truth."""
    from twinlake.sim import save_profile
    from twinlake.synthetic import multisine_run, record_and_ingest

    truth = sample_truth(0)
    truth_path = save_profile(truth, root / "truth.json")
    specs = [multisine_run(f"train{i}", GENTLE_TONES, 1000 * (rep + 1) + i, seconds=seconds,
                           amplitude_deg=GENTLE_DEG, ramp_s=1.0, hold_s=0.3, tail_s=0.3) for i in (1, 2)]
    train = record_and_ingest(specs, root / "recordings", root / "lake", robot="bench", truth_path=truth_path)
    return train, truth.to_vector(), []


def demo_replicate(root: Path, rep: int, seconds: float):
    """Family ``demo``: `twinlake demo`'s two training runs' shape (4 s, inside fr3_stack's
    default guards) on the own-family truth."""
    from twinlake.sim import save_profile
    from twinlake.synthetic import gentle_multisine_run, record_and_ingest

    truth = sample_truth(0)
    truth_path = save_profile(truth, root / "truth.json")
    specs = [gentle_multisine_run(f"train{i}", DEMO_TONES, 1000 * (rep + 1) + i, seconds=4.0, ramp_s=1.5,
                                  hold_s=0.3, tail_s=0.3) for i in (1, 2)]
    train = record_and_ingest(specs, root / "recordings", root / "lake", robot="bench", truth_path=truth_path)
    return train, truth.to_vector(), []


FAMILIES = {"own": own_replicate, "gentle": gentle_replicate, "demo": demo_replicate}


def plant_replicate(root: Path, rep: int, seconds: float):
    """The same on the independent plant; its truth mapped onto the twin's parameters."""
    from plant import IndependentPlant, record as plant_record

    from twinlake.catalog import Lake
    from twinlake.ingest import ReadOptions, ingest_paths
    from twinlake.sim import LAYOUT
    from twinlake.synthetic import multisine_run, write_reference

    plant = IndependentPlant(payload_mass_kg=PLANT_PAYLOAD_KG, smoothing_velocity_rad_s=(0.02,) * 7)
    train = []
    for i in (1, 2, 3):
        seed = 1000 * (rep + 1) + i
        spec = multisine_run(f"train{i}", TONES, seed, seconds=seconds, amplitude_deg=10.0, ramp_s=1.0, hold_s=0.3)
        folder = root / spec.run
        folder.mkdir(parents=True)
        ref = write_reference(spec, folder / "reference.csv")
        made = plant_record(ref, folder / f"{spec.run}.csv", plant=plant.replace(seed=seed), settle_s=1.0, tail_s=0.3)
        for outcome in ingest_paths(Lake(root / "lake"), [made.csv_path], ReadOptions(robot="plant", run=spec.run)):
            if outcome.status != "published":
                raise RuntimeError(f"{made.csv_path}: {outcome.status} {outcome.message}")
        train.append(f"plant/{spec.run}")
    truth = np.array(LAYOUT.nominal, dtype=np.float64)
    put = {"armature": plant.armature, "mu_viscous": plant.viscous,
           "mu_static": (plant.coulomb_pos + plant.coulomb_neg) / 2,
           "coulomb_asymmetry": (plant.coulomb_pos - plant.coulomb_neg) / 2,
           "dynamic_ratio": np.ones(7), "payload_mass": [plant.payload_mass_kg],
           **{f"payload_com_{a}": [c] for a, c in zip("xyz", plant.payload_com_m)}}
    for group, values in put.items():
        truth[LAYOUT.slice(group)] = values
    truth[LAYOUT.index("motor_delay_ms")] = plant.motor_delay_ms
    return train, truth, PLANT_SPECS


def run_replicate(family: str, rep: int, seconds: float, workers: int, raw: Path | None = None,
                  draws: int = 16) -> dict:
    """Record and fit replicate `rep`; with `raw`, also save the error bars' bread JᵀJ and
    per-tick scores (range-scaled, from the local search's checkpoint) to `raw`/<family>-<rep>.npz."""
    import pickle

    from twinlake.catalog import Lake
    from twinlake.fit.run import FitSettings, run_fit, work_dir
    from twinlake.fit.core.space import parse_space

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make = FAMILIES.get(family, plant_replicate)
        train, truth, specs = make(root, rep, seconds)
        settings = FitSettings(train=train, seed=rep, space=parse_space(specs).to_json(),
                               refine_iterations=CLI_REFINE if family in ("gentle", "demo") else 0,
                               loop_noise_draws=draws)
        fit_id = f"coverage-{rep}"

        def keep(stage: int, _pool) -> None:
            ckpt = work_dir(Lake(root / "lake"), fit_id) / f"local-{rep}.pkl"
            if raw is not None and stage == 2 and ckpt.is_file():
                jac = pickle.loads(ckpt.read_bytes()).get("jacobian")  # a JacobianSnapshot or None
                if jac is not None and jac.scores is not None:
                    raw.mkdir(parents=True, exist_ok=True)
                    np.savez_compressed(raw / f"{family}-{rep}.npz", r_factor=jac.r_factor, rows=jac.rows,
                                        **{f"scores{b}": g for b, g in enumerate(jac.scores)})

        t0 = time.perf_counter()
        rec = run_fit(root / "lake", settings, fit_id=fit_id, workers=workers, progress=False, on_generation=keep,
                      nthread=2 if workers == 0 else 1)  # --workers 0: in-process, the engine's two threads
        wall = time.perf_counter() - t0
    ident = rec.identifiability
    cov = ident["covariance"]
    names = cov["names"]
    index = {p["name"]: p for p in ident["parameters"]}
    methods = {cov["method"]: {"stderr": [index[n]["stderr"] for n in names], "dof": cov["dof"],
                               "bandwidth_ticks": cov["bandwidth_ticks"]}}
    methods |= cov["alternatives"]
    from twinlake.sim import LAYOUT

    return {"family": family, "replicate": rep, "names": names,
            "estimate": [float(rec.vector[LAYOUT.index(n)]) for n in names],
            "truth": [float(truth[LAYOUT.index(n)]) for n in names],
            "delay": [int(rec.params.motor_delay_ms), int(truth[LAYOUT.index("motor_delay_ms")])],
            "methods": methods, "default": cov["method"], "wall_s": wall, "error_bars_s": rec.extra.get("error_bars_s"),
            "gates": rec.extra.get("local_gates"), "load": os.getloadavg()[0],
            "flags": {n: index[n]["flags"] for n in names if index[n]["flags"]},
            "estimated": estimated_names(rec), "loop_noise": ident.get("loop_noise"),
            "profile_check": ident.get("profile_check")}


def estimated_names(rec) -> list[str]:
    """The parameters whose status is *estimated* (fit/core/parameter_status.py's rule)."""
    from twinlake.fit.trust.statuses import fit_statuses

    return [st.name for st in fit_statuses(rec) if st.status.value == "estimated"]


def t95(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, max(int(dof), 1)))


LOOP_VARIANTS = {  # offline variants from each row's stored loop-noise block, beside the stored methods
    "loop: corrected θ̂ − bias, HAC + loop + loop/B": "corrected",
    "loop: HAC + loop + bias²": "bias2",
    "loop: max(HAC, bootstrap total)": "max",
}


def method_columns(row: dict) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Per method, (estimate − truth (k,), stderr (k,), dof) of one row: the stored methods and,
    when the fit stored its loop-noise bootstrap, the LOOP_VARIANTS computed from it."""
    err = np.array(row["estimate"]) - np.array(row["truth"])
    out = {}
    for method, m in row["methods"].items():
        out[method] = (err, np.array([np.nan if v is None else v for v in m["stderr"]], dtype=float),
                       m.get("dof", 10**6))
    ln = row.get("loop_noise")
    base = row["methods"].get("hac_without_loop_noise")
    if ln and base:
        hac = np.array([np.nan if v is None else v for v in base["stderr"]], dtype=float)
        loop, total = np.array(ln["stderr_loop"]), np.array(ln["stderr_total"])
        bias, dof = np.array(ln["bias"]), base.get("dof", 10**6)
        for label, kind in LOOP_VARIANTS.items():
            if kind == "corrected":
                out[label] = (err - bias, np.sqrt(hac ** 2 + loop ** 2 * (1 + 1 / ln["draws"])), dof)
            elif kind == "bias2":
                out[label] = (err, np.sqrt(hac ** 2 + loop ** 2 + bias ** 2), dof)
            else:
                out[label] = (err, np.maximum(hac, total), dof)
    return out


def estimated_counts(row: dict) -> tuple[int, int]:
    """(estimated with the stored default intervals, estimated with the measurement-noise HAC
    alone) among the row's free parameters, by parameter_status.classify (the one rule): the
    same values and bounds, each covariance's interval and `unidentifiable` flags."""
    from twinlake.fit.core.parameter_status import Status, classify
    from twinlake.sim import LAYOUT

    ln, base = row.get("loop_noise") or {}, row["methods"].get("hac_without_loop_noise")
    flagged = {n for n, f in row.get("flags", {}).items() if "unidentifiable" in f}
    out = []
    for method, weak in ((row["default"], flagged), ("hac_without_loop_noise", set(ln.get("unidentifiable_without", [])))):
        m = row["methods"].get(method, base)
        if m is None:
            return len(row.get("estimated", [])), len(row.get("estimated", []))
        t = t95(m.get("dof", 10**6))
        count = 0
        for n, v, se in zip(row["names"], row["estimate"], m["stderr"]):
            i = LAYOUT.index(n)
            st = classify(n, v, *LAYOUT.bounds[i], stderr=float("inf") if se is None else se, t95=t,
                          unidentified="flagged" if n in weak else None)
            count += st.status == Status.ESTIMATED
        out.append(count)
    return out[0], out[1]


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion hits/n (as if the n were independent)."""
    if n == 0:
        return float("nan"), float("nan")
    p = hits / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(centre - half), float(centre + half)


def summarise(rows: list[dict], draws: int = 2000, estimated_only: bool = False) -> dict:
    """Per method: coverage and RMS standardised error overall and per group, a bootstrap over
    replicates on the overall coverage and a Wilson interval as if the parameter-replicates were
    independent. `estimated_only`: count only each replicate's parameters whose status is
    *estimated* (rows that stored it)."""
    from twinlake.sim import LAYOUT

    columns = [method_columns(r) for r in rows]
    out = {}
    for method in columns[0]:
        inside, z, groups, mask = [], [], [], []
        for r, cols in zip(rows, columns):
            err, se, dof = cols[method]
            zz = err / se
            inside.append(np.abs(zz) <= t95(dof))
            z.append(zz)
            groups.append([LAYOUT.group_of(n).name for n in r["names"]])
            keep = set(r.get("estimated") or r["names"]) if estimated_only else set(r["names"])
            mask.append([n in keep for n in r["names"]])
        inside_a, z_a, mask_a = np.array(inside, dtype=float), np.array(z), np.array(mask)
        rng = np.random.default_rng(0)
        pick = rng.integers(0, len(rows), size=(draws, len(rows)))
        boot = np.array([inside_a[p][mask_a[p]].mean() for p in pick])
        per_group = {}
        for g in dict.fromkeys(groups[0]):
            cols = np.array([x == g for x in groups[0]])[None] & mask_a
            per_group[g] = {"coverage": float(inside_a[cols].mean()) if cols.any() else float("nan"),
                            "rms_z": float(np.sqrt(np.nanmean(z_a[cols] ** 2))) if cols.any() else float("nan")}
        hits, n = int(inside_a[mask_a].sum()), int(mask_a.sum())
        out[method] = {"K": len(rows), "n": n, "coverage": hits / n,
                       "coverage_ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                       "wilson_ci95": list(wilson(hits, n)),
                       "rms_z": float(np.sqrt(np.nanmean(z_a[mask_a] ** 2))), "groups": per_group,
                       "bandwidth_ticks_median": float(np.median([r["methods"].get(method, {}).get("bandwidth_ticks", 1)
                                                                  for r in rows]))}
    return out


def bandwidth_sensitivity(rows: list[dict], raw: Path, factors=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0)) -> dict[str, dict]:
    """Coverage and RMS z of HAC at `factors` × each replicate's Andrews bandwidth, and of the
    per-tick sandwich without serial terms (L = 1), from the saved bread and scores (`--raw`)."""
    from twinlake.fit.core import covariance as cv
    from twinlake.fit.core.space import ParameterSpace
    from twinlake.sim import LAYOUT

    out: dict[str, dict] = {}
    for r in rows:
        path = raw / f"{r['family']}-{r['replicate']}.npz"
        if not path.is_file():
            continue
        d = np.load(path)
        scores = [d[f"scores{b}"] for b in range(len([k for k in d.files if k.startswith("scores")]))]
        bread = d["r_factor"].T @ d["r_factor"]
        space = ParameterSpace.from_json(__import__("twinlake.fit.core.space", fromlist=["parse_space"]).parse_space(
            PLANT_SPECS if r["family"] == "plant" else []).to_json())
        rng = np.array([space.bounds[LAYOUT.index(n), 1] - space.bounds[LAYOUT.index(n), 0] for n in r["names"]])
        err = np.array(r["estimate"]) - np.array(r["truth"])
        base = cv.andrews_bandwidth(scores)
        for label, L in [("L=1 (per-tick sandwich)", 1)] + [(f"{f:g}x Andrews", max(1, round(f * base))) for f in factors]:
            est = cv.from_scores(bread, scores, 1.0, int(d["rows"]), cv.HAC, L)
            z = err / (est.stderr * rng)
            acc = out.setdefault(label, {"inside": [], "z": []})
            acc["inside"].append(np.abs(z) <= est.t95)
            acc["z"].append(z)
    return {k: {"K": len(v["z"]), "coverage": float(np.mean(v["inside"])),
                "rms_z": float(np.sqrt(np.mean(np.square(v["z"]))))} for k, v in out.items()}


def print_summary(rows: list[dict], raw: Path | None = None) -> None:
    walls = [r["wall_s"] for r in rows]
    bars = [r["error_bars_s"] or 0.0 for r in rows]
    print(f"{rows[0]['family']}: K = {len(rows)} replicates, fit wall {np.median(walls):.0f} s median "
          f"(load {np.median([r['load'] for r in rows]):.1f}), error bars (with the loop-noise bootstrap) "
          f"{np.median(bars):.2f} s median; delay right in "
          f"{sum(r['delay'][0] == r['delay'][1] for r in rows)} of {len(rows)}")
    with_status = all("estimated" in r for r in rows)
    for estimated_only in ((False, True) if with_status else (False,)):
        s = summarise(rows, estimated_only=estimated_only)
        print("  over the parameters whose status is estimated" if estimated_only else "  over every free parameter")
        for method, m in s.items():
            lo, hi = m["coverage_ci95"]
            wl, wh = m["wilson_ci95"]
            print(f"    {method:46s} {100 * m['coverage']:5.1f} % of {m['n']} [bootstrap over replicates "
                  f"{100 * lo:.1f}, {100 * hi:.1f}; as if independent (Wilson) {100 * wl:.1f}, {100 * wh:.1f}] "
                  f"RMS z {m['rms_z']:.2f}")
            print("        " + "; ".join(f"{g} {100 * v['coverage']:.0f} % / {v['rms_z']:.2f}"
                                         for g, v in m["groups"].items()))
    if with_status:  # the default's misses by joint, over estimated parameters
        miss: dict[str, list[int]] = {}
        for r in rows:
            err, se, dof = method_columns(r)[r["default"]]
            for n, e, sd in zip(r["names"], err, se):
                if n in r["estimated"]:
                    acc = miss.setdefault(n.rsplit("_", 1)[-1], [0, 0])
                    acc[0] += int(abs(e / sd) > t95(dof))
                    acc[1] += 1
        print("  default's intervals missing the truth, by joint (estimated only): "
              + ", ".join(f"{j} {m}/{n}" for j, (m, n) in sorted(miss.items())))
        est = [len([n for n in r["estimated"] if n in r["names"]]) for r in rows]
        counts = np.array([estimated_counts(r) for r in rows])
        print(f"  estimated parameters per replicate (stored statuses): {min(est)}..{max(est)} (mean {np.mean(est):.1f}) "
              f"of {len(rows[0]['names'])}; by classify: default {counts[:, 0].sum()}, measurement-noise HAC alone "
              f"{counts[:, 1].sum()} over the {len(rows)} replicates")
    if raw is not None:
        for label, v in bandwidth_sensitivity(rows, raw).items():
            print(f"  HAC {label:24s} coverage {100 * v['coverage']:5.1f} % RMS z {v['rms_z']:.2f} (K {v['K']})")
    print(json.dumps(summarise(rows, estimated_only=with_status)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=("own", "gentle", "demo", "plant"), default="own")
    ap.add_argument("--loop-noise-draws", type=int, default=16, help="the fit's setting (0: off)")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="JSON lines file (appended; done replicates skipped)")
    ap.add_argument("--summary", type=Path, default=None, help="only summarise this JSON lines file")
    ap.add_argument("--raw", type=Path, default=None, help="also save each replicate's bread and scores here (.npz)")
    args = ap.parse_args()
    if args.summary is not None:
        rows = [json.loads(x) for x in args.summary.read_text().splitlines() if x.strip()]
        for family in dict.fromkeys(r["family"] for r in rows):
            print_summary([r for r in rows if r["family"] == family], args.raw)
        return
    out = args.out or Path(f"coverage-{args.family}.jsonl")
    done = {(r["family"], r["replicate"]) for r in map(json.loads, out.read_text().splitlines())} \
        if out.is_file() else set()
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # before Ray's import (as fit/run.py does)
    import ray

    if args.workers > 0:  # --workers 0 fits in-process (the same bytes: results never depend on the workers)
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    for rep in range(args.start, args.start + args.replicates):
        if (args.family, rep) in done:
            continue
        row = run_replicate(args.family, rep, args.seconds, args.workers, args.raw, args.loop_noise_draws)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"replicate {rep}: wall {row['wall_s']:.0f} s, load {row['load']:.1f}", flush=True)
    if ray.is_initialized():
        ray.shutdown()
    print_summary([json.loads(x) for x in out.read_text().splitlines() if json.loads(x)["family"] == args.family])


if __name__ == "__main__":
    main()
