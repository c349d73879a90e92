"""A low-rate run's torque fit record (quasi_static.py's solution as an ordinary fit record,
`settings.method = torque`, `torque_json.quasi_static`)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np

from ..errors import DataError
from ...sim import LAYOUT, DynamicsParams
from ..records.extras import TorqueExtras
from ..records.record import FitRecord, IntervalUse
from .low_rate.quasi_static import LOW_RATE_HZ, NAMES, entries, sample_rate_hz, solve
from .inputs.signals import MEANING
from .estimation.twin_params import finite


def _params(start: DynamicsParams, x: np.ndarray) -> DynamicsParams:
    values = LAYOUT.named(start)
    for name, value in zip(NAMES[:4], x[:4]):
        values[LAYOUT.group_of(name).name] = float(value)
    return DynamicsParams.from_vector(LAYOUT.vector(values))


def quasi_static_record(settings, runs: list, signal: str, rigid, start: DynamicsParams, rate_hz: float, fit_id: str,
                        stored_settings: dict, wall_s: float) -> FitRecord:
    """The fit record of the quasi-static route on `runs` (module docstring); ValueError for
    commanded torques, which carry no equation at rest."""
    if signal != "measured":
        raise DataError(f"{runs[0].label}: robot state at {rate_hz:.0f} Hz (below {LOW_RATE_HZ:g} Hz) leaves only rows at "
                         "rest, and a commanded torque at rest carries no equation (a stuck joint's friction is "
                         "anywhere within its breakaway level): fit the measured torque (tau_J)")
    qs = solve(runs, rigid, rate_hz)
    params = _params(start, qs.x)
    named = dict(zip(LAYOUT.names, LAYOUT.vector(LAYOUT.named(start)).tolist()))
    ident = {"method": "torque_quasi_static_v1", "jacobian": "the static torque equation (gravity of the payload, offsets)",
             "condition_number": None, "sigma2": None, "dof": qs.rows, "parameters": entries(qs, named),
             "weak_directions": [], "seeds": 0, "error_bar_note": "error bars: i.i.d. least squares at rest; " + qs.reason}
    line = (f"quasi-static fit ({qs.rows} rows at rest, {qs.poses} distinct poses, robot state at {qs.rate_hz:.0f} Hz): "
            f"residual {', '.join(f'J{j + 1} {s:.3g}' for j, s in enumerate(qs.sigma_nm))} N·m; the dynamic parameters "
            "are not identified at this rate")
    torque = {"signal": signal, "meaning": MEANING[signal], "sample_rate_hz": qs.rate_hz, "rows": qs.rows,
              "quasi_static": {"poses": qs.poses, "reason": qs.reason, "not_identified": [e["name"] for e in ident["parameters"]
                                                  if "unidentifiable" in e["flags"]],
                               "sigma_nm": [finite(v) for v in qs.sigma_nm],
                               "estimate": {n: finite(v) for n, v in zip(NAMES, qs.x)},
                               "stderr": {n: finite(v) for n, v in zip(NAMES, qs.stderr)}},
              "payload": {"mass_kg": float(qs.x[0]), "com_m": [float(v) for v in qs.x[1:4]]},
              "error_bar_note": ident["error_bar_note"], "adequacy_lines": [[line, None]]}
    loss = float(np.mean(qs.sigma_nm ** 2))
    uses = [IntervalUse(r.robot, r.run, r.interval_index, int(r.seq[0]), int(r.seq[-1]), "train", 1.0, loss,
                        r.run_sha256) for r in runs]
    return FitRecord(fit_id=fit_id, fit_source="twinlake", created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     status="completed", best_loss=loss, params=params, seed=None, settings=stored_settings, runs=uses,
                     extra=TorqueExtras(method="torque", wall_s=float(wall_s), train_loss=loss, holdout_loss=None,
                                        identifiability_json=json.dumps(ident), train_floor_ratio=None,
                                        holdout_floor_ratio=None, torque_json=json.dumps(torque)).to_json())


__all__ = ["LOW_RATE_HZ", "quasi_static_record", "sample_rate_hz"]
