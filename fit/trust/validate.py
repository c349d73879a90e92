"""`twinlake fit validate`: replay held-out runs with the fitted and the nominal parameters,
score them with FrankaTwin-compatible metrics, and store one validation partition per
(run, parameter set) with a pass/fail verdict against thresholds declared beforehand.

Partition ``<lake>/validations/validation=<id>/`` (lake contract, docs/architecture.md):
``validation.parquet`` (one row, ``VALIDATION_SCHEMA``), ``metrics.json`` (FrankaTwin's layout) and
``trajectory.parquet`` (t_s, recorded q/dq and simulated q/dq per sample, for the report).
The id is derived from (fit, robot, run, label, thresholds, parameters), so validating the
same thing twice is a no-op that says so. Both parameter sets replay in ONE population batch.
Every validation also compares the q residual with the run's own noise floor and diagnoses
its structure (fit/trust/adequacy.py); `max_floor_ratio` (default 3×) makes that part of the verdict.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import RecordError, SettingError
from ...catalog import Lake, PartitionExists
from .adequacy import DEFAULT_MAX_FLOOR_RATIO, Adequacy, ResidualSegment, assess
from .metrics import Trajectory, compute_metrics, dumps, metrics_document
from ..records.validation_record import ValidationRecord, publish_validation_record

VALIDATION_SCHEMA = pa.schema([
    ("validation_source", pa.string()), ("created_utc", pa.string()), ("robot", pa.string()),
    ("run", pa.string()), ("fit", pa.string()), ("sim_label", pa.string()), ("num_samples", pa.int64()),
    ("duration_s", pa.float64()), ("ee_pos_rmse_3d_m", pa.float64()), ("ee_ori_rmse_rad", pa.float64()),
    ("q_rmse_all_rad", pa.float64()), ("dq_rmse_all_rad_s", pa.float64()), ("q_rmse_rad", pa.list_(pa.float64())),
    ("verdict", pa.string()), ("thresholds_json", pa.string()), ("metrics_json", pa.string()),
    ("intervals_json", pa.string()), ("verdict_reasons_json", pa.string()),
    ("noise_floor_q_rad", pa.float64()), ("floor_ratio", pa.float64()), ("adequacy_json", pa.string()),
])
_J = range(1, 8)


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail limits declared before validation; None means not checked. The q residual
    against the run's noise floor is checked by default (`max_floor_ratio`, 3×)."""

    max_q_rmse_rad: float | None = None  # joints.pos_rmse_all_rad
    max_joint_q_rmse_rad: float | None = None  # every joints.pos_rmse_rad[j]
    max_dq_rmse_rad_s: float | None = None  # joints.vel_rmse_all_rad_s
    max_ee_pos_rmse_m: float | None = None  # ee.pos.rmse_m.3d
    max_ee_ori_rmse_rad: float | None = None  # ee.ori.rmse_rad
    max_floor_ratio: float | None = DEFAULT_MAX_FLOOR_RATIO  # q RMSE (all joints) / estimated noise floor

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and not value > 0:
                raise SettingError(name, repr(value), "expected a threshold > 0")

    @property
    def declared(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, sort_keys=True)

    def verdict(self, metrics: dict[str, Any], adequacy: Adequacy | None = None) -> tuple[str | None, list[str]]:
        """('pass' | 'fail' | None when nothing is declared, reasons for a fail). `adequacy`
        (assessed with this `max_floor_ratio`) gives the noise-floor check."""
        if not self.declared:
            return None, []
        joints, ee = metrics.get("joints") or {}, metrics.get("ee") or {}
        checks = [
            ("max_q_rmse_rad", "q RMSE (all joints)", joints.get("pos_rmse_all_rad")),
            ("max_dq_rmse_rad_s", "dq RMSE (all joints)", joints.get("vel_rmse_all_rad_s")),
            ("max_ee_pos_rmse_m", "EE position RMSE 3-D", ((ee.get("pos") or {}).get("rmse_m") or {}).get("3d")),
            ("max_ee_ori_rmse_rad", "EE orientation RMSE", (ee.get("ori") or {}).get("rmse_rad")),
        ]
        reasons = []
        for attr, label, value in checks:
            limit = getattr(self, attr)
            if limit is None:
                continue
            if value is None:
                reasons.append(f"{label}: not measurable on this run (limit {limit:g})")
            elif value > limit:
                reasons.append(f"{label} {value:.4g} > {limit:g}")
        if self.max_joint_q_rmse_rad is not None:
            for j, value in enumerate(joints.get("pos_rmse_rad") or [None] * 7, start=1):
                if value is None or value > self.max_joint_q_rmse_rad:
                    reasons.append(f"J{j} q RMSE {value if value is None else f'{value:.4g}'} > "
                                   f"{self.max_joint_q_rmse_rad:g}")
        if self.max_floor_ratio is not None:
            if adequacy is None:
                reasons.append(f"q residual against the noise floor: not assessed (limit {self.max_floor_ratio:g}×)")
            elif adequacy.verdict()[0] == "fail":
                cause = adequacy.cause_text()
                reasons.append(adequacy.verdict()[1] + (f": {cause}" if cause else ""))
        return ("fail" if reasons else "pass"), reasons


