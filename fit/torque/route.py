"""The torque route end to end: runs from the lake → filtered segments → equations → solution →
an ordinary fit record (`fits/fit=<id>/`, method = torque) published by fit/records/record.py.

`TorqueFitSettings` is stored as the fit's settings_json (method "torque"); `torque_json`
in fit.parquet holds what the route did and found (signal and its meaning, filter, gaps,
delay scan, weights, base parameters, every β with its stated error bar (`stderr`: HAC plus,
under Stribeck, the rest rule's systematic part, fit/torque/estimation/systematic.py), the HAC and i.i.d.
ones beside it, the systematic shifts, the velocity-noise correction of the armature
(noise_bias.py), the constraints, train and held-out torque scores, adequacy). `train_floor_ratio` /
`holdout_floor_ratio` are the torque residual over the torque noise floor (residuals.py);
`best_loss` and `train_loss` the training runs' mean square raw torque residual [N·m²].

Parameters (`params`): the commanded route always fits the twin's default groups that are
linear in the torques (armature, friction in `friction_law` — Stribeck or tanh — and
viscous) and scans the delay 0..MAX_DELAY_MS; presets add `+payload`, `+asymmetry`, `+bias`.
The measured route always fits the payload, `+links` frees the seven links' θ (then the
payload is part of link 7), and friction on the link side (viscous and the law's levels) and a
sensor offset per joint; never the armature, never a delay. It keeps every recorded row: a row
standing still is the static equation (equations.py). Runs sampled below LOW_RATE_HZ (franka_ros'
30 Hz robot state) are fitted quasi-statically instead (quasi_static.py, low_rate.py).

Besides the scores, each fit stores what it says about itself: the training score over every
finite row and against the nominal model (residuals.py, findings.py), the signal-meaning check
(signal_check.py), the delay scan's minimum at an end (findings.py) and the replayable held-out
runs replayed with the fitted parameters (replay_check.py), each an adequacy line.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path

import numpy as np

from ..errors import DataError, SettingError
from ...catalog import connect
from ...catalog.selection import parse_selector, pick_interval, resolve_run, run_frames, run_intervals
from ...sim import DynamicsParams
from ...sim.arm_model.params import MAX_DELAY_MS
from ..records.extras import TorqueExtras
from ..records.record import FitRecord, IntervalUse, publish_fit
from .inputs.derivatives import FilterSpec, cutoff_from_spectrum, segments
from .model.equations import EquationSpec, build, with_rest_rule
from .model.friction_basis import check_law
from .model.regressor import RigidBodyModel
from .replay_check import replay_holdout
from .scores.residuals import adequacy_line, nominal_line, score
from .scores.findings import causes, delay_edge, delay_undetermined, standstill_summary
from .low_rate_record import LOW_RATE_HZ, quasi_static_record, sample_rate_hz
from .inputs.signal_check import check as check_signal
from .inputs.signals import MEANING, RunSamples, choose_signal, samples
from .model.soft_friction import CREEP_MARGIN, FrictionConstraint
from .estimation.solve import solve_at_level
from .estimation.systematic import error_bar_note
from .estimation.twin_params import dynamics_params, finite, identifiability_json

PRESETS = ("+payload", "+asymmetry", "+bias", "+links")


@dataclass
class TorqueFitSettings:
    """A torque fit's inputs (stored as settings_json). train/holdout: `[ROBOT/]RUN[:INTERVAL]`
    (no INTERVAL: the whole run, gaps handled here); torque: 'commanded' | 'measured' | None
    (default from the run); params: PRESETS; cutoff_hz: None = from the spectrum;
    configured_load: EndLoad JSON overriding each run's metadata; delay_ms: None = scan."""

    train: list[str]
    holdout: list[str] = field(default_factory=list)
    torque: str | None = None
    friction_law: str = "stribeck"
    params: list[str] = field(default_factory=list)
    cutoff_hz: float | None = None
    configured_load: dict | None = None
    model_path: str | None = None
    delay_ms: int | None = None
    creep_margin: float = CREEP_MARGIN  # the rest rule's margin over the creep acceleration (soft_friction)
    max_fill_ticks: int = 5
    guard_ticks: int = 1
    start_from: str | None = None  # the fit whose parameters are the nominal model (None: the twin's)
    method: str = "torque"

    def digest(self) -> str:
        return sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


