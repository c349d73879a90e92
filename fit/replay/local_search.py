"""Local-first search: seeded multi-start Levenberg–Marquardt on cheap data, the best start
refined on the full data, CMA-ES only when the local result fails its gates.

Near a good guess the least-squares structure of the loss (Σ r², fit/core/objective.py) makes a
Gauss–Newton step worth many CMA-ES generations; the finite-difference Jacobian is one
population batch (n + 1 candidates), so it fans out over the same pool as a generation (as
MuJoCo's `mujoco.sysid` evaluates its Jacobian columns as one batch). The stages:

1. **cheap** (`cheap_s` seconds of each training interval, as `CHEAP_WINDOW_S` windows spread
   over it, each replayed from its recorded start state): `starts` points — the nominal
   parameters (Menagerie's, clipped into the box) and scrambled Halton points in the box,
   seeded. The first start runs alone first: when it ends within `FLOOR_GATE` of the loss the
   noise alone leaves on the cheap windows, no other start can be better by more than the noise,
   and the others are not run (said in `local_gates`). Otherwise the others follow. Each takes the
   best delay of a scan over every delay choice, then run
   `CHEAP_ITERATIONS` LM iterations together (their Jacobians and steps in one batch each; a start
   stops once an iteration gains less than moving all parameters by `CHEAP_STOP_SE` (2) standard
   errors would, fit/replay/stopping.py, so a start far above the floor that barely moves stops early);
   every start's delay is scanned again at its converged point and a start whose best delay
   moved continues LM there (at most `MAX_DELAY_ROUNDS` times); the delay of the best start is then profiled: each neighbouring delay (±1 ms) gets
   `PROFILE_ITERATIONS` LM iterations from the converged point, and the best becomes the delay.
   With per-joint delay offsets free (`+joint-delay`), the offsets are then scanned coordinate
   by coordinate at that point: every free joint's other offsets (one candidate per distinct
   joint delay) are one batch; each joint takes its best offset if it lowers the loss (all
   improving joints at once when that is better still, else the single best change), LM
   continues at the new offsets, and the scan repeats (at most `OFFSET_ROUNDS` times).
2. **full**: LM on all the training data from the best cheap point at its delay
   (fit/replay/full_stage.py, at most `refine_iterations` or `FULL_ITERATIONS`), then the delay is
   profiled again on the full data (each neighbouring delay replayed with one LM step on the last
   Jacobian; a lower one becomes the delay and LM runs again there, fit/replay/full_stage.py). The start's
   loss comes from the first Jacobian's centre row. LM stops
   once the linearised model puts the optimum within `FULL_STOP_SE` (0.5) standard errors
   (fit/replay/stopping.py: its Gauss–Newton step predicted to gain less than 0.25 σ², checked
   before the steps are evaluated), or once an evaluated step gains less than that (above the
   floor gate, where the model's misfit sets the error, the cheap stage's rule instead); a fit that
   reaches the cap still paying says so in its gates ("not converged") with how far the
   optimum may be, since the error bars assume the point is at it. The last
   iteration's Jacobian is kept (as its R factor, and its per-tick scores J·r for the HAC
   covariance, fit/core/covariance.py) for the error bars (full_stage.py `error_bar_jacobian`), and while it
   is in memory the closed loop's noise is measured at the optimum (`settings.loop_noise_draws`
   noisy replays, fit/core/loop_noise.py, kept as the JacobianSnapshot's `loop_noise`)
   and the returned point's per-interval losses for the record, so neither is recomputed.
3. **gates** (fit/replay/gates.py): a full loss at most `FLOOR_GATE` × the loss the noise alone would
   leave (`floor_loss`, from the noise floor of the recorded q and dq, fit/core/noise_floor.py) is
   accepted whatever the other starts did; with no measurable floor (stated) the starts decide
   (at least two within `AGREE_REL` of the best cheap loss). Otherwise the result is not
   accepted and the search explores within `explore_s` seconds (fit/replay/payoff.py): the disagreeing
   starts continue on the cheap windows (`_explore_starts`; a lower basin gets the full-data
   LM), then CMA-ES from the best local point (`FALLBACK_SIGMA`, the delay distribution
   centred on its delay) while it pays (payoff's stop rule), LM polishing its best only when
   it beat the local result. A result still above the floor is a model question, and the
   verdict (`gate_verdict`, the fit's `local_gates`) says so beside every decision taken.

Every stage is checkpointed (`local-<seed>.pkl`, atomically replaced), so a killed fit resumes
at the last finished stage (the exploration's CMA-ES at its last generation) with the same result. Deterministic per seed: the starts come
from a seeded generator, everything else is deterministic, and the pool's results never
depend on its slicing or number of workers.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import SettingError
from . import payoff
from .outcomes import CheapStage, JacobianSnapshot
from .gates import AGREE_REL, FLOOR_GATE, floor_loss, gate_verdict, gates
from .full_stage import full_lm
from .refine import MAX_DELAY_ROUNDS, REL_TOL, append_history, lm_batch, neighbour_delays
from ..core.space import ParameterSpace
from .stopping import cheap_rel_tol

CHEAP_WINDOW_S = 1.0  # length of one cheap-fidelity window [s]
CHEAP_ITERATIONS = 6
PROFILE_ITERATIONS = 2
OFFSET_ROUNDS = 3
FALLBACK_SIGMA = 0.1


def cheap_windows(refs: list, cheap_s: float, period_s: float = 1e-3) -> list:
    """IntervalRefs of the cheap fidelity: per interval, round(cheap_s / CHEAP_WINDOW_S) windows
    of CHEAP_WINDOW_S spread evenly over it (centres at k/(count+1) of its length); an
    interval too short for them is used whole."""
    count = max(1, int(round(cheap_s / CHEAP_WINDOW_S)))
    width = int(round(CHEAP_WINDOW_S / period_s))
    out = []
    for r in refs:
        length = r.seq_last - r.seq_first
        if length <= count * width:
            out.append(r)
            continue
        for k in range(1, count + 1):
            first = r.seq_first + int(round(k * length / (count + 1))) - width // 2
            out.append(replace(r, seq_first=first, seq_last=first + width))
    return out


def start_points(space: ParameterSpace, starts: int, seed: int, first=None) -> np.ndarray:
    """(starts, n_free) normalised points: the nominal parameters (or `first`, a parameter
    vector: `fit run --start-from`), then scrambled Halton points."""
    from scipy.stats import qmc

    from ...sim import DynamicsParams

    n = len(space.free_indices)
    start = DynamicsParams.nominal().to_vector() if first is None else DynamicsParams.from_vector(first).to_vector()
    nominal = space.encode(start[None])
    if starts <= 1:
        return nominal[:1]
    halton = qmc.Halton(d=n, scramble=True, seed=np.random.default_rng([seed, 31]))
    return np.vstack([nominal, halton.random(starts - 1)])


def _scan_delays(pool, combine, space, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best delay (K,) and its loss (K,) of each of K points over every delay choice."""
    choices = space.delay_choices
    zs = np.repeat(z, len(choices), axis=0)
    ds = np.tile(choices, len(z))
    losses = np.asarray(combine(pool.evaluate(space.decode(zs, ds)))).reshape(len(z), len(choices))
    losses = np.where(np.isfinite(losses), losses, np.inf)
    k = np.argmin(losses, axis=1)  # ties: the smaller delay
    return choices[k], losses[np.arange(len(z)), k]


