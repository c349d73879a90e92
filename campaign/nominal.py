"""The nominal episode: the reference replayed once on the fit's own parameters, before a
campaign starts. If that episode already aborts, the reference (not the arm's uncertainty) is
what the campaign would measure: `check_nominal` refuses to start, naming the guard, the time
and the value, unless the user allows it (then the campaign's summary says so first)."""

from __future__ import annotations

import numpy as np

from .gains import GainSet
from .outcome import COMPLETED, GuardLimits, score
from .reference import Reference

_UNIT = {"tracking": "rad", "speed": "rad/s", "state_age": "s", "joint_range": "rad"}


def nominal_episode(reference: Reference, gains: GainSet, vector: np.ndarray, limits: GuardLimits) -> dict:
    """Replay `reference` with `gains` on the parameter vector (LAYOUT.size,) of the fit
    (built-in joint impedance, every tick); returns {outcome, abort_reason, abort_t_s,
    abort_value, abort_joint, track_anchor_max_rad, track_target_max_rad, text}."""
    from ..sim import PopulationEngine

    engine = PopulationEngine([reference.replay_input(gains)], nthread=1)
    try:
        result = engine.run(np.asarray(vector, dtype=np.float64)[None])[0]
    finally:
        engine.close()
    scored = score(result.q, result.dq, result.tau_cmd, reference.tick_targets(), reference.command_ticks,
                   reference.targets_rad, limits)[0]
    m = scored["metrics"]
    out = {"outcome": scored["outcome"], "gains_id": gains.gains_id,
           **{k: m.get(k) for k in ("abort_reason", "abort_t_s", "abort_value", "abort_joint",
                                    "track_anchor_max_rad", "track_target_max_rad")}}
    out["text"] = describe(out, limits)
    return out


def describe(nominal: dict, limits: GuardLimits) -> str:
    """One line: what the nominal episode did (the guard, time and value when it aborted)."""
    if nominal["outcome"] == COMPLETED:
        return (f"the nominal episode (the fit's own parameters) completes: worst tracking error "
                f"{_fmt(nominal['track_anchor_max_rad'])} rad from the anchor, "
                f"{_fmt(nominal['track_target_max_rad'])} rad from the last sent target")
    reason = nominal["abort_reason"]
    if reason is None:
        return f"the nominal episode (the fit's own parameters) ended {nominal['outcome']}"
    rule = f" ({limits.tracking_rule} rule)" if reason == "tracking" else ""
    bound = {"tracking": limits.tracking_limit_rad, "speed": limits.speed_limit_rad_s}.get(reason)
    joint = f" on J{nominal['abort_joint']}" if nominal.get("abort_joint") else ""
    return (f"the nominal episode (the fit's own parameters) aborts: {reason} guard{rule} at "
            f"t = {nominal['abort_t_s']:.3f} s, value {_fmt(nominal['abort_value'])} {_UNIT[reason]}{joint}"
            + (f" (bound {bound:g} {_UNIT[reason]})" if bound is not None else ""))


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def check_nominal(nominal: dict, allow: bool, source: str) -> None:
    """ValueError when the nominal episode did not complete and `allow` is False."""
    if nominal["outcome"] != COMPLETED and not allow:
        raise ValueError(f"{source}: {nominal['text']}; every episode would measure the reference, not the arm. "
                         "Lower the excitation, raise the guard (--tracking-limit / --speed-limit), or pass "
                         "--allow-aborting-reference to run anyway")


__all__ = ["check_nominal", "describe", "nominal_episode"]