def read_samples(lake: Path, selector: str, torque: str | None) -> tuple[RunSamples, str]:
    """One selector's samples and the signal chosen; ValueError naming the selector."""
    sel = parse_selector(selector)
    con = connect(lake)
    try:
        row = resolve_run(con, sel.run, sel.robot)
        first = last = None
        if sel.interval_index is not None:
            chosen = pick_interval(run_intervals(con, row["robot"], sel.run), sel.interval_index, row["robot"], sel.run)
            first, last = chosen["seq_first"], chosen["seq_last"]
        frames = run_frames(con, row["robot"], sel.run, first, last)
    finally:
        con.close()
    if frames.num_rows == 0:
        raise DataError(f"run selector {selector!r}: no frames")
    signal = choose_signal(frames, torque, f"run {row['robot']}/{sel.run}")
    return samples(frames, signal, robot=row["robot"], run=sel.run, interval_index=sel.interval_index,
                   run_row=row), signal


def equation_spec(settings: TorqueFitSettings, signal: str, rigid: RigidBodyModel, configured) -> EquationSpec:
    """The EquationSpec of the settings for `signal`; ValueError for a preset the route lacks."""
    law = check_law(settings.friction_law)
    unknown = [p for p in settings.params if p not in PRESETS]
    if unknown:
        raise SettingError("params", repr(unknown[0]), f"the torque route accepts {', '.join(PRESETS)}")
    if signal == "commanded" and "+links" in settings.params:
        raise SettingError("params", "+links", "the links' inertials are seen by the measured torques "
                           "only (tau_J); the commanded torque never carries the links' gravity")
    if signal == "commanded":
        groups = ("armature", "mu_viscous", "friction")
        groups += ("coulomb_asymmetry",) * ("+asymmetry" in settings.params) + ("tau_bias",) * ("+bias" in settings.params)
        delays = (int(settings.delay_ms),) if settings.delay_ms is not None else tuple(range(MAX_DELAY_MS + 1))
        theta_cfg = rigid.payload_theta(configured.mass_kg, configured.com_m, configured.inertia_kgm2)
        return EquationSpec(signal, law, groups, payload="+payload" in settings.params, links=False,
                            configured_theta=tuple(theta_cfg), delays=delays)
    groups = ("mu_viscous", "friction", "tau_offset")
    return EquationSpec(signal, law, groups, payload=True, links="+links" in settings.params, delays=(0,))


def nominal_beta(spec: EquationSpec, rigid: RigidBodyModel, start: DynamicsParams) -> np.ndarray:
    """β at the nominal model: the links' θ, the configured payload (commanded) or none, the
    twin's nominal friction/armature, zero asymmetry, bias and offsets (the prior's centre)."""
    values = []
    for body in spec.bodies:
        if body == "payload":
            values.extend(spec.configured_theta)
        else:
            i = int(body[4:]) - 1
            values.extend(rigid.theta_nominal[10 * i:10 * i + 10])
    nominal = {"armature": start.armature, "mu_viscous": start.mu_viscous, "mu_static": start.mu_static,
               "mu_dynamic": start.mu_static * start.dynamic_ratio}
    for name in spec.local_names():
        values.extend(nominal.get(name, np.zeros(7)) if spec.signal == "commanded" else np.zeros(7))
    return np.asarray(values, dtype=np.float64)


def _configured(settings: TorqueFitSettings, runs: list[RunSamples]):
    from ...sim.arm_model.load import NO_LOAD, EndLoad, load_from_metadata

    if settings.configured_load is not None:
        return EndLoad(**{k: v for k, v in settings.configured_load.items()})
    loads = {json.dumps((load_from_metadata(r.metadata, r.label) or NO_LOAD).to_json()) for r in runs}
    if len(loads) > 1:
        raise SettingError("configured_load", None, "the train runs state different configured loads: fit them "
                           "separately or state the one they carried")
    return EndLoad(**json.loads(loads.pop())) if loads else NO_LOAD