@dataclass
class ValidationOutcome:
    """One (run, parameter set) scored: the row fields, metrics.json, the samples for plots."""

    validation_id: str
    robot: str
    run: str
    fit: str | None
    sim_label: str
    metrics_doc: dict[str, Any]
    verdict: str | None
    reasons: list[str]
    thresholds: Thresholds
    intervals: list[dict[str, int]]
    trajectory: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    created_utc: str = ""
    published: bool = True
    adequacy: Adequacy | None = None

    def row(self) -> pa.Table:
        m = self.metrics_doc
        joints, ee = m.get("joints") or {}, m.get("ee") or {}
        values = {
            "validation_source": "twinlake", "created_utc": self.created_utc, "robot": self.robot, "run": self.run,
            "fit": self.fit, "sim_label": self.sim_label, "num_samples": m["num_samples"],
            "duration_s": m["duration_s"],
            "ee_pos_rmse_3d_m": ((ee.get("pos") or {}).get("rmse_m") or {}).get("3d"),
            "ee_ori_rmse_rad": (ee.get("ori") or {}).get("rmse_rad"),
            "q_rmse_all_rad": joints.get("pos_rmse_all_rad"), "dq_rmse_all_rad_s": joints.get("vel_rmse_all_rad_s"),
            "q_rmse_rad": joints.get("pos_rmse_rad"), "verdict": self.verdict,
            "thresholds_json": self.thresholds.to_json(), "metrics_json": dumps(m),
            "intervals_json": json.dumps(self.intervals), "verdict_reasons_json": json.dumps(self.reasons),
            "noise_floor_q_rad": None, "floor_ratio": None, "adequacy_json": None,
        }
        a = self.adequacy
        if a is not None:
            values["adequacy_json"] = json.dumps(a.to_dict(), allow_nan=False)
            if a.floor.measurable:
                values["noise_floor_q_rad"] = a.floor.q_total_rad
                values["floor_ratio"] = a.ratio_all
        return pa.Table.from_pylist([values], schema=VALIDATION_SCHEMA)


def validation_id(fit: str | None, robot: str, run: str, label: str, thresholds_json: str,
                  params: np.ndarray, intervals: list[dict[str, int]]) -> str:
    """Deterministic partition id for one validation (safe characters, ≤ 128); `thresholds_json`
    the declared thresholds as stored (`Thresholds.to_json()`)."""
    key = json.dumps([fit, robot, run, label, thresholds_json, np.asarray(params).tolist(), intervals])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{(fit or 'nofit')[:60]}--{run[:40]}--{label[:12]}--{digest}"


def _samples(table: pa.Table, rows: np.ndarray, names: list[str]) -> np.ndarray | None:
    """(S, len(names)) float64 of the frame columns at `rows`, None if any is absent or all null."""
    if any(n not in table.column_names for n in names):
        return None
    cols = [table.column(n).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)[rows] for n in names]
    out = np.column_stack(cols)
    return None if np.all(np.isnan(out)) else out


