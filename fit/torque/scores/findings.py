"""What a torque fit says about itself beyond its scores: the likely causes when it explains its
training rows worse than the nominal model, the delay scan's minimum at an end of its range or
not resolved from its neighbours, and what the measured route's standstill rows carried (route.py stores them in torque_json and
the adequacy lines)."""

from __future__ import annotations

import numpy as np

from ..model.equations import STANDSTILL_SPEED_RAD_S

DELAY_CHI2_95 = 3.84  # χ²(1) 95 % point: a delay scan step that raises the weighted residual sum less is unresolved


def causes(sol, used, every, signal_check) -> list[str]:
    """Likely reasons a fit explains its training rows worse than the nominal model."""
    out = []
    if every.rows and used.rows < 0.5 * every.rows:
        out.append(f"too few informative rows: the equations used {used.rows} of {every.rows} finite joint rows "
                   "(the rest rule left out the others)")
    held = len(sol.base.unidentifiable) + len(sol.base.weak)
    if held:
        out.append(f"an ill-posed problem: {len(sol.base.unidentifiable)} direction(s) the data do not determine and "
                   f"{len(sol.base.weak)} weak one(s) (torque_json.base_parameters)")
    if sol.constrained:
        out.append("the bounds or physical consistency moved the estimate (the unconstrained optimum lies outside)")
    if not signal_check.ok:
        out.append("a signal that does not match its meaning: " + "; ".join(signal_check.findings))
    return out


def delay_edge(scan: dict[int, float]) -> str | None:
    """A sentence when the delay scan's minimum sits at either end of 0..MAX_DELAY_MS (the
    optimum may lie outside it), with the loss's trend there; None inside."""
    delays = sorted(scan)
    if len(delays) < 2:
        return None
    losses = [scan[d] for d in delays]
    best = int(np.argmin(losses))
    if 0 < best < len(delays) - 1:
        return None
    end, inner = (delays[-1], delays[-2]) if best == len(delays) - 1 else (delays[0], delays[1])
    drop = 100.0 * (scan[inner] - scan[end]) / max(scan[inner], 1e-300)
    way = "still falling" if drop > 0 else "flat"
    return (f"delay scan: the minimum is at its bound, {end} ms ({way} at {end} ms: {drop:.1f} % below {inner} ms; "
            f"scanned {delays[0]}..{delays[-1]} ms): the best delay may lie outside the scan")


def delay_undetermined(scan: dict[int, float]) -> str | None:
    """A sentence when the delay scan's minimum is not resolved: an adjacent delay's weighted
    residual sum (Σ e²/σ_j², χ²-scaled) lies within DELAY_CHI2_95 of the minimum's, the 95 %
    point of a one-parameter likelihood ratio; None when every neighbour is further. The scan's
    delay is then not identified (twin_params flags it), and `fit compare` does not test it."""
    if len(scan) < 2:
        return None
    best = min(scan, key=scan.get)
    near = {d: scan[d] - scan[best] for d in (best - 1, best + 1) if d in scan}
    worst = min(near, key=near.get)
    if near[worst] >= DELAY_CHI2_95:
        return None
    return (f"delay scan: {best} ms fits only {near[worst]:.2f} better than {worst} ms (weighted residual sum; "
            f"the 95 % point of one parameter is {DELAY_CHI2_95}): the data do not pick the delay")


def standstill_summary(flat, spec) -> dict | None:
    """The measured route's standstill rows per joint and what they carry."""
    if spec.signal != "measured":
        return {"rows_per_joint": None, "meaning": "commanded torques at rest: a stuck joint's friction is anywhere in "
                "[−mu_s, mu_s] (set-valued), so a row at rest carries only |tau − rest of the model| <= mu_s, no "
                "equation; the rest rule leaves those rows out (the payload's and bias' gravity part is identified "
                "only where that torque exceeds the level, and never from rest rows alone)"}
    rows = sum(int((e.standstill & e.recorded).sum()) for e in flat if e.standstill is not None)
    per_joint = np.sum([(e.standstill & e.recorded).sum(0) for e in flat if e.standstill is not None], axis=0)
    return {"rows": rows, "rows_per_joint": [int(x) for x in np.atleast_1d(per_joint)],
            "speed_rad_s": STANDSTILL_SPEED_RAD_S,
            "meaning": "link side, standing still: the static equation of the links and the payload (gravity and the "
                       "sensor offset); the joint's friction there is a bounded unknown in [−mu_s, mu_s], left in the "
                       "equation error and, in the training score, only its part beyond ±mu_s counts"}


__all__ = ["DELAY_CHI2_95", "causes", "delay_edge", "delay_undetermined", "standstill_summary"]
