"""Benchmark: population replay engine vs open-loop mujoco.rollout vs the per-candidate reference.

P = 64 candidates, a 10 s joint-impedance interval at 1 kHz, our FR3 model, same thread count.
The rollout peer runs the same candidates' models (armature, damping, breakaway level) driven
open loop by the joint torques the population engine applied (delayed commands + sliding
friction relief), so it integrates the same trajectories: the same physics without the
controller, the delay line or any Python in the loop.
The engine runs its compiled loop (the tick as MuJoCo's control callback, one batch call per
interval); its per-tick loop (one kernel call and one batch step per tick) is timed alongside
for comparison. The runs are interleaved `--repeat` times (the machine's load changes from
minute to minute, and noise only ever adds time): the ratio of the best runs (as `timeit`
recommends) is the headline, the median ratio and the ratio of process CPU times follow.
Prints sim-steps/s of each and the ratios (targets: ≥ 0.8× rollout, ≥ 5× per-candidate loop).
Then the Cartesian law on a 50 Hz FrankaTwin-like log: the compiled loop against the per-tick
numpy loop.

    python bench/replay.py [--population 64] [--seconds 10] [--nthread 2] [--ref-candidates 2] [--repeat 5]
                                          [--cartesian-seconds 2]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import mujoco
import numpy as np
from mujoco import rollout

from twinlake.sim.arm_model.params import delay_ticks, params_matrix
from twinlake.sim.arm_model.plant import StribeckFriction
from twinlake.sim import DEFAULT_BOUNDS, HOME_Q, DynamicsParams, JointImpedanceConfig, PopulationEngine, ReplayInput, load_model, replay_reference


def make_input(seconds: float) -> ReplayInput:
    """A multisine joint-impedance interval around home (1 kHz ticks)."""
    n = int(round(seconds * 1000))
    t = np.arange(n) * 1e-3
    amp = np.array([0.3, 0.2, 0.3, 0.2, 0.4, 0.3, 0.5])
    phase = np.linspace(0, np.pi, 7)
    target = HOME_Q + amp * (np.sin(2 * np.pi * 0.4 * t[:, None] + phase) + 0.3 * np.sin(2 * np.pi * 1.3 * t[:, None]))
    cfg = JointImpedanceConfig()
    return ReplayInput(
        controller="joint_impedance", q0=HOME_Q.copy(), dq0=np.zeros(7), tau_prev0=np.zeros(7),
        tau_history=np.zeros((0, 7)), sample_ticks=np.arange(n), n_ticks=n, q_target=target,
        k_nm_per_rad=np.tile(cfg.k_nm_per_rad, (n, 1)), d_nms_per_rad=np.tile(cfg.d_nms_per_rad, (n, 1)),
        filter_alpha=np.full(n, cfg.filter_alpha),
    )


def make_cartesian_input(seconds: float, model: mujoco.MjModel) -> ReplayInput:
    """A FrankaTwin-like 50 Hz Cartesian log (ZOH time base): the target circles 3 cm around
    the home flange pose."""
    rows = int(round(seconds * 50)) + 1
    home = replay_reference(make_input(0.001), DynamicsParams.nominal(), model)
    t = np.arange(rows) / 50.0
    cols = {"t_s": t}
    for j in range(7):
        cols[f"q{j + 1}"], cols[f"dq{j + 1}"] = np.full(rows, HOME_Q[j]), np.zeros(rows)
    for a in range(3):
        cols["tgt_p" + "xyz"[a]] = home.ee_pos[0, a] + 0.03 * np.sin(2 * np.pi * 0.8 * t + a)
    for a in range(4):
        cols["tgt_q" + "xyzw"[a]] = np.full(rows, home.ee_quat_xyzw[0, a])
    return ReplayInput.from_frames(cols, controller="cartesian_impedance", time_base="zoh_1khz_ticks_per_csv_row",
                                   warmup_ticks=50)


def bench_cartesian(model: mujoco.MjModel, params: np.ndarray, seconds: float, nthread: int, repeat: int) -> None:
    """The Cartesian law: the compiled loop against the per-tick numpy loop (same engine)."""
    inp = make_cartesian_input(seconds, model)
    compiled = PopulationEngine([inp], model=model, nthread=nthread)
    numpy_loop = PopulationEngine([inp], model=model, nthread=nthread, compiled_loop=False)
    a, b = compiled.run(params)[0], numpy_loop.run(params)[0]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        compiled.run(params)
        middle = time.perf_counter()
        numpy_loop.run(params)
        times.append((middle - start, time.perf_counter() - middle))
    steps = len(params) * inp.n_ticks
    t_c, t_n = min(t[0] for t in times), min(t[1] for t in times)
    print(f"Cartesian law, {inp.n_ticks} ticks: compiled loop {steps / t_c:10,.0f} sim-steps/s, per-tick numpy "
          f"{steps / t_n:10,.0f} sim-steps/s, ratio {t_n / t_c:.2f}x (max |Δq| between them "
          f"{np.abs(a.q - b.q).max():.1e} rad)")


def sample_params(population: int, seed: int = 0) -> np.ndarray:
    """(P, n): FrankaTwin's 29 drawn in their bounds, the groups beyond them (payload, asymmetry,
    bias) nominal, as a default fit has them."""
    lo, hi = DEFAULT_BOUNDS[:29, 0], DEFAULT_BOUNDS[:29, 1]
    params = lo + np.random.default_rng(seed).uniform(size=(population, 29)) * (hi - lo)
    params[:, 28] = np.arange(population) % 5
    return params_matrix(params)


def candidate_models(model: mujoco.MjModel, params: np.ndarray) -> list[mujoco.MjModel]:
    """One model per candidate with its armature, damping and breakaway level written in:
    exactly the per-candidate model fields the population engine expands."""
    models = []
    for row in params:
        m = copy.copy(model)
        p = DynamicsParams.from_vector(row)
        m.dof_armature[:7], m.dof_damping[:7], m.dof_frictionloss[:7] = p.armature, p.mu_viscous, p.mu_static
        mujoco.mj_setConst(m, mujoco.MjData(m))
        models.append(m)
    return models


def applied_torques(params: np.ndarray, tau_cmd: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """(P, T, 7) joint torques the population engine applied: τ_cmd delayed by each candidate's
    delay (zeros before tick 0) plus the sliding-friction relief at each tick's dq."""
    population, n, _ = tau_cmd.shape
    delays = delay_ticks(params[:, 28])
    delayed = np.zeros_like(tau_cmd)
    for p in range(population):
        d = int(delays[p])
        delayed[p, d:] = tau_cmd[p, : n - d]
    friction = StribeckFriction(params[:, 7:14][:, None, :], (params[:, 14:21] * params[:, 7:14])[:, None, :])
    relief = friction.sliding_relief(dq, np.empty_like(dq))
    return relief + delayed