def decimation(cutoff_hz: float, rate_hz: float = 1000.0) -> int:
    """Every how many ticks an equation is formed: f_s / (4 f_c), at least 1 (the signals are
    low-passed at f_c first, so the skipped rows repeat what the kept ones say)."""
    return max(1, int(rate_hz // (4.0 * cutoff_hz)))


def _equations(runs, spec, rigid, fspec):
    out, gaps = [], {}
    for r in runs:
        segs, report = segments(r.seq, r.q, r.dq, r.tau, cutoff_hz=fspec.cutoff_hz, trim_s=fspec.trim_s,
                                max_fill_ticks=fspec.max_fill_ticks, guard_ticks=fspec.guard_ticks)
        if not segs:
            raise DataError(f"{r.label}: no segment long enough to filter ({report.to_dict()})")
        gaps[r.label] = report.to_dict()
        out.append([build(s, spec, rigid, decimation(fspec.cutoff_hz)) for s in segs])
    return out, gaps


def fit_torque(lake: Path, settings: TorqueFitSettings, *, fit_id: str | None = None,
               start: DynamicsParams | None = None, publish: bool = True) -> FitRecord:
    """Run the torque route and (by default) publish the fit; returns its FitRecord."""
    t0 = time.perf_counter()
    lake = Path(lake)
    if not settings.train:
        raise SettingError("train", None, "give at least one [ROBOT/]RUN[:INTERVAL]")
    start = DynamicsParams.nominal() if start is None else start
    train = [read_samples(lake, s, settings.torque) for s in settings.train]
    signals = {sig for _, sig in train}
    if len(signals) > 1:
        raise SettingError("torque", None, f"the train runs would use different torques ({sorted(signals)}): "
                           "choose one")
    signal = signals.pop()
    settings.torque = signal
    runs = [r for r, _ in train]
    holdout = [read_samples(lake, s, signal)[0] for s in settings.holdout]
    rigid = RigidBodyModel.load(settings.model_path)
    rate = sample_rate_hz(runs)
    if rate < LOW_RATE_HZ:  # e.g. franka_ros' 30 Hz robot state: quasi-static rows only
        rec = quasi_static_record(settings, runs, signal, rigid, start, rate,
                                  fit_id or _new_fit_id(settings),
                                  _stored_settings(settings, settings.friction_law), time.perf_counter() - t0)
        if publish:
            publish_fit(lake, rec)
        return rec
    configured = _configured(settings, runs)
    spec = equation_spec(settings, signal, rigid, configured)
    cutoff = settings.cutoff_hz or max(cutoff_from_spectrum(r.dq[np.all(np.isfinite(r.dq), axis=1)]) for r in runs)
    fspec = FilterSpec(cutoff_hz=float(cutoff), from_spectrum=settings.cutoff_hz is None, trim_s=3.0 / cutoff,
                       max_fill_ticks=settings.max_fill_ticks, guard_ticks=settings.guard_ticks)
    train_eqs, gaps = _equations(runs, spec, rigid, fspec)
    flat = [e for per_run in train_eqs for e in per_run]
    sol, flat, rule = solve_at_level(flat, spec, nominal_beta(spec, rigid, start),
                                     _damping(runs) if signal == "commanded" else None,
                                     constraint_builder(settings.model_path), start.mu_static, start.armature,
                                     settings.creep_margin, (rigid.flange_rotation, rigid.flange_position_m))
    train_eqs = _regroup(train_eqs, flat)
    sol.notes.delay_scanned = signal == "commanded" and settings.delay_ms is None
    sol.notes.delay_undetermined = delay_undetermined(sol.delay_scan) if sol.notes.delay_scanned else None
    params = dynamics_params(sol, rigid, start)
    used_score = score(flat, sol.beta, sol.delay, cutoff)
    train_score = score(flat, sol.beta, sol.delay, cutoff, names=sol.names)  # every finite row
    nominal_score = score(flat, nominal_beta(spec, rigid, start), sol.delay, cutoff, names=sol.names)
    signal_check = check_signal(signal, runs, rigid)
    per_run = [score(e, sol.beta, sol.delay, cutoff) for e in train_eqs]
    hold_scores = []
    if holdout:
        hold_eqs, hold_gaps = _equations(holdout, spec, rigid, fspec)
        hold_eqs = [[with_rest_rule(e, rule) for e in per_run] for per_run in hold_eqs]
        gaps.update(hold_gaps)
        hold_scores = [score(e, sol.beta, sol.delay, cutoff) for e in hold_eqs]
    hold_flat = [e for h in (hold_eqs if holdout else []) for e in h]
    hold_all = score(hold_flat, sol.beta, sol.delay, cutoff) if holdout else None
    hold_nominal = score(hold_flat, nominal_beta(spec, rigid, start), sol.delay, cutoff) if holdout else None
    uses = [IntervalUse(r.robot, r.run, r.interval_index, int(r.seq[0]), int(r.seq[-1]), "train", 1.0,
                        float(s.rmse_raw_nm.mean()), r.run_sha256) for r, s in zip(runs, per_run)]
    uses += [IntervalUse(r.robot, r.run, r.interval_index, int(r.seq[0]), int(r.seq[-1]), "holdout", None,
                         float(s.rmse_raw_nm.mean()), r.run_sha256) for r, s in zip(holdout, hold_scores)]
    lines = [adequacy_line("training (every finite row)", train_score),
             nominal_line(train_score, nominal_score, causes(sol, used_score, train_score, signal_check)),
             signal_check.line()]
    edge = delay_edge(sol.delay_scan) if sol.notes.delay_scanned else None
    if edge is not None:
        lines.append((edge, False))
    if hold_all is not None:
        lines.append(adequacy_line("held-out", hold_all))
    replays = replay_holdout(lake, settings.holdout, params, friction_law=spec.law, model_path=settings.model_path,
                             configured_load=configured if settings.configured_load is not None else None)
    lines.extend(r.line() for r in replays)
    torque = torque_summary(sol, spec, signal, fspec, gaps, train_score, hold_all, lines, rigid, rule)
    torque.update(train_used_rows=used_score.to_dict(), nominal_train=nominal_score.to_dict(),
                  nominal_holdout=None if hold_nominal is None else hold_nominal.to_dict(),
                  signal_check=signal_check.to_dict(), delay_at_bound=edge,
                  delay_undetermined=sol.notes.delay_undetermined, holdout_replay=[r.to_dict() for r in replays], standstill=standstill_summary(flat, spec))
    wall = time.perf_counter() - t0
    rec = FitRecord(
        fit_id=fit_id or _new_fit_id(settings),
        fit_source="twinlake", created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="completed", best_loss=float(np.mean(train_score.rmse_raw_nm ** 2)),  # mean square torque residual [N·m²]
        params=params, seed=None, settings=_stored_settings(settings, spec.law), runs=uses,
        extra=TorqueExtras(method="torque", wall_s=float(wall), train_loss=float(np.mean(train_score.rmse_raw_nm ** 2)),
                           holdout_loss=None if hold_all is None else float(np.mean(hold_all.rmse_raw_nm ** 2)),
                           identifiability_json=identifiability_json(sol, rigid, params, torque["error_bar_note"]),
                           train_floor_ratio=_finite(train_score.floor_ratio),
                           holdout_floor_ratio=None if hold_all is None else _finite(hold_all.floor_ratio),
                           torque_json=json.dumps(torque)).to_json())
    if publish:
        publish_fit(lake, rec)
    return rec


def constraint_builder(model_path: str | None):
    """armature (7,) -> the twin's FrictionConstraint (soft_friction.py) on the model at
    `model_path` (the bundled FR3 when None)."""
    from ...sim.arm_model.model import arm_index, load_model

    model = load_model(model_path)
    dofs = arm_index(model).dof_adr
    return lambda armature: FrictionConstraint.of_model(model, dofs, armature)


def _regroup(per_run: list[list], flat: list) -> list[list]:
    """`flat` cut back into `per_run`'s shape."""
    out, i = [], 0
    for group in per_run:
        out.append(flat[i:i + len(group)])
        i += len(group)
    return out


def _damping(runs: list[RunSamples]) -> np.ndarray | None:
    """The controller's D_joint (7,) [N·m·s/rad], the runs' mean; None when a run records none
    (then noise_bias leaves out the velocity-feedback term)."""
    found = [r.damping_nms_rad for r in runs]
    return None if any(d is None for d in found) else np.mean(found, axis=0)


def _new_fit_id(settings: TorqueFitSettings) -> str:
    """A new torque fit's id: `fit-<UTC time to the second>-<settings digest[:8]>`."""
    return f"fit-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{settings.digest()[:8]}"


def _stored_settings(settings: TorqueFitSettings, law: str) -> dict:
    """settings_json: the TorqueFitSettings plus a parameter space carrying the friction law
    (FitRecord.friction_law, and every consumer of a fit's law, read it there)."""
    from ..core.space import parse_space

    return asdict(settings) | {"space": parse_space([], friction_law=law).to_json()}


def _unsettled(sol) -> str:
    """The note's addendum when the rest rule's alternation stopped at its cap still moving, or
    named joints that never broke away (solve.creeping)."""
    stuck = sol.notes.never_broke_away or []
    creep = (f"; J{', J'.join(map(str, stuck))} never broke away (its rows creep: the friction-loss constraint's "
             "-(ddq + b dq)/R, read as armature and viscous friction, drove its level toward 0): only rows that "
             "slide at its level's upper bound are used, its friction and armature held at the prior where none "
             "does") if stuck else ""
    if sol.notes.rest_rule_settled is None or sol.notes.rest_rule_settled:
        return creep
    return creep + (f"; the rest rule did not settle in {sol.notes.rest_rule_passes} solves (breakaway levels still "
            f"moving {100 * sol.notes.rest_rule_last_change:.0f} %: the Stribeck law may not describe this "
            "friction; try the tanh friction law)")


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def torque_summary(sol, spec, signal, fspec, gaps, train_score, hold_score, lines, rigid, rule=None) -> dict:
    """torque_json: what the route did and found (module docstring)."""
    stderr, iid = sol.stderr, np.sqrt(np.maximum(np.diag(sol.cov_iid), 0.0))
    hac = np.sqrt(np.maximum(np.diag(sol.cov_hac), 0.0))
    syst = sol.systematic.stderr
    out = {"signal": signal, "meaning": MEANING[signal], "friction_law": spec.law,
           "decimation_ticks": decimation(fspec.cutoff_hz),
           "joint_groups": list(spec.joint_groups), "bodies": spec.bodies, "filter": fspec.to_dict(), "gaps": gaps,
           "rest_rule": None if rule is None else rule.to_dict() | {
               "passes": sol.notes.rest_rule_passes, "settled": sol.notes.rest_rule_settled,
               "last_change": sol.notes.rest_rule_last_change,
               "never_broke_away": [] if sol.notes.never_broke_away is None else sol.notes.never_broke_away,
               "meaning": "Stribeck: a row is used when b·|dq| + sign(dq)·ddq >= margin·creep_accel (the twin's "
                          "friction-loss constraint at its level) and no row within the filter's reach is not"},
           "delay_ms": sol.delay, "delay_scan": {str(k): v for k, v in sol.delay_scan.items()},
           "sigma_nm": sol.sigma_nm.tolist(), "hac_bandwidth_ticks": sol.bandwidth, "rows": sol.rows,
           "constrained": sol.constrained, "base_parameters": sol.base.to_dict(),
           "beta": [{"name": n, "value": finite(b), "unconstrained": finite(bh), "stderr": finite(s),
                     "stderr_hac": finite(h), "stderr_systematic": finite(y), "stderr_iid": finite(i)}
                    for n, b, bh, s, h, y, i in zip(sol.names, sol.beta, sol.beta_hat, stderr, hac, syst, iid)],
           "systematic": sol.systematic.to_dict(sol.names), "noise_bias": sol.notes.noise_bias,
           "error_bar_note": error_bar_note(hac, stderr, sol.names, sol.systematic) + _unsettled(sol),
           "train": train_score.to_dict(), "holdout": None if hold_score is None else hold_score.to_dict(),
           "adequacy_lines": [[t, ok] for t, ok in lines]}
    if "payload" in spec.bodies:
        i = sol.names.index("payload_m")
        m, com, inertia = rigid.payload_from_theta(sol.beta[i:i + 10])
        out["payload"] = {"mass_kg": m, "com_m": com.tolist(), "inertia_about_com_kgm2": inertia.tolist()}
    return out


__all__ = ["PRESETS", "TorqueFitSettings", "equation_spec", "fit_torque", "nominal_beta", "read_samples"]