def replay_runs(lake: Lake | str | Path, selectors: list[str], params: np.ndarray, *,
                min_duration_s: float = 0.5, use_ema: bool = True, model_path: str | None = None,
                friction_law: str = "stribeck", configured_load=None):
    """Replay every clean interval of each run for the (P, n) `params` in one population batch,
    with the plant's `friction_law` and each run's configured end-effector load (`configured_load`,
    a twinlake.sim EndLoad, for every run; None: each run's metadata, as a fit's training does).

    Returns a dict run-key -> (refs, real Trajectory, [sim Trajectory per parameter set],
    target pos, target quat, [[ResidualSegment per interval] per parameter set]), samples of
    a run's intervals concatenated in seq order.
    """
    from ..core.intervals import read_frames, replay_inputs, resolve
    from ..core.objective import configured_loads
    from ...sim import load_model
    from ...sim.replay.population import PopulationEngine

    refs = resolve(lake, selectors, min_duration_s=min_duration_s)
    tables = read_frames(lake, refs)
    inputs = replay_inputs(refs, tables, use_ema=use_ema)
    for inp, load in zip(inputs, configured_loads(lake, refs, configured_load)):
        inp.configured_load = load
    model = load_model(model_path) if model_path else None
    results = PopulationEngine(inputs, model=model, nthread=1, record_ee=True,
                               friction_law=friction_law).run(params)
    runs: dict[tuple[str, str], list] = {}
    for ref, table, inp, res in zip(refs, tables, inputs, results):
        runs.setdefault((ref.robot, ref.run), []).append((ref, table, inp, res))
    return {key: _merge(parts, len(params)) for key, parts in runs.items()}


def _merge(parts: list, population: int):
    refs = [p[0] for p in parts]
    cat = lambda xs: None if any(x is None for x in xs) else np.concatenate(xs)  # noqa: E731
    t = np.concatenate([inp.t_s if inp.t_s is not None else inp.sample_ticks * 1e-3 for _, _, inp, _ in parts])
    rows = [inp.source_rows for _, _, inp, _ in parts]
    real = Trajectory(
        t, cat([_samples(tb, r, ["ee_px", "ee_py", "ee_pz"]) for (_, tb, _, _), r in zip(parts, rows)]),
        cat([_samples(tb, r, ["ee_qx", "ee_qy", "ee_qz", "ee_qw"]) for (_, tb, _, _), r in zip(parts, rows)]),
        np.concatenate([inp.q_ref for _, _, inp, _ in parts]), np.concatenate([inp.dq_ref for _, _, inp, _ in parts]))
    des_pos = cat([_samples(tb, r, ["tgt_px", "tgt_py", "tgt_pz"]) for (_, tb, _, _), r in zip(parts, rows)])
    des_quat = cat([_samples(tb, r, ["tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw"]) for (_, tb, _, _), r in zip(parts, rows)])
    sims, segments = [], []
    for p in range(population):
        segments.append([ResidualSegment.from_replay(inp, res.q[p], res.dq[p], res.tau_cmd[p]) for _, _, inp, res in parts])
        ee_pos = cat([res.ee_pos[p] if res.ee_pos is not None else None for *_, res in parts])
        ee_quat = cat([res.ee_quat_xyzw[p] if res.ee_quat_xyzw is not None else None for *_, res in parts])
        sims.append(Trajectory(t, ee_pos, ee_quat, np.concatenate([res.q[p] for *_, res in parts]),
                               np.concatenate([res.dq[p] for *_, res in parts])))
    return refs, real, sims, des_pos, des_quat, segments


