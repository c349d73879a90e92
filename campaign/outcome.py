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
- live guards: fr3_stack's client's streaming checks, with the project's rules
  (twinlake.daemon.guards, their one owner): before each sent row, on the state of the
  daemon's latest 5 ms publication, the tracking error under `tracking_rule` (default
  `anchor`: |q − the first target|, what fr3_stack's code compares; `target`: |q − the last
  sent target|, what its docs state) against `tracking_limit_rad` (0.05 rad), the speed
  max |dq| against the speed bound, the state age and the joint range. `abort_t_s` is the
  first such check's time, `abort_reason` its guard ('tracking', 'speed', 'state_age',
  'joint_range'), `abort_value` / `abort_joint` what it saw; `track_anchor_max_rad` and
  `track_target_max_rad` are the worst checked value under each rule (both always reported).
  The episode is still simulated to its end: metrics cover the whole episode, i.e. what the
  arm would have done had the guard not fired.

Outcomes: `diverged` (the simulation went non-finite: MuJoCo reset it, or a non-finite
state), else `aborted_tracking` / `aborted_speed` / `aborted_state_age` /
`aborted_joint_range` (the first guard that fired), else
`completed`. Plug-in controllers add `controller_exception` and `controller_nonfinite_output`
(campaign/plugin.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..daemon.guards import (DEFAULT_TRACKING_RULE, JOINT_RANGE, SPEED, STATE_AGE, GuardBounds, first_abort,
                             guard_values, send_checks)
from ..sim.fr3 import CART_TORQUE_LIMIT_NM, JOINT_SLEW_NM_PER_TICK, TIMESTEP_S

FR3_TORQUE_LIMIT_NM = CART_TORQUE_LIMIT_NM  # FR3 joint torque limits [N·m] (J1..J7)
DEFAULT_TRACKING_LIMIT_RAD = 0.05  # fr3_stack's live guard (excite `--tracking-error`)
COMPLETED, ABORTED_TRACKING, ABORTED_SPEED, DIVERGED = "completed", "aborted_tracking", "aborted_speed", "diverged"
ABORTED_STATE_AGE, ABORTED_JOINT_RANGE = "aborted_state_age", "aborted_joint_range"
CONTROLLER_EXCEPTION, CONTROLLER_NONFINITE = "controller_exception", "controller_nonfinite_output"
OUTCOMES = (COMPLETED, ABORTED_TRACKING, ABORTED_SPEED, ABORTED_STATE_AGE, ABORTED_JOINT_RANGE, DIVERGED,
            CONTROLLER_EXCEPTION, CONTROLLER_NONFINITE)
_REASON = {SPEED: "speed", STATE_AGE: "state_age", JOINT_RANGE: "joint_range"}  # tracking_*: "tracking"
_ABORTED = {"tracking": ABORTED_TRACKING, "speed": ABORTED_SPEED, "state_age": ABORTED_STATE_AGE,
            "joint_range": ABORTED_JOINT_RANGE}
_SLEW_EPS_NM = 1e-9


@dataclass(frozen=True)
class GuardLimits:
    """The live guards' bounds: tracking error [rad] under `tracking_rule` (anchor | target)
    and joint speed [rad/s]; state age and joint range at fr3_stack's defaults."""

    tracking_limit_rad: float = DEFAULT_TRACKING_LIMIT_RAD
    speed_limit_rad_s: float = 0.1
    tracking_rule: str = DEFAULT_TRACKING_RULE

    def bounds(self) -> GuardBounds:
        return GuardBounds(tracking_error=self.tracking_limit_rad, max_velocity=self.speed_limit_rad_s,
                           tracking_rule=self.tracking_rule).validate()


def _joint_columns(prefix: str, values: np.ndarray) -> dict:
    return {f"{prefix}_j{j + 1}": values[j] for j in range(values.shape[0])}


def _guards(q, dq, command_ticks, row_targets, limits: GuardLimits) -> dict:
    """Per episode (P,): first abort tick (−1 none), its reason ('' none), value and joint
    (1-based, 0 none); the worst checked tracking error under each rule [rad]."""
    p, t = q.shape[:2]
    rows = np.flatnonzero(command_ticks < t)
    out = {"tick": np.full(p, -1), "reason": np.full(p, "", dtype=object), "value": np.full(p, np.nan),
           "joint": np.zeros(p, dtype=np.int64), "anchor_max": np.full(p, np.nan), "target_max": np.full(p, np.nan)}
    if rows.size == 0:
        return out
    bounds = limits.bounds()
    state, age, last_sent = send_checks(command_ticks, row_targets, TIMESTEP_S)
    values = guard_values(q[:, state[rows]], dq[:, state[rows]], row_targets[0], last_sent[rows], age[rows])
    first, which = first_abort(values, bounds)
    with np.errstate(invalid="ignore"):
        for key, guard in (("anchor_max", "tracking_anchor"), ("target_max", "tracking_target")):
            value = values[guard][0]
            out[key] = np.max(np.where(np.isfinite(value), value, -np.inf), axis=1)
    for i in np.flatnonzero(first >= 0):
        guard = bounds.enforced[which[i]]
        value, joint = values[guard]
        out["tick"][i] = command_ticks[rows[first[i]]]
        out["reason"][i] = _REASON.get(guard, "tracking")
        out["value"][i], out["joint"][i] = value[i, first[i]], joint[i, first[i]] + 1
    return out


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
    g = _guards(q, dq, command_ticks, row_targets, limits)
    out = []
    for i in range(q.shape[0]):
        ratio = float(np.max(tau_peak[i] / FR3_TORQUE_LIMIT_NM))
        m = {"track_rms_rad": float(rms[i].max()), "track_max_rad": float(peak[i].max()),
             **_joint_columns("track_rms_rad", rms[i]), **_joint_columns("track_max_rad", peak[i]),
             **_joint_columns("tau_peak_nm", tau_peak[i]), "tau_peak_ratio": ratio,
             "torque_limit_exceeded": bool(ratio > 1.0), "slew_saturated_ticks": int(slew[i]),
             "slew_saturated_fraction": float(slew[i]) / max(t, 1),
             "abort_t_s": float(g["tick"][i] * TIMESTEP_S) if g["tick"][i] >= 0 else None,
             "abort_reason": g["reason"][i] or None, "abort_value": float(g["value"][i]),
             "abort_joint": int(g["joint"][i]) or None, "track_anchor_max_rad": float(g["anchor_max"][i]),
             "track_target_max_rad": float(g["target_max"][i]), "ticks": int(t)}
        if diverged[i]:
            outcome = DIVERGED
        else:
            outcome = _ABORTED.get(g["reason"][i], COMPLETED)
        m = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in m.items()}
        out.append({"outcome": outcome, "metrics": m})
    return out


__all__ = ["ABORTED_JOINT_RANGE", "ABORTED_SPEED", "ABORTED_STATE_AGE", "ABORTED_TRACKING", "COMPLETED", "CONTROLLER_EXCEPTION", "CONTROLLER_NONFINITE",
           "DEFAULT_TRACKING_LIMIT_RAD", "DIVERGED", "FR3_TORQUE_LIMIT_NM", "GuardLimits", "OUTCOMES", "score"]
