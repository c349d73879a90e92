"""Scoring an episode: tracking, torque, slew-limiter saturation, fr3_stack's live guards, outcome.

All functions take a population of P episodes over T ticks (arrays (P, T, 7)); sample k is
the state before tick k and τ the command of tick k after the slew limiter (the replay
engines' convention). Definitions:

- tracking error e = q − the target in force at that tick (the last sent target, pre-EMA) [rad];
  `track_rms_rad_jN` / `track_max_rad_jN` per joint over the whole episode, `track_rms_rad`
  and `track_max_rad` the worst joint;
- `tau_peak_nm_jN` = max |τ| per joint; `tau_peak_ratio` = max over joints of peak / FR3 limit
  (87 N·m J1–J4, 12 N·m J5–J7); `torque_limit_exceeded` when that ratio > 1;
- `slew_saturated_ticks`: ticks where some joint's |Δτ| reached fr3_stack's 1 N·m per tick
  (within 1e-9 N·m), `slew_saturated_fraction` of all ticks;
- live guards, evaluated where the live loop evaluates them (daemon/excite_run.py): just before
  each new target is sent (at each reference row's tick after the first), the state against
  the LAST SENT target (max over joints > `tracking_limit_rad`, 0.05 rad by default) and the
  speed (max |dq| > the speed bound). `abort_t_s` is the first such tick's time, `abort_reason`
  'tracking' or 'speed'. The episode is still simulated to its end: metrics cover the whole
  episode, i.e. what the arm would have done had the guard not fired.

Outcomes: `diverged` (the simulation went non-finite: MuJoCo reset it, or a non-finite
state), else `aborted_tracking` / `aborted_speed` (the first guard that fired), else
`completed`. Plug-in controllers add `controller_exception` and `controller_nonfinite_output`
(campaign/plugin.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.fr3 import CART_TORQUE_LIMIT_NM, JOINT_SLEW_NM_PER_TICK, TIMESTEP_S

FR3_TORQUE_LIMIT_NM = CART_TORQUE_LIMIT_NM  # FR3 joint torque limits [N·m] (J1..J7)
DEFAULT_TRACKING_LIMIT_RAD = 0.05  # fr3_stack's live guard (excite `--tracking-error`)
COMPLETED, ABORTED_TRACKING, ABORTED_SPEED, DIVERGED = "completed", "aborted_tracking", "aborted_speed", "diverged"
CONTROLLER_EXCEPTION, CONTROLLER_NONFINITE = "controller_exception", "controller_nonfinite_output"
OUTCOMES = (COMPLETED, ABORTED_TRACKING, ABORTED_SPEED, DIVERGED, CONTROLLER_EXCEPTION, CONTROLLER_NONFINITE)
_SLEW_EPS_NM = 1e-9


@dataclass(frozen=True)
class GuardLimits:
    """The live guards' bounds: tracking error [rad] and joint speed [rad/s]."""

    tracking_limit_rad: float = DEFAULT_TRACKING_LIMIT_RAD
    speed_limit_rad_s: float = 0.1


def _joint_columns(prefix: str, values: np.ndarray) -> dict:
    return {f"{prefix}_j{j + 1}": values[j] for j in range(values.shape[0])}


def _guards(q, dq, targets, guard_ticks, sent_rows, limits: GuardLimits):
    """(P,) first abort tick (−1 none) and reason code (0 none, 1 tracking, 2 speed)."""
    p = q.shape[0]
    first = np.full(p, -1, dtype=np.int64)
    reason = np.zeros(p, dtype=np.int64)
    if guard_ticks.size == 0:
        return first, reason
    e = np.abs(q[:, guard_ticks] - targets[sent_rows][None]).max(axis=2)  # (P, G)
    v = np.abs(dq[:, guard_ticks]).max(axis=2)
    track, speed = e > limits.tracking_limit_rad, v > limits.speed_limit_rad_s
    fired = track | speed
    any_fired = fired.any(axis=1)
    idx = np.argmax(fired, axis=1)
    first[any_fired] = guard_ticks[idx[any_fired]]
    rows = np.arange(p)
    reason[any_fired] = np.where(track[rows, idx][any_fired], 1, 2)
    return first, reason


def score(q: np.ndarray, dq: np.ndarray, tau: np.ndarray, tick_targets: np.ndarray, command_ticks: np.ndarray,
          row_targets: np.ndarray, limits: GuardLimits) -> list[dict]:
    """One dict of metrics and the outcome per episode, from (P, T, 7) q, dq, τ and the (T, 7)
    target in force per tick; command_ticks (n,) / row_targets (n, 7): the sent rows (guards).
    Non-finite metrics are None."""
    t = q.shape[1]
    if t == 0:  # nothing simulated (a plug-in failed at reset)
        return [{"outcome": COMPLETED, "metrics": {"ticks": 0}} for _ in range(q.shape[0])]
    diverged = ~(np.isfinite(q).all(axis=(1, 2)) & np.isfinite(dq).all(axis=(1, 2)))
    with np.errstate(invalid="ignore"):
        err = q - tick_targets[None, :t]
        rms = np.sqrt(np.mean(err**2, axis=1))  # (P, 7)
        peak = np.abs(err).max(axis=1)
        tau_peak = np.abs(tau).max(axis=1)
        d_tau = np.abs(np.diff(tau, axis=1, prepend=0.0))
        slew = (d_tau >= JOINT_SLEW_NM_PER_TICK - _SLEW_EPS_NM).any(axis=2).sum(axis=1)
    later = (command_ticks > 0) & (command_ticks < t)
    guard_ticks = command_ticks[later]
    sent_rows = np.flatnonzero(later) - 1  # the row sent before this one
    first, reason = _guards(q, dq, row_targets, guard_ticks, sent_rows, limits)
    out = []
    for i in range(q.shape[0]):
        ratio = float(np.max(tau_peak[i] / FR3_TORQUE_LIMIT_NM))
        m = {"track_rms_rad": float(rms[i].max()), "track_max_rad": float(peak[i].max()),
             **_joint_columns("track_rms_rad", rms[i]), **_joint_columns("track_max_rad", peak[i]),
             **_joint_columns("tau_peak_nm", tau_peak[i]), "tau_peak_ratio": ratio,
             "torque_limit_exceeded": bool(ratio > 1.0), "slew_saturated_ticks": int(slew[i]),
             "slew_saturated_fraction": float(slew[i]) / max(t, 1),
             "abort_t_s": float(first[i] * TIMESTEP_S) if first[i] >= 0 else None,
             "abort_reason": {0: None, 1: "tracking", 2: "speed"}[int(reason[i])], "ticks": int(t)}
        if diverged[i]:
            outcome = DIVERGED
        elif reason[i] == 1:
            outcome = ABORTED_TRACKING
        elif reason[i] == 2:
            outcome = ABORTED_SPEED
        else:
            outcome = COMPLETED
        m = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in m.items()}
        out.append({"outcome": outcome, "metrics": m})
    return out


__all__ = ["ABORTED_SPEED", "ABORTED_TRACKING", "COMPLETED", "CONTROLLER_EXCEPTION", "CONTROLLER_NONFINITE",
           "DEFAULT_TRACKING_LIMIT_RAD", "DIVERGED", "FR3_TORQUE_LIMIT_NM", "GuardLimits", "OUTCOMES", "score"]
