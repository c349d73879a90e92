"""A stored torque fit scored on other runs: held-out torque prediction (`fit validate` on a run
that cannot be replayed: no targets or gains, e.g. a mapped log).

The fit's equations are rebuilt from its settings (signal, law, groups, configured load,
filter cutoff) and its stored β (`torque_json.beta`); each run is filtered the same way and
scored with residuals.score: RMSE raw and filtered per joint, variance explained, the torque
noise floor and the adequacy line. Nothing is written to the lake (the `validations/`
partition holds replay metrics); the command prints the scores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...sim.load import EndLoad
from .derivatives import segments
from .equations import build
from .regressor import RigidBodyModel
from .residuals import MAX_FLOOR_RATIO, TorqueScore, adequacy_line, score
from .route import TorqueFitSettings, decimation, equation_spec, read_samples


@dataclass
class HeldOutScore:
    """One run's score under a torque fit and its adequacy line / verdict."""

    run: str
    score: TorqueScore
    line: str
    passed: bool | None


def is_torque_fit(rec) -> bool:
    return rec.settings.get("method") == "torque" and bool(rec.extra.get("torque_json"))


def held_out_scores(lake: Path, rec, selectors: list[str], max_floor_ratio: float = MAX_FLOOR_RATIO) -> list[HeldOutScore]:
    """Score the torque fit `rec` on each selector's run; ValueError for a fit that is not one."""
    if not is_torque_fit(rec):
        raise ValueError(f"fit {rec.fit_id}: not a torque fit (--method torque)")
    known = TorqueFitSettings.__dataclass_fields__
    settings = TorqueFitSettings(**{k: v for k, v in rec.settings.items() if k in known})
    torque = json.loads(rec.extra["torque_json"])
    rigid = RigidBodyModel.load(settings.model_path)
    configured = EndLoad(**settings.configured_load) if settings.configured_load else None
    if configured is None:  # the fit's equations: the configured load its training runs stated
        from .route import _configured
        configured = _configured(settings, [read_samples(lake, s, settings.torque)[0] for s in settings.train])
    spec = equation_spec(settings, settings.torque, rigid, configured)
    names = [b["name"] for b in torque["beta"]]
    if names != spec.names():
        raise ValueError(f"fit {rec.fit_id}: its stored parameters do not match its settings' equations")
    beta = np.array([b["value"] for b in torque["beta"]])
    filt = torque["filter"]
    out = []
    for sel in selectors:
        run, _ = read_samples(lake, sel, settings.torque)
        segs, _ = segments(run.seq, run.q, run.dq, run.tau, cutoff_hz=filt["cutoff_hz"], trim_s=filt["trim_s"],
                           max_fill_ticks=filt["max_fill_ticks"], guard_ticks=filt["guard_ticks"])
        if not segs:
            raise ValueError(f"{run.label}: no segment long enough to filter")
        eqs = [build(s, spec, rigid, decimation(filt["cutoff_hz"])) for s in segs]
        s = score(eqs, beta, int(torque["delay_ms"]), filt["cutoff_hz"])
        line, ok = adequacy_line(f"held-out {run.label}", s, max_floor_ratio)
        out.append(HeldOutScore(run.label, s, line, ok))
    return out


__all__ = ["HeldOutScore", "held_out_scores", "is_torque_fit"]