def _scan_offsets(pool, combine, space: ParameterSpace, z: np.ndarray, delay: int, offsets: np.ndarray,
                  loss: float) -> tuple[np.ndarray, float]:
    """One coordinate-wise pass over the free joints' delay offsets at z (n,): returns the
    offsets (7,) and their loss; the offsets given when no change lowers `loss`."""
    rows, joints = [], []
    for j in space.free_offset_joints:
        seen = {space.effective_delay(delay, offsets[j])}
        for v in sorted(space.offset_choices(j).tolist(), key=lambda v: (abs(v), v)):  # ties: the smaller offset
            if space.effective_delay(delay, v) in seen:
                continue
            seen.add(space.effective_delay(delay, v))
            rows.append(np.where(np.arange(len(offsets)) == j, v, offsets))
            joints.append(j)
    if not rows:
        return offsets, loss
    cand = np.array(rows, dtype=np.int64)
    zs = np.repeat(z[None], len(cand), axis=0)
    ls = np.asarray(combine(pool.evaluate(space.decode(zs, np.full(len(cand), delay), cand))))
    ls = np.where(np.isfinite(ls), ls, np.inf)
    best = {}  # joint -> candidate row of its best offset, if it lowers the loss
    for k, j in enumerate(joints):
        if ls[k] < loss and (j not in best or ls[k] < ls[best[j]]):
            best[j] = k
    if not best:
        return offsets, loss
    single = min(best.values(), key=lambda k: (ls[k], k))
    if len(best) == 1:
        return cand[single], float(ls[single])
    combined = offsets.copy()
    for j, k in best.items():
        combined[j] = cand[k, j]
    lc = float(np.asarray(combine(pool.evaluate(space.decode(z[None], np.array([delay]), combined[None]))))[0])
    return (combined, lc) if np.isfinite(lc) and lc <= ls[single] else (cand[single], float(ls[single]))


