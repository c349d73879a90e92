"""Torque score and replay agree, or the fit says so: a torque fit's `--holdout` runs that can
be replayed (joint impedance, targets, gains: fit/core/needs.py) are replayed with the
fitted parameters (fit/trust/validate.replay_runs, the same replay `fit validate` does) and
their q residual is set against the run's own noise floor (fit/trust/adequacy.assess). Above
`MAX_FLOOR_RATIO` × the floor the fit's adequacy fails even when its torque score passes: the
torques can be explained by parameters that do not make the twin move as the arm did (a
measured-route fit knows nothing of the motor side; a delay or friction the torques do not pin).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .scores.residuals import MAX_FLOOR_RATIO


@dataclass
class HoldoutReplay:
    """One held-out run: replayed or not (and why not), its q floor ratio and the adequacy
    sentence (assess's)."""

    run: str
    replayed: bool
    floor_ratio: float | None = None
    reason: str | None = None
    summary: str | None = None

    @property
    def passed(self) -> bool | None:
        if not self.replayed or self.floor_ratio is None:
            return None
        return self.floor_ratio <= MAX_FLOOR_RATIO

    def line(self) -> tuple[str, bool | None]:
        if not self.replayed:
            return (f"held-out replay of {self.run}: not replayed ({self.reason})", None)
        ok = self.passed
        return (f"held-out replay of {self.run} with the fitted parameters: q residual {self.floor_ratio:.2f}× its noise "
                f"floor ({'within' if ok else 'above'} {MAX_FLOOR_RATIO:g}×)"
                + ("" if ok else ": the torques are explained, the motion is not — " + (self.summary or "")), ok)

    def to_dict(self) -> dict:
        return {"run": self.run, "replayed": self.replayed, "floor_ratio": self.floor_ratio, "reason": self.reason,
                "summary": self.summary, "passed": self.passed, "max_floor_ratio": MAX_FLOOR_RATIO}


def _lacking(lake: Path, selector: str) -> list[str]:
    from ...catalog import connect
    from ...catalog.selection import parse_selector, resolve_run
    from ..core.needs import missing_in_run

    sel = parse_selector(selector)
    con = connect(lake)
    try:
        row = resolve_run(con, sel.run, sel.robot)
        return missing_in_run(con, row["robot"], sel.run)
    finally:
        con.close()


def replay_holdout(lake: Path, selectors: list[str], params, *, friction_law: str, model_path: str | None = None,
                   configured_load=None) -> list[HoldoutReplay]:
    """Each selector replayed with `params` (DynamicsParams) when it can be (HoldoutReplay)."""
    from ..trust.adequacy import assess
    from ..trust.validate import replay_runs

    out = []
    for selector in selectors:
        lacking = _lacking(lake, selector)
        if lacking:
            out.append(HoldoutReplay(selector, False, reason="lacks " + ", ".join(lacking)))
            continue
        try:
            replays = replay_runs(lake, [selector], np.asarray(params.to_vector())[None, :], model_path=model_path,
                                  friction_law=friction_law, configured_load=configured_load)
        except ValueError as exc:  # no clean interval long enough, for one
            out.append(HoldoutReplay(selector, False, reason=str(exc)))
            continue
        for (_, _, _, _, _, segments) in replays.values():
            adequacy = assess(segments[0], params)
            ratio = float(adequacy.ratio_all)
            out.append(HoldoutReplay(selector, True, ratio if np.isfinite(ratio) else None,
                                     summary=adequacy.cause_text()))
    return out


__all__ = ["HoldoutReplay", "replay_holdout"]
