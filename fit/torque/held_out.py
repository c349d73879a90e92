"""A stored torque fit scored on other runs: held-out torque prediction (`fit validate` on a run
that cannot be replayed: no targets or gains, e.g. a mapped log).

The fit's equations are rebuilt from its settings (signal, law, groups, configured load,
filter cutoff) and its stored β (`torque_json.beta`); each run is filtered the same way and
scored with residuals.score: RMSE raw and filtered per joint, variance explained, the torque
noise floor and the adequacy line. `torque_validation` makes each score a `validations/`
partition like a replayed one (validation_source `twinlake_torque`, sim_label `fitted`): the q
and end-effector columns are null (nothing was replayed), the torque figures are in its
`torque_*` columns and metrics.json, the verdict is the adequacy line's (pass within
`max_floor_ratio` × the torque noise floor).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, RecordError
from ...sim.arm_model.load import EndLoad
from .inputs.derivatives import segments
from .model.equations import build, with_rest_rule
from .model.regressor import RigidBodyModel
from .scores.residuals import MAX_FLOOR_RATIO, TorqueScore, adequacy_line, score
from .route import TorqueFitSettings, decimation, equation_spec, read_samples
from .model.soft_friction import RestRule


TORQUE_SOURCE = "twinlake_torque"


@dataclass
class HeldOutScore:
    """One run's score under a torque fit and its adequacy line / verdict; robot, run name and
    the ticks scored (first, last seq) for the stored validation."""

    run: str
    score: TorqueScore
    line: str
    passed: bool | None
    robot: str = ""
    run_name: str = ""
    seq_span: tuple[int, int] = (0, 0)


def is_torque_fit(rec) -> bool:
    return rec.settings.get("method") == "torque" and bool(rec.extra.get("torque_json"))


def held_out_scores(lake: Path, rec, selectors: list[str], max_floor_ratio: float = MAX_FLOOR_RATIO) -> list[HeldOutScore]:
    """Score the torque fit `rec` on each selector's run; ValueError for a fit that is not one."""
    if not is_torque_fit(rec):
        raise RecordError(f"fit {rec.fit_id}: not a torque fit")
    known = TorqueFitSettings.__dataclass_fields__
    settings = TorqueFitSettings(**{k: v for k, v in rec.settings.items() if k in known})
    torque = json.loads(rec.extra["torque_json"])
    if "quasi_static" in torque:
        raise RecordError(f"fit {rec.fit_id}: a quasi-static torque fit (low-rate robot state) has no dynamic "
                         "equations to score held-out runs with; validate it on runs at rest by refitting them")
    rigid = RigidBodyModel.load(settings.model_path)
    configured = EndLoad(**settings.configured_load) if settings.configured_load else None
    if configured is None:  # the fit's equations: the configured load its training runs stated
        from .route import _configured
        configured = _configured(settings, [read_samples(lake, s, settings.torque)[0] for s in settings.train])
    spec = equation_spec(settings, settings.torque, rigid, configured)
    names = [b["name"] for b in torque["beta"]]
    if names != spec.names():
        raise RecordError(f"fit {rec.fit_id}: its stored parameters do not match its settings' equations")
    beta = np.array([b["value"] for b in torque["beta"]])
    filt = torque["filter"]
    rule = _rest_rule(rec.fit_id, spec.law, torque, spec.signal)
    out = []
    for sel in selectors:
        run, _ = read_samples(lake, sel, settings.torque)
        segs, _ = segments(run.seq, run.q, run.dq, run.tau, cutoff_hz=filt["cutoff_hz"], trim_s=filt["trim_s"],
                           max_fill_ticks=filt["max_fill_ticks"], guard_ticks=filt["guard_ticks"])
        if not segs:
            raise DataError(f"{run.label}: no segment long enough to filter")
        eqs = [with_rest_rule(build(s, spec, rigid, decimation(filt["cutoff_hz"])), rule) for s in segs]
        s = score(eqs, beta, int(torque["delay_ms"]), filt["cutoff_hz"])
        line, ok = adequacy_line(f"held-out {run.label}", s, max_floor_ratio)
        out.append(HeldOutScore(run.label, s, line, ok, run.robot, run.run, (int(run.seq[0]), int(run.seq[-1]))))
    return out


def _rest_rule(fit_id: str, law: str, torque: dict, signal: str = "commanded") -> RestRule | None:
    """The rest rule the fit used (None under tanh, and on the measured route, which keeps its
    standstill rows); ValueError for a commanded Stribeck fit stored without one (made before
    the rule: fit it again)."""
    if law != "stribeck" or (signal == "measured" and torque.get("rest_rule") is None):
        return None
    if not isinstance(torque.get("rest_rule"), dict):
        raise RecordError(f"fit {fit_id}: a Stribeck torque fit stored without its rest rule "
                         "(made by an older twinlake); run the torque fit again to score held-out runs")
    return RestRule.from_dict(torque["rest_rule"])


def torque_validation(rec, result: HeldOutScore, max_floor_ratio: float, created_utc: str):
    """`result` of the torque fit `rec` as a ValidationRecord (module docstring); its id is
    deterministic in the fit, the run, the ticks scored, the threshold and the fit's β."""
    import pyarrow as pa

    from ..records.validation_record import VALIDATION_COLUMNS, ValidationRecord
    from ..trust.validate import validation_id

    beta = [b["value"] for b in json.loads(rec.extra["torque_json"])["beta"]]
    thresholds = json.dumps({"max_torque_floor_ratio": max_floor_ratio if np.isfinite(max_floor_ratio) else None})
    span = {"seq_first": result.seq_span[0], "seq_last": result.seq_span[1]}
    scores = result.score.to_dict()
    metrics = {"method": "torque prediction (not replayed)", "torque": scores, "adequacy": result.line,
               "num_samples": scores["rows"], "seq_first": result.seq_span[0], "seq_last": result.seq_span[1]}
    verdict = None if result.passed is None else ("pass" if result.passed else "fail")
    values = {"validation_source": TORQUE_SOURCE, "created_utc": created_utc, "robot": result.robot,
              "run": result.run_name, "fit": rec.fit_id, "sim_label": "fitted", "num_samples": scores["rows"],
              "duration_s": None, "ee_pos_rmse_3d_m": None, "ee_ori_rmse_rad": None,
              "q_rmse_all_rad": None, "dq_rmse_all_rad_s": None, "q_rmse_rad": None, "verdict": verdict,
              "thresholds_json": thresholds, "metrics_json": json.dumps(metrics, allow_nan=False),
              "intervals_json": json.dumps([span]), "verdict_reasons_json": json.dumps([] if result.passed else [result.line]),
              "torque_floor_ratio": scores["floor_ratio"], "torque_rmse_raw_nm": scores["rmse_raw_nm"],
              "torque_variance_explained_all": scores["variance_explained_all"]}
    schema = pa.schema(list(VALIDATION_COLUMNS) + [
        ("intervals_json", pa.string()), ("verdict_reasons_json", pa.string()), ("torque_floor_ratio", pa.float64()),
        ("torque_rmse_raw_nm", pa.list_(pa.float64())), ("torque_variance_explained_all", pa.float64())])
    vid = validation_id(rec.fit_id, result.robot, result.run_name, "torque", thresholds, np.array(beta), [span])
    return ValidationRecord(vid, pa.Table.from_pylist([values], schema=schema), json.dumps(metrics, indent=2).encode())


__all__ = ["HeldOutScore", "TORQUE_SOURCE", "held_out_scores", "is_torque_fit", "torque_validation"]
