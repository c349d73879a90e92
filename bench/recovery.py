"""Benchmark: recovery of a synthetic truth, twinlake's fit beside MuJoCo's own Gauss–Newton.

1. A truth is sampled per joint uniformly inside the span of the published figures
   (FrankaTwin 0.3.0 and v3 fits, Menagerie's fr3.xml): armature, static and
   dynamic friction, viscous; the delay uniformly in 1..3 ms.
2. Training and held-out runs: multisine excitations of all 7 joints from the daemon's
   planner (held-out: other tones and phases), recorded by the offline recorder on the truth
   with its default measurement noise (q 2e-5 rad, dq 5e-4 rad/s), ingested into a lake.
3. twinlake: `run_fit` on a local Ray (CMA-ES + categorical delay, then LM refinement), all
   parameters (`twinlake.sim.LAYOUT`, FrankaTwin's 29) free with FrankaTwin's bounds.
4. Peer: MuJoCo's Gauss–Newton / Levenberg–Marquardt (`mujoco.minimize.least_squares`, the
   optimizer `mujoco.sysid.optimize` runs) on the parameters a MuJoCo joint can express —
   armature, damping (= viscous) and frictionloss (one Coulomb level; static = dynamic) —
   with no delay, from Menagerie's values, on the same residuals (our replay; the columns of
   its vectorised residual calls are evaluated as one population).

Prints per parameter the relative error of both, the delay found, and the held-out q RMSE
against the noise floor (the truth replayed). Targets: armature, Coulomb (dynamic) and
viscous within 5 % on excited joints, delay exact, held-out q RMSE ≤ 1.2× the floor.

    python bench/recovery.py [--seed 0] [--seconds 6] [--population 24]
                                            [--generations 15] [--refine 12] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

# published per-joint figures: FrankaTwin 0.3.0, FrankaTwin v3, Menagerie
ARMATURE = [[.425, .281, .185, .189, .182, .159, .106], [.382, .159, .157, .174, .239, .180, .060],
            [.195, .195, .195, .195, .074, .074, .074]]
STATIC = [[1.13, 1.04, 1.58, 1.74, 1.17, 1.38, 1.02], [.73, 1.17, .59, 1.03, 1.63, 1.14, 1.06],
          [1.137, 1.137, 1.137, 1.137, .763, .44, .248]]
DYNAMIC = [[.59, .65, 1.00, 1.20, .75, .41, .44], [.29, .90, .34, .81, .92, .58, .50]]
VISCOUS = [[2.73, 3.27, .76, 2.23, 1.09, .05, .50], [3.68, 2.29, 2.87, 2.37, 3.30, .79, 1.94],
           [.21] * 7]


def sample_truth(seed: int):
    """A DynamicsParams drawn inside the published per-joint spans."""
    from twinlake.sim import DynamicsParams

    rng = np.random.default_rng(seed)

    def span(table):
        arr = np.array(table)
        return rng.uniform(arr.min(0), arr.max(0))

    mu_static = span(STATIC)
    mu_dynamic = np.minimum(span(DYNAMIC), 0.95 * mu_static)
    return DynamicsParams(armature=span(ARMATURE), mu_static=mu_static, dynamic_ratio=mu_dynamic / mu_static,
                          mu_viscous=span(VISCOUS), motor_delay_ms=int(rng.integers(1, 4)))


def record(root: Path, truth_path: Path, name: str, tones, seed: int, seconds: float) -> str:
    """Record run `name` on the truth (twinlake.synthetic) and ingest it; returns its selector."""
    from twinlake.synthetic import multisine_run, record_and_ingest

    spec = multisine_run(name, tones, seed, seconds=seconds, amplitude_deg=12.0, ramp_s=1.0, hold_s=0.3,
                         tail_s=0.3)
    return record_and_ingest([spec], root / "recordings", root / "lake", robot="bench", truth_path=truth_path)[0]


# what a MuJoCo joint expresses, in the peer's x order: armature, damping (= viscous), frictionloss
PEER_GROUPS = ("armature", "mu_viscous", "mu_static")


def mujoco_peer(lake: Path, train: list[str], max_iter: int) -> tuple[np.ndarray, float, float]:
    """MuJoCo's LM on (armature, damping, frictionloss) × 7, no delay; returns (n,), loss, s."""
    from mujoco import minimize

    from twinlake.fit.core.objective import FitProblem
    from twinlake.sim import LAYOUT, DynamicsParams

    problem = FitProblem.from_lake(lake, train)
    nominal = DynamicsParams.nominal()
    x0 = np.concatenate([getattr(nominal, g) for g in PEER_GROUPS])
    rows = [LAYOUT.slice(g) for g in PEER_GROUPS]

    def full(x: np.ndarray) -> np.ndarray:  # x (21, k) → (k, n), every other parameter 0
        p = np.zeros((x.shape[1], LAYOUT.size))
        for part, where in zip(np.split(x, len(PEER_GROUPS)), rows):
            p[:, where] = part.T
        p[:, LAYOUT.slice("dynamic_ratio")] = 1.0  # one Coulomb level: static = dynamic
        return p

    def residual(x: np.ndarray) -> np.ndarray:
        return problem.residuals(full(np.atleast_2d(x.T).T if x.ndim == 1 else x)).T

    lo = np.concatenate([LAYOUT.bounds[where, 0] for where in rows])
    hi = np.concatenate([LAYOUT.bounds[where, 1] for where in rows])
    started = time.perf_counter()
    x, _log = minimize.least_squares(x0, residual, bounds=[lo, hi], max_iter=max_iter, verbose=0, eps=1e-6)
    params = full(x.reshape(-1, 1))[0]
    return params, float(problem.loss(params[None])[0]), time.perf_counter() - started