def rollout_seconds(models: list[mujoco.MjModel], tau: np.ndarray, nthread: int,
                    q0: np.ndarray = HOME_Q, dq0: np.ndarray | None = None) -> float:
    """Seconds of an open-loop rollout of the candidates' models from (q0, dq0), driven by the
    torques the population engine applied (qfrc_applied, (P, T, 7)): the same trajectories,
    no controller. A 10-step warm-up is not timed."""
    population = len(models)
    model = models[0]
    datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
    d = datas[0]
    d.qpos[:7] = q0
    if dq0 is not None:
        d.qvel[:7] = dq0
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
    state0 = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, d, state0, spec)
    control = np.ascontiguousarray(tau)  # (P, T, 7)
    ctrl_spec = mujoco.mjtState.mjSTATE_QFRC_APPLIED.value
    state0 = np.tile(state0, (population, 1))
    rollout.rollout(models, datas, state0, control[:, :10], control_spec=ctrl_spec)  # warm-up
    start = time.perf_counter()
    rollout.rollout(models, datas, state0, control, control_spec=ctrl_spec)
    return time.perf_counter() - start


def bench_rollout(models: list[mujoco.MjModel], n_ticks: int, nthread: int, tau: np.ndarray) -> float:
    """Open-loop rollout of the candidates' models driven by the torques the population engine
    applied (qfrc_applied): the same trajectories, no controller; returns seconds."""
    return rollout_seconds(models, tau, nthread)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--nthread", type=int, default=2)
    ap.add_argument("--ref-candidates", type=int, default=2, help="reference runs timed (steps/s extrapolated)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved engine/rollout repetitions")
    ap.add_argument("--cartesian-seconds", type=float, default=2.0, help="Cartesian-law comparison (0: skip)")
    args = ap.parse_args()
    model = load_model()
    inp = make_input(args.seconds)
    params = sample_params(args.population)
    n = inp.n_ticks
    steps = args.population * n

    engine = PopulationEngine([inp], model=model, nthread=args.nthread)
    if engine.compiled_loop_error is not None:
        print(f"note: the compiled loop is unavailable ({engine.compiled_loop_error}); timing the per-tick loop")
    per_tick = PopulationEngine([inp], model=model, nthread=args.nthread, compiled_loop=False)
    result = engine.run(params)[0]  # builds the batch (excluded from timing: reused across generations)
    per_tick.run(params)
    applied = applied_torques(params, result.tau_cmd, result.dq)
    models = candidate_models(model, params)
    runs = []
    for _ in range(args.repeat):  # interleaved, so both see the same machine load
        wall, cpu = time.perf_counter(), time.process_time()
        engine.run(params)
        t_pop, c_pop = time.perf_counter() - wall, time.process_time() - cpu
        cpu = time.process_time()
        t_roll = bench_rollout(models, n, args.nthread, applied)
        c_roll = time.process_time() - cpu
        wall = time.perf_counter()
        per_tick.run(params)
        t_tick = time.perf_counter() - wall
        runs.append((t_pop, t_roll, c_pop, c_roll, t_tick))
        print(f"  run {len(runs)}: population {steps / t_pop:10,.0f} steps/s, rollout {steps / t_roll:10,.0f} steps/s, "
              f"ratio {t_roll / t_pop:.2f}x (CPU-time ratio {c_roll / c_pop:.2f}x); per-tick loop "
              f"{t_roll / t_tick:.2f}x", flush=True)

    start = time.perf_counter()
    for i in range(args.ref_candidates):
        replay_reference(inp, DynamicsParams.from_vector(params[i]), model)
    t_ref = (time.perf_counter() - start) / args.ref_candidates * args.population

    med = statistics.median
    t_pop, t_roll, t_tick = min(r[0] for r in runs), min(r[1] for r in runs), min(r[4] for r in runs)
    ratio, cpu_ratio = med(r[1] / r[0] for r in runs), med(r[3] / r[2] for r in runs)
    print(f"P={args.population}, {n} ticks, nthread={args.nthread}, best of {args.repeat} interleaved runs")
    print(f"population engine : {steps / t_pop:12,.0f} sim-steps/s  ({t_pop:.2f} s)")
    print(f"mujoco.rollout    : {steps / t_roll:12,.0f} sim-steps/s  ({t_roll:.2f} s, open loop)")
    print(f"per-tick loop     : {steps / t_tick:12,.0f} sim-steps/s  ({t_tick:.2f} s, the engine without its compiled loop)")
    print(f"reference loop    : {steps / t_ref:12,.0f} sim-steps/s  ({t_ref:.2f} s extrapolated from {args.ref_candidates})")
    print(f"ratio vs rollout  : {t_roll / t_pop:.2f}x best/best (target >= 0.8x); median of the run ratios "
          f"{ratio:.2f}x, CPU-time ratio {cpu_ratio:.2f}x")
    print(f"ratio vs reference: {t_ref / t_pop:.2f}x   (target >= 5x)")
    print(f"per-tick loop vs rollout: {t_roll / t_tick:.2f}x best/best; compiled loop vs per-tick: {t_tick / t_pop:.2f}x")
    if args.cartesian_seconds > 0:
        bench_cartesian(model, params, args.cartesian_seconds, args.nthread, max(1, args.repeat // 2))


if __name__ == "__main__":
    main()
