"""The fit methods bench/fit_speed.py and bench/fit_truths.py share: the benchmark's lake, one
twinlake fit, MuJoCo's least squares on the same residuals, and the errors against a truth.

Its own module so that the two benches import it one way (fit_speed -> fit_truths -> fit_methods)
instead of each other.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recovery import record, sample_truth  # noqa: E402


def make_lake(root: Path, seed: int, seconds: float, tones=((0.3, 0.7, 1.3), (0.4, 0.9, 1.7)), phase_seed: int = 0):
    """Three training runs on the first tone set, one held-out run on the second, recorded on
    `sample_truth(seed)` (phases and noise from `phase_seed`: 0 gives the original bench's runs)."""
    from twinlake.sim import save_profile

    truth = sample_truth(seed)
    truth_path = save_profile(truth, root / "truth.json")
    train = [record(root, truth_path, f"train{i}", tones[0], phase_seed + 10 + i, seconds) for i in (1, 2, 3)]
    holdout = [record(root, truth_path, "holdout", tones[1], phase_seed + 20, seconds)]
    return truth, train, holdout


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of the processes `pids` (Linux /proc; NaN elsewhere)."""
    import os

    try:
        total = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def twinlake_fit(lake: Path, train, holdout, method: str, seed: int, workers: int, space: dict | None = None):
    import os

    from twinlake.fit.run import FitSettings, run_fit

    extra = {} if space is None else {"space": space}
    settings = FitSettings(train=train, holdout=holdout, population=32, generations=20, seed=seed,
                           refine_iterations=10, method=method, **extra)  # `fit run`'s defaults
    actor_cpu: dict[int, float] = {}

    def on_stage(_k: int, pool) -> None:  # the actors' CPU so far (they are gone after run_fit)
        if hasattr(pool, "pids"):
            actor_cpu.update({pid: _cpu_s([pid]) for pid in pool.pids()})

    load0, cpu0 = os.getloadavg()[0], time.process_time()
    started = time.perf_counter()
    fit_id = f"speed-{method}-{settings.digest()[:8]}"
    rec = run_fit(lake, settings, fit_id=fit_id, workers=workers, progress=False, on_generation=on_stage)
    wall = time.perf_counter() - started
    stages: dict[str, float] = {}
    for h in rec.history:
        stages[h["stage"]] = stages.get(h["stage"], 0.0) + h["iter_s"]
    print(f"  {method}: stage seconds " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
          + f", error bars {rec.extra['error_bars_s']:.1f}, rest {wall - sum(stages.values()) - rec.extra['error_bars_s']:.1f}"
          + f"; CPU s: driver {time.process_time() - cpu0:.1f}, actors {sum(actor_cpu.values()):.1f}; "
          f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
    return rec.vector, wall, rec.extra.get("local_gates"), rec


def mujoco_fit(lake: Path, train, delay: int, workers: int, max_iter: int):
    """mujoco.minimize.least_squares over the 28 continuous parameters at `delay`."""
    from mujoco import minimize

    from twinlake.fit.core.objective import build_data
    from twinlake.fit.core.pool import RayPool
    from twinlake.fit.core.space import ParameterSpace
    from twinlake.sim import DynamicsParams

    space = ParameterSpace()
    started = time.perf_counter()
    pool = RayPool(build_data(lake, train), workers, chunk=16)
    try:
        def residual(x: np.ndarray) -> np.ndarray:
            z = np.atleast_2d(x.T) if x.ndim == 1 else x.T
            r = pool.residuals(space.decode(z, np.full(len(z), delay))).T
            return r[:, 0] if x.ndim == 1 else r

        z0 = space.encode(DynamicsParams.nominal().to_vector()[None])[0]
        n = len(z0)
        z, _ = minimize.least_squares(z0, residual, bounds=[np.zeros(n), np.ones(n)], max_iter=max_iter,
                                      verbose=0, eps=1e-3)
    finally:
        pool.close()
    return space.decode(z[None], np.array([delay]))[0], time.perf_counter() - started, None


def errors(vec: np.ndarray, truth) -> tuple[float, str, float]:
    """(worst |rel. error| % over armature, Coulomb, viscous; its name; worst over mu_static)."""
    from twinlake.sim import DynamicsParams

    fit = DynamicsParams.from_vector(vec)
    worst, name = 0.0, ""
    for group, f, t in (("armature", fit.armature, truth.armature), ("mu_dynamic", fit.mu_dynamic, truth.mu_dynamic),
                        ("mu_viscous", fit.mu_viscous, truth.mu_viscous)):
        rel = np.abs(np.asarray(f) - t) / np.abs(t) * 100
        j = int(np.argmax(rel))
        if rel[j] > worst:
            worst, name = float(rel[j]), f"{group}_j{j + 1}"
    static = float(np.max(np.abs(np.asarray(fit.mu_static) - truth.mu_static) / truth.mu_static * 100))
    return worst, name, static


def _delay_ms(vec: np.ndarray) -> int:
    """The motor delay of a parameter vector (LAYOUT order; not its last entry since the layout
    grew groups after the delay)."""
    from twinlake.sim import DynamicsParams

    return int(DynamicsParams.from_vector(vec).motor_delay_ms)


def run_methods(lake: Path, train, holdout, truth_delay: int, methods: list[str], seed: int, workers: int,
                mujoco_iterations: int, space: dict | None = None) -> dict:
    """{method: (vector, wall s, gates, record or None)} on one lake, `local` first (MuJoCo gets its delay)."""
    results, local_delay = {}, truth_delay
    for m in methods:
        if m == "mujoco":
            results[m] = (*mujoco_fit(lake, train, local_delay, workers, mujoco_iterations), None)
        else:
            results[m] = twinlake_fit(lake, train, holdout, m, seed, workers, space)
            if m == "local":
                local_delay = _delay_ms(results[m][0])
        print(f"  {m}: {results[m][1]:.1f} s", flush=True)
    return results