def holdout_rmse(lake: Path, holdout: list[str], named: dict[str, np.ndarray]) -> dict[str, float]:
    from twinlake.fit.core.objective import FitProblem

    problem = FitProblem.from_lake(lake, holdout)
    names = list(named)
    out = problem.rollout(np.stack([named[n] for n in names]))
    sq = sum(((q - inp.q_ref[None]) ** 2).sum(axis=(1, 2)) for inp, (q, _) in zip(problem.data.inputs, out))
    count = sum(inp.q_ref.size for inp in problem.data.inputs)
    return {n: float(np.sqrt(sq[i] / count)) for i, n in enumerate(names)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--population", type=int, default=24)
    ap.add_argument("--generations", type=int, default=15)
    ap.add_argument("--refine", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--peer-iterations", type=int, default=30)
    args = ap.parse_args()

    import ray

    from twinlake.fit.run import FitSettings, run_fit
    from twinlake.sim import LAYOUT, save_profile

    truth = sample_truth(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        truth_path = save_profile(truth, root / "truth.json")
        train = [record(root, truth_path, f"train{i}", (0.3, 0.7, 1.3), 10 + i, args.seconds) for i in (1, 2)]
        holdout = [record(root, truth_path, "holdout", (0.4, 0.9, 1.7), 20, args.seconds)]
        lake = root / "lake"
        ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        settings = FitSettings(train=train, holdout=holdout, population=args.population,
                               generations=args.generations, seed=args.seed, refine_iterations=args.refine)
        started = time.perf_counter()
        rec = run_fit(lake, settings, fit_id="recovery", workers=args.workers, progress=True)
        fit_s = time.perf_counter() - started
        ray.shutdown()
        peer, peer_loss, peer_s = mujoco_peer(lake, train, args.peer_iterations)
        rmse = holdout_rmse(lake, holdout, {"twinlake": rec.vector, "mujoco LM": peer, "truth": truth.to_vector()})

    t = truth.to_vector()
    mu_dyn_truth, mu_dyn_fit = truth.mu_dynamic, rec.params.mu_dynamic
    print(f"\ntruth seed {args.seed}; twinlake fit {fit_s:.0f} s (loss {rec.best_loss:.3g}); "
          f"MuJoCo LM {peer_s:.0f} s (loss {peer_loss:.3g})")
    print(f"{'parameter':16s} {'truth':>8s} {'twinlake':>9s} {'err %':>7s} {'mujoco':>8s} {'err %':>7s}")
    rows = {}
    for i, name in enumerate(LAYOUT.names):
        group = LAYOUT.group_of(name).name
        if group not in {g.name for g in LAYOUT.joint_groups}:
            continue  # the delay: printed below
        mj = peer[i] if group in PEER_GROUPS else None
        err = 100 * (rec.vector[i] - t[i]) / t[i]
        mj_err = 100 * (mj - t[i]) / t[i] if mj is not None and group != "mu_static" else None
        rows[name] = err
        print(f"{name:16s} {t[i]:8.3f} {rec.vector[i]:9.3f} {err:+7.1f} "
              + (f"{mj:8.3f} {mj_err:+7.1f}" if mj_err is not None else f"{'-':>8s} {'-':>7s}"))
    peer_coulomb = LAYOUT.take(peer, "mu_static")  # its one Coulomb level
    for j in range(7):
        err = 100 * (mu_dyn_fit[j] - mu_dyn_truth[j]) / mu_dyn_truth[j]
        mj_err = 100 * (peer_coulomb[j] - mu_dyn_truth[j]) / mu_dyn_truth[j]
        rows[f"mu_dynamic_j{j + 1}"] = err
        print(f"mu_dynamic_j{j + 1:<5d} {mu_dyn_truth[j]:8.3f} {mu_dyn_fit[j]:9.3f} {err:+7.1f} "
              f"{peer_coulomb[j]:8.3f} {mj_err:+7.1f}")
    print(f"motor_delay_ms   truth {truth.motor_delay_ms}, twinlake {rec.params.motor_delay_ms}, mujoco - (not expressible)")
    floor = rmse["truth"]
    print(f"held-out q RMSE [mrad]: twinlake {1e3 * rmse['twinlake']:.4f} ({rmse['twinlake'] / floor:.2f}× floor), "
          f"mujoco LM {1e3 * rmse['mujoco LM']:.4f} ({rmse['mujoco LM'] / floor:.2f}× floor), "
          f"noise floor {1e3 * floor:.4f}")
    targeted = [n for n in rows if n.split("_j")[0] in ("armature", "mu_dynamic", "mu_viscous")]
    within = [n for n in targeted if abs(rows[n]) <= 5.0]
    print(f"targets: {len(within)}/{len(targeted)} armature/Coulomb/viscous within 5 %; delay "
          f"{'exact' if truth.motor_delay_ms == rec.params.motor_delay_ms else 'WRONG'}; held-out "
          f"{rmse['twinlake'] / floor:.2f}× floor (target ≤ 1.2)")
    print(json.dumps({"max_abs_err_pct": max(abs(v) for v in rows.values()),
                      "holdout_ratio": rmse["twinlake"] / floor}))


if __name__ == "__main__":
    main()