def validate_fit(lake: Lake | str | Path, fit_id: str, runs: list[str], thresholds: Thresholds, *,
                 nominal=None, allow_train: bool = False, created_utc: str | None = None,
                 min_duration_s: float = 0.5) -> list[ValidationOutcome]:
    """Validate fit `fit_id` on `runs` (selectors `[ROBOT/]RUN`) with fitted and nominal
    parameters; publish one partition per (run, label). Refuses runs the fit trained on."""
    from ..core.noise_floor import estimate_noise_floor
    from ..records.record import load_fit
    from ...sim import DynamicsParams, load_model, to_frankatwin_decoded

    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    rec = load_fit(lk, fit_id)
    trained = {(u.robot, u.run) for u in rec.train} | {(None, u.run) for u in rec.train}
    nominal = nominal if nominal is not None else DynamicsParams.nominal()
    labels = {"fitted": rec.params, "nominal": nominal}
    params = np.stack([p.to_vector() for p in labels.values()])
    created = created_utc or datetime.now(timezone.utc).isoformat(timespec="microseconds")
    settings = rec.settings or {}
    law, load = _replay_settings(settings)
    replays = replay_runs(lk, runs, params, min_duration_s=settings.get("min_duration_s", min_duration_s),
                          model_path=settings.get("model_path"), friction_law=law, configured_load=load)
    model = load_model(settings["model_path"]) if settings.get("model_path") else None
    outcomes = []
    for (robot, run), (refs, real, sims, des_pos, des_quat, segments) in replays.items():
        if not allow_train and ((robot, run) in trained or (None, run) in trained):
            raise SettingError("runs", f"{robot}/{run}", f"was used to train fit {fit_id}: validation needs held-out runs")
        intervals = [{"interval_index": r.interval_index, "seq_first": r.seq_first, "seq_last": r.seq_last}
                     for r in refs]
        floor = estimate_noise_floor([s.q_real_rad for s in segments[0]], [s.dq_real_rad_s for s in segments[0]])
        for (label, p), sim, vec, segs in zip(labels.items(), sims, params, segments):
            vid = validation_id(fit_id, robot, run, label, thresholds.to_json(), vec, intervals)
            adequacy = assess(segs, p, model=model, max_floor_ratio=thresholds.max_floor_ratio, floor=floor)
            metrics = compute_metrics(real, sim, des_pos, des_quat)
            rel = f"validations/validation={vid}"
            doc = metrics_document(metrics, created_utc=created, real_csv=f"lake:runs/robot={robot}/run={run}",
                                   extra={"sysid_params": to_frankatwin_decoded(p), "fit": fit_id,
                                          "sim_label": label, "intervals": intervals},
                                   out_dir=rel, metrics_path=f"{rel}/metrics.json")
            verdict, reasons = thresholds.verdict(metrics, adequacy)
            traj = {"t_s": real.t_s, "q_real": real.q_rad, "dq_real": real.dq_rad_s, "q_sim": sim.q_rad,
                    "dq_sim": sim.dq_rad_s}
            out = ValidationOutcome(vid, robot, run, fit_id, label, doc, verdict, reasons, thresholds, intervals,
                                    traj, created, adequacy=adequacy)
            out.published = publish_validation(lk, out)
            outcomes.append(out)
    return outcomes


def _replay_settings(settings: dict) -> tuple[str, Any]:
    """(friction law, configured-load override or None) a fit trained with, from its stored
    settings, so that its validation replays the plant the fit was fitted in."""
    from ..core.space import ParameterSpace
    from ...sim.arm_model.load import load_from_json

    law = ParameterSpace.from_json(settings["space"]).friction_law if settings.get("space") else "stribeck"
    load = settings.get("configured_load")
    return law, (None if load is None else load_from_json(load, "fit settings configured_load"))


def trajectory_table(traj: dict[str, np.ndarray]) -> pa.Table:
    """trajectory.parquet: t_s, q1..7, dq1..7 (recorded), q_sim1..7, dq_sim1..7."""
    cols = {"t_s": pa.array(traj["t_s"], pa.float64())}
    for key, prefix in (("q_real", "q"), ("dq_real", "dq"), ("q_sim", "q_sim"), ("dq_sim", "dq_sim")):
        for j in _J:
            cols[f"{prefix}{j}"] = pa.array(traj[key][:, j - 1], pa.float64())
    return pa.table(cols)


def publish_validation(lake: Lake, out: ValidationOutcome) -> bool:
    """Publish the partition (`publish_validation_record`); False (nothing written) when this
    exact validation exists."""
    rec = ValidationRecord(out.validation_id, out.row(), dumps(out.metrics_doc).encode("utf-8"),
                           trajectory_table(out.trajectory))
    try:
        publish_validation_record(lake, rec)
    except PartitionExists:
        return False
    return True


def load_trajectory(lake: Lake | str | Path, validation: str) -> dict[str, np.ndarray]:
    """trajectory.parquet of a validation as arrays (t_s (S,), q_real/q_sim/dq_real/dq_sim (S, 7))."""
    root = lake.root if isinstance(lake, Lake) else Path(lake)
    path = root / "validations" / f"validation={validation}" / "trajectory.parquet"
    if not path.is_file():
        raise RecordError(f"validation {validation!r}: no {path}")
    t = pq.read_table(path)
    get = lambda p: np.column_stack([t.column(f"{p}{j}").to_numpy() for j in _J])  # noqa: E731
    return {"t_s": t.column("t_s").to_numpy(), "q_real": get("q"), "dq_real": get("dq"), "q_sim": get("q_sim"),
            "dq_sim": get("dq_sim")}
