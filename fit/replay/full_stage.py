"""Stage 2 of the local search (fit/replay/local_search.py): LM on all the training data from the
cheap stage's point, the delay profiled again on the full data there, and the error bars' part
of the last iteration (`error_bar_jacobian`; the closed loop's noise and the interval check
measured while its Jacobian is in memory).

`full_lm(...)` runs the stage; `full_delay_profile(...)` is its delay profile (tested alone);
`FULL_ITERATIONS` the cap when the settings give none.
"""

from __future__ import annotations

import time

import numpy as np

from .outcomes import JacobianSnapshot
from .refine import MAX_DELAY_ROUNDS, LastIteration, append_history, neighbour_delays_linear, refine
from ..core.space import ParameterSpace
from .stopping import FullStop, convergence_note, full_stop

FULL_ITERATIONS = 4


def error_bar_jacobian(last: LastIteration, data=None) -> JacobianSnapshot:
    """The error bars' part of the full stage's last LM iteration (`refine(..., last=)`), a
    JacobianSnapshot: {z (n,) where J was taken, r_factor (n, n) R of J = ∂r/∂z (the range-scaled Jacobian, since
    z is range-normalised), rows M, moved (the returned point is z plus the last step), per_interval
    (B,) of the returned point or None, scores: per interval the (S_b, n) per-tick scores J·r of
    the HAC covariance (fit/core/covariance.py; None without `data` or residuals), seconds: the
    wall time of this (R factor and scores; counted in the fit's `error_bars_s`)}."""
    from ..core.covariance import replay_segments, tick_scores

    scores, t0 = None, time.perf_counter()
    if data is not None and last.r is not None:
        segments = replay_segments([len(inp.q_ref) for inp in data.inputs])
        scores = tick_scores(last.jac, last.r, segments)
    return JacobianSnapshot(z=np.asarray(last.z), r_factor=np.linalg.qr(last.jac, mode="r"),
                            rows=int(last.jac.shape[0]), moved=bool(last.moved),
                            per_interval=last.per_interval, scores=scores, seconds=time.perf_counter() - t0)


def full_delay_profile(pool, combine, space: ParameterSpace, params: np.ndarray, loss: float, last: LastIteration,
                        rows: list, cap: int, stop: FullStop, note) -> tuple[np.ndarray, float, LastIteration]:
    """The delay profiled again on the full data at the full LM's optimum: the cheap windows
    (a part of each interval) can prefer a neighbouring delay that the whole recording does not,
    and on short gentle runs they do (bench/RESULTS.md, "The delay on the full data"). Each
    neighbour is replayed at the optimum and takes one LM step with the last iteration's Jacobian
    (fit/replay/refine.py `neighbour_delays_linear`: 2 + 12 replays, where LM iterations with
    fresh Jacobians at both would cost ~4 (n + 7)); a point lower by more than the LM's own stop
    (`stop`, the full-data LM's FullStop: a smaller gain is the noise's) makes its delay
    the delay and the full LM runs again there, up to its cap (at most MAX_DELAY_ROUNDS moves), its
    last iteration the error bars'. Not above the floor gate: the gates then fail and the
    exploration (CMA-ES's categorical delay) searches the delay. Returns (params, loss, last);
    `rows` gains the probes' rows."""
    if last.jac is None or (stop.gate_loss is not None and loss > stop.gate_loss):
        return params, loss, last
    sp = space.with_offsets(space.offsets_of(params))
    tried = {sp.delay_of(params)}
    for _ in range(MAX_DELAY_ROUNDS):
        delay = sp.delay_of(params)
        moved = neighbour_delays_linear(pool, combine, sp, sp.encode(params[None])[0], delay, loss, last.jac, rows,
                                        "local-delay", tried, min_gain=stop(loss))
        if moved is None:
            break
        z, d, lower = moved
        tried.add(d)
        note(f"full data: delay {delay} -> {d} ms lowers the loss {loss:.4g} -> {lower:.4g}; LM continues there")
        last = LastIteration()
        params, loss, more = _full_refine(pool, combine, space, sp.decode(z[None], np.array([d]))[0], lower, cap,
                                          stop, last, note)
        rows.extend(more)
    return params, loss, last


def _full_refine(pool, combine, space: ParameterSpace, x: np.ndarray, loss: float | None, cap: int,
                 stop: FullStop, last: LastIteration, note) -> tuple[np.ndarray, float, list[dict]]:
    """The full-data LM from the parameter row `x` (its loss, or None: the first Jacobian's
    centre row) at its delay: at most `cap` iterations, stopping by `stop` (checked before a step
    is evaluated too), its last iteration kept in `last`; (params, loss, rows)."""
    return refine(pool, combine, space, x, loss, cap,
                  on_iteration=lambda i, l, d: note(f"full LM {i} (delay {d} ms): loss {l:.4g}"),
                  profile_delay=False, rel_tol=stop, last=last, predict_stop=True)


def full_lm(pool, combine, settings, data, z: np.ndarray, delay: int, offsets, history: list[dict], note,
             floor: float | None) -> tuple[np.ndarray, float, JacobianSnapshot | None, str | None]:
    """Stage 2 from the cheap point z (n,) at its delay and offsets, stopping by
    fit/replay/stopping.py's `full_stop` at the noise floor's loss `floor`: (params, loss, the
    error bars' Jacobian or None, `convergence_note` or None); its rows (stage 'local-full') are
    appended to `history`."""
    space = settings.parameter_space
    x0 = space.decode(z[None], np.array([delay]), offsets)[0]
    last = LastIteration()
    cap, n_free = settings.refine_iterations or FULL_ITERATIONS, len(space.free_indices)
    stop = full_stop(data, n_free, floor)
    params, loss, rows = _full_refine(pool, combine, space, x0, None, cap, stop, last, note)
    params, loss, last = full_delay_profile(pool, combine, space, params, loss, last, rows, cap, stop, note)
    for r in rows:
        r.setdefault("stage", "local-full")  # the delay profile's rows are 'local-delay'
    append_history(history, rows, data.ticks_per_rollout)
    unconverged = convergence_note(last, data, n_free, cap, stop)
    if unconverged:
        note(unconverged)
    if last.jac is None:
        return params, loss, None, unconverged
    jac = error_bar_jacobian(last, data)
    draws = int(getattr(settings, "loop_noise_draws", 0))
    if draws > 0:  # the closed loop's noise: bias and spread (fit/core/loop_noise.py), J still in memory
        from ..core.loop_noise import bootstrap

        note(f"closed-loop noise: {draws} noisy replays at the optimum")
        jac.loop_noise = loop = bootstrap(pool, data, params, last.jac, int(settings.seed), draws)
        jac.seconds += 0.0 if loop is None else loop.seconds  # counted in the fit's error_bars_s
    if getattr(settings, "profile_check", False):
        jac.profile_check = jac.checked_intervals(pool, space, params, loss, note)
    return params, loss, jac, unconverged