def _run_starts(pool, combine, space: ParameterSpace, z: np.ndarray, iterations: int, rows: list, lm, note
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K starts z (K, n) together: each takes its best delay, runs LM, and continues at a delay its
    converged point prefers (at most MAX_DELAY_ROUNDS times); (z, delays, losses), each start's own."""
    delays, loss = _scan_delays(pool, combine, space, z)
    z, loss = lm(pool, combine, space, z, delays, loss, iterations, rows, "local-cheap", note)
    for _ in range(MAX_DELAY_ROUNDS):  # the delay's discrete neighbourhood of every start
        scanned, scanned_loss = _scan_delays(pool, combine, space, z)
        moved = (scanned != delays) & (scanned_loss < loss)
        if not moved.any():
            break
        delays, loss = np.where(moved, scanned, delays), np.where(moved, scanned_loss, loss)
        zm, lm_ = lm(pool, combine, space, z[moved], delays[moved], loss[moved], iterations, rows,
                     "local-cheap", note)
        z[moved], loss[moved] = zm, lm_
    return z, delays, loss


def cheap_stage(pool, combine, space: ParameterSpace, starts: int, seed: int, iterations: int,
                note=None, first=None, rel_tol: float = REL_TOL, floor: float | None = None) -> CheapStage:
    """Stage 1 on the cheap pool (a CheapStage: the best start's z (n,), delay and loss, every
    start's, the delay offsets (7,), the LM rows, notes); `first`: the first start's parameter vector (None:
    nominal); each LM stops once an iteration gains less than `rel_tol` of its loss. `floor`: the
    loss the noise alone leaves on the cheap windows (floor_loss); when the first start ends
    within FLOOR_GATE of it, no other start can be lower by more than the noise, so the other
    starts are not run (stated in `notes`)."""
    rows: list = []
    notes: list[str] = []
    lm = partial(lm_batch, rel_tol=rel_tol)
    z_all = start_points(space, starts, seed, first)
    z, delays, loss = _run_starts(pool, combine, space, z_all[:1], iterations, rows, lm, note)
    if len(z_all) > 1 and floor is not None and loss[0] <= FLOOR_GATE * floor:
        notes.append(f"start 1 reached the cheap windows' noise floor ({loss[0] / floor:.2f}× its {floor:.4g}): "
                     f"the other {len(z_all) - 1} start(s) not run")
    elif len(z_all) > 1:
        zr, dr, lr = _run_starts(pool, combine, space, z_all[1:], iterations, rows, lm, note)
        z, delays, loss = np.vstack([z, zr]), np.concatenate([delays, dr]), np.concatenate([loss, lr])
    best = int(np.argmin(loss))  # ties: the lower start
    zb, db, lb = z[best], int(delays[best]), float(loss[best])
    moved = neighbour_delays(pool, combine, space, zb, db, lb, PROFILE_ITERATIONS, rows, "local-cheap", note,
                             rel_tol=rel_tol)
    if moved is not None:
        zb, db, lb = moved
        zb_l = lm(pool, combine, space, zb[None], np.array([db]), np.array([lb]), iterations, rows,
                  "local-cheap", note)
        zb, lb = zb_l[0][0], float(zb_l[1][0])
    offsets = space.base_offsets
    for _ in range(OFFSET_ROUNDS if space.free_offset_joints else 0):  # per-joint delays, coordinate-wise
        moved, lo = _scan_offsets(pool, combine, space, zb, db, offsets, lb)
        if np.array_equal(moved, offsets):
            break
        offsets = moved
        if note is not None:
            note(f"local-cheap: delay offsets {offsets.tolist()} ms, loss {lo:.4g}")
        zl, ll = lm(pool, combine, space.with_offsets(offsets), zb[None], np.array([db]), np.array([lo]),
                    iterations, rows, "local-cheap", note)
        zb, lb = zl[0], float(ll[0])
    return CheapStage(z=zb, delay=db, loss=lb, start_losses=loss, start_delays=delays, start_z=z, offsets=offsets,
                      rows=rows, notes=notes)


def _save(path: Path, state: dict, write_atomic) -> None:
    write_atomic(path, pickle.dumps(state, protocol=5))


def local_seed(wd: Path, settings, seed: int, data, pool, cheap_pool_factory: Callable, cma: Callable,
               write_atomic, bar, on_stage=None) -> tuple[np.ndarray, float, list[dict], str, JacobianSnapshot | None]:
    """One seed of the local-first search; returns (params (n,), loss, history rows, the
    gates' verdict, the full stage's `error_bar_jacobian` when params are that stage's result,
    else None). `cma(x0_params, delay) -> (params, loss, rows)` is the fallback stage;
    `on_stage(stage_number, pool)` is called after each stage's checkpoint."""
    from ..core.objective import FitProblem

    space = settings.parameter_space
    combine = FitProblem(data).combine
    path = wd / f"local-{seed}.pkl"
    state = pickle.loads(path.read_bytes()) if path.is_file() else {"stage": None, "history": []}
    history = state["history"]
    note = bar.note
    if len(space.free_indices) == 0:
        raise SettingError("method", "local", "no continuous parameter is free (the cma method searches the delay alone)")
    if state["stage"] is None:
        bar.note(f"cheap fidelity: {settings.starts} start(s), LM")
        cheap_pool, cheap_data = cheap_pool_factory(pool)
        try:
            cheap = cheap_stage(cheap_pool, FitProblem(cheap_data).combine, space, settings.starts, seed,
                                CHEAP_ITERATIONS, note, getattr(settings, "start_params", None),
                                rel_tol=cheap_rel_tol(cheap_data, len(space.free_indices)),
                                floor=floor_loss(cheap_data)[0])
        finally:
            cheap_pool.close()
        rows, cheap = cheap.rows, replace(cheap, rows=[])
        for r in rows:
            r["per_traj_min"] = None  # per cheap window, not per training interval
        append_history(history, rows, cheap_data.ticks_per_rollout)
        state = {"stage": "cheap", "cheap": cheap, "history": history}
        _save(path, state, write_atomic)
        bar.update(1, cheap.loss, cheap.loss, 0.0, 0.0, 0.0)
        if on_stage:
            on_stage(1, pool)
    cheap = state["cheap"]
    if state["stage"] == "cheap":
        bar.note("full data: LM")
        floor, reason = floor_loss(data)
        params, loss, jac, unconverged = full_lm(pool, combine, settings, data, cheap.z, cheap.delay,
                                                  cheap.offsets, history, note, floor)
        failed, notes = gates(cheap.start_losses, loss, floor, reason)
        notes = list(cheap.notes) + notes + ([unconverged] if unconverged else [])
        state = {"stage": "full", "cheap": cheap, "history": history, "params": params, "loss": loss,
                 "floor_loss": floor, "floor_reason": reason, "failed": failed, "notes": notes, "jacobian": jac}
        _save(path, state, write_atomic)
        bar.update(2, loss, loss, 0.0, 0.0, 0.0)
        if on_stage:
            on_stage(2, pool)
    if state["stage"] == "full" and state["failed"] and settings.explore_s > 0:
        state = _explore_starts(state, pool, combine, settings, data, cheap_pool_factory, note)
        _save(path, state, write_atomic)
        if on_stage:
            on_stage(3, pool)
    params, loss, jacobian = state["params"], state["loss"], state.get("jacobian")
    if not state["failed"] or settings.explore_s <= 0:
        return params, loss, history, gate_verdict(state["failed"], state.get("notes", []), state["floor_loss"]), jacobian
    bar.note("local result not accepted (" + "; ".join(state["failed"]) + "): CMA-ES from the best local point "
             "while it pays")
    c_params, c_loss, c_rows = cma(params, space.delay_of(params), loss,
                                   payoff.cma_stop(loss, settings.explore_s, state.get("explore_s", 0.0)))
    base = len(history)
    history.extend([dict(r, iter=base + k + 1) for k, r in enumerate(c_rows)])
    found = payoff.stop_reason(c_rows, loss, settings.generations, settings.explore_s)
    if c_loss < loss:
        found += f"; CMA-ES + LM lowered the loss {loss:.4g} -> {c_loss:.4g} ({(loss - c_loss) / loss:.2%})"
        params, loss, jacobian = c_params, c_loss, None
    else:
        found += "; CMA-ES found nothing lower: the local result stands"
    return params, loss, history, gate_verdict(state["failed"], state.get("notes", []), state["floor_loss"], found,
                                               loss), jacobian


def _explore_starts(state: dict, pool, combine, settings, data, cheap_pool_factory, note) -> dict:
    """Exploration step 1, when the starts disagree: the disagreeing starts continue
    CHEAP_ITERATIONS more cheap LM iterations (one batch). One that ends more than AGREE_REL
    below the best cheap loss is another, lower basin: the full-data LM runs from it and the
    lower full loss is kept. The gates are then judged again. Returns the new state (stage
    'starts', `explore_s` the seconds spent)."""
    from ..core.objective import FitProblem

    clock, cheap = payoff.Clock(), state["cheap"]
    losses = np.asarray(cheap.start_losses, dtype=np.float64).copy()
    worse = losses > losses.min() * (1.0 + AGREE_REL)
    notes, history = list(state.get("notes", [])), state["history"]
    if len(losses) < 2 or int(np.sum(~worse)) >= 2:
        return {**state, "stage": "starts", "explore_s": clock.spent_s}
    note(f"exploring: {int(worse.sum())} disagreeing start(s) continue on the cheap windows")
    space = settings.parameter_space
    cheap_pool, cheap_data = cheap_pool_factory(pool)
    try:
        rows: list = []
        zs, ls = lm_batch(cheap_pool, FitProblem(cheap_data).combine, space, cheap.start_z[worse],
                          cheap.start_delays[worse], losses[worse], CHEAP_ITERATIONS, rows, "local-cheap", note,
                          rel_tol=cheap_rel_tol(cheap_data, len(space.free_indices)))
    finally:
        cheap_pool.close()
    for r in rows:
        r["per_traj_min"] = None
    append_history(history, rows, cheap_data.ticks_per_rollout)
    losses[worse] = ls
    out = {**state, "stage": "starts", "history": history}
    k = int(np.argmin(ls))
    if ls[k] < cheap.loss * (1.0 - AGREE_REL):
        idx = np.flatnonzero(worse)[k]
        params, loss, jac, unconverged = full_lm(pool, combine, settings, data, zs[k],
                                                  int(cheap.start_delays[idx]), None, history, note,
                                                  state["floor_loss"])
        notes.append(f"start {idx + 1} continued to a lower cheap basin ({ls[k]:.4g} < {cheap.loss:.4g}); "
                     f"full-data LM from it: {loss:.4g} against {state['loss']:.4g}"
                     + (f" ({unconverged})" if unconverged else ""))
        if loss < state["loss"]:
            out.update(params=params, loss=loss, jacobian=jac)
    else:
        notes.append(f"the disagreeing starts continued {CHEAP_ITERATIONS} more cheap LM iterations and ended "
                     f"{ls.min() / cheap.loss - 1:+.1%} from the best: no lower basin among them")
    failed, judged = gates(losses, out["loss"], state["floor_loss"], state["floor_reason"])
    return {**out, "failed": failed, "notes": notes + judged, "explore_s": clock.spent_s}
