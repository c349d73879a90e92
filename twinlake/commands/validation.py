"""`twinlake fit validate | quick | report`: held-out validation, the quick per-joint fit and
the HTML report of a fit (docs/fitting.md), over twinlake.fit. twinlake/commands/fit.py adds
them to the `twinlake fit` group."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from .lake_session import bucket_sessions
from ..options import OBJECT_LAKE, error_text, fail


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _load_profile(path: Optional[Path]):
    from ..sim import DynamicsParams, load_params

    if path is None:
        return DynamicsParams.nominal(), "nominal (Menagerie fr3.xml values)"
    return load_params(path), str(path)


def _torque_held_out(root, fit: str, runs: list[str], max_floor_ratio: float, as_json: bool) -> tuple[list[str], bool]:
    """A torque fit (fit/torque) on runs that cannot be replayed (no clean interval: no targets
    or gains): their held-out torque prediction is scored and printed here; returns the runs
    left to replay and whether a scored one failed."""
    from ..catalog import connect
    from ..catalog.selection import parse_selector, resolve_run, run_intervals
    from ..fit import missing_in_run
    from ..fit import load_fit
    from ..fit import held_out_scores, is_torque_fit

    try:
        rec = load_fit(root, fit)
        if not is_torque_fit(rec):
            return runs, False
        con = connect(root)
        try:
            scored = []
            for text in runs:
                sel = parse_selector(text)
                row = resolve_run(con, sel.run, sel.robot)
                clean = run_intervals(con, row["robot"], sel.run)
                if not clean or missing_in_run(con, row["robot"], sel.run, clean[0]["seq_first"]):
                    scored.append(text)
        finally:
            con.close()
        results = held_out_scores(root, rec, scored, max_floor_ratio or float("inf")) if scored else []
    except ValueError as exc:
        fail(error_text(exc))
    for r in results:
        vid, new = _store_torque_validation(root, rec, r, max_floor_ratio or float("inf"))
        if as_json:
            typer.echo(json.dumps({"run": r.run, "method": "torque prediction (not replayable)", "passed": r.passed,
                                   "adequacy": r.line, "validation": vid, "new": new, **r.score.to_dict()}))
        else:
            typer.echo(f"{r.run}: not replayable (no clean interval, or no targets and gains); torque prediction: {r.line}"
                       f" ({'stored as' if new else 'already stored:'} validation {vid})")
    return [t for t in runs if t not in scored], any(r.passed is False for r in results)


def _store_torque_validation(root, rec, result, max_floor_ratio: float) -> tuple[str, bool]:
    """Publish one held-out torque score as a validation; (its id, False when it already existed)."""
    from datetime import datetime, timezone

    from ..catalog import PartitionExists
    from ..fit import publish_validation_record
    from ..fit import torque_validation

    # microseconds, as a replayed validation's: `fit_validations` picks the latest by this stamp, and
    # two validations of one run within a second (a pass, then a stricter fail) must not tie
    stored = torque_validation(rec, result, max_floor_ratio,
                               datetime.now(timezone.utc).isoformat(timespec="microseconds"))
    try:
        publish_validation_record(root, stored)
    except PartitionExists:
        return stored.validation_id, False
    return stored.validation_id, True


@bucket_sessions
def validate_cmd(
    fit: str = typer.Argument(..., help="Fit id (see `twinlake fit list`)."),
    runs: list[str] = typer.Option(..., "--runs", help="Held-out runs [ROBOT/]RUN, one or more (--runs a b, a,b or repeated)."),
    max_q_rmse_rad: Optional[float] = typer.Option(None, "--max-q-rmse-rad", help="Pass only if joint position RMSE over all joints <= X [rad]."),
    max_joint_q_rmse_rad: Optional[float] = typer.Option(None, "--max-joint-q-rmse-rad", help="... and every joint's position RMSE <= X [rad]."),
    max_dq_rmse_rad_s: Optional[float] = typer.Option(None, "--max-dq-rmse-rad-s", help="... and joint velocity RMSE (all joints) <= X [rad/s]."),
    max_ee_pos_rmse_m: Optional[float] = typer.Option(None, "--max-ee-pos-rmse-m", help="... and EE position RMSE (3-D) <= X [m]."),
    max_ee_ori_rmse_rad: Optional[float] = typer.Option(None, "--max-ee-ori-rmse-rad", help="... and EE orientation RMSE <= X [rad]."),
    max_floor_ratio: float = typer.Option(3.0, "--max-floor-ratio", min=0.0, help="... and q RMSE (all joints) <= X × the run's own noise floor (estimated from its q; 0: do not check)."),
    nominal: Optional[Path] = typer.Option(None, "--nominal", help="Profile to compare against (default: nominal)."),
    allow_train: bool = typer.Option(False, "--allow-train", help="Also accept runs the fit trained on (not a validation!)."),
    as_json: bool = typer.Option(False, "--json", help="Print the validation rows as JSON."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """Replay held-out runs with the fitted and nominal parameters; store metrics.json and verdicts.
    Exit status 1 when the fitted parameters fail on any run (2: bad input)."""
    from rich.markup import escape
    from rich.table import Table

    from .lake_session import lake_root
    from ..fit import Thresholds, validate_fit
    from ..progress import Stages
    from ..option_lists import split_values

    runs = split_values(runs)
    runs, torque_failed = _torque_held_out(lake_root(lake), fit, runs, max_floor_ratio, as_json)
    if not runs:
        _new_verdict(lake_root(lake), fit, as_json)
        raise typer.Exit(1 if torque_failed else 0)
    try:
        thresholds = Thresholds(max_q_rmse_rad, max_joint_q_rmse_rad, max_dq_rmse_rad_s, max_ee_pos_rmse_m,
                                max_ee_ori_rmse_rad, max_floor_ratio or None)
        params, _ = _load_profile(nominal)
        with Stages("fit validate", enabled=not as_json) as stages:  # stderr; quiet with --json
            stages.stage(f"replaying {len(runs)} held-out run(s), fitted and nominal in one batch")
            outs = validate_fit(lake_root(lake), fit, runs, thresholds, nominal=params,
                                allow_train=allow_train)
    except ValueError as exc:
        fail(error_text(exc))
    rows = [{"validation": o.validation_id, "robot": o.robot, "run": o.run, "sim_label": o.sim_label,
             "q_rmse_all_rad": (o.metrics_doc.get("joints") or {}).get("pos_rmse_all_rad"),
             "dq_rmse_all_rad_s": (o.metrics_doc.get("joints") or {}).get("vel_rmse_all_rad_s"),
             "ee_pos_rmse_3d_m": (((o.metrics_doc.get("ee") or {}).get("pos") or {}).get("rmse_m") or {}).get("3d"),
             "verdict": o.verdict, "reasons": o.reasons, "new": o.published,
             "noise_floor_q_rad": _finite(o.adequacy.floor.q_total_rad) if o.adequacy.floor.measurable else None,
             "floor_ratio": _finite(o.adequacy.ratio_all) if o.adequacy.floor.measurable else None,
             "likely_cause": None if o.adequacy.cause is None else o.adequacy.cause.name,
             "adequacy": o.adequacy.line()} for o in outs]
    failed = torque_failed or any(o.sim_label == "fitted" and o.verdict == "fail" for o in outs)
    _new_verdict(lake_root(lake), fit, as_json)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        raise typer.Exit(1 if failed else 0)
    table = Table(title=escape(f"fit {fit}: held-out validation" + ("" if thresholds.declared else " (no thresholds declared)")))
    for col in ("robot/run", "params", "q RMSE [mrad]", "× noise floor", "dq RMSE [mrad/s]", "EE RMSE [mm]", "verdict",
                "stored"):
        table.add_column(escape(col))  # rich would take "[mrad]" for markup and drop it
    milli = lambda v: "—" if v is None else f"{1e3 * v:.2f}"  # noqa: E731
    for r in rows:
        ratio = "—" if r["floor_ratio"] is None else f"{r['floor_ratio']:.3g}"
        table.add_row(*(escape(c) for c in (f"{r['robot']}/{r['run']}", r["sim_label"], milli(r["q_rmse_all_rad"]),
                                             ratio, milli(r["dq_rmse_all_rad_s"]), milli(r["ee_pos_rmse_3d_m"]),
                                             r["verdict"] or "—", "new" if r["new"] else "already stored")))
    from ..fit import console as stdout_console

    stdout_console().print(table)  # not a terminal: wide enough not to truncate the run names
    for r in rows:
        if r["sim_label"] == "fitted":
            typer.echo(f"model adequacy, {r['robot']}/{r['run']}: {r['adequacy']}")
    for r in rows:
        for reason in r["reasons"]:
            typer.echo(f"{r['robot']}/{r['run']} {r['sim_label']}: {reason}")
    if failed:
        raise typer.Exit(1)


def _new_verdict(root, fit: str, as_json: bool) -> None:
    """A validation arrived: the fit's verdict is decided again and appended (fit/reports/verdict_record.py);
    said on stderr after the table (with --json only stored: `fit show --json` has it)."""
    from ..fit import load_fit
    from ..fit import record_verdict

    verdict = record_verdict(root, load_fit(root, fit), "fit validate")
    if not as_json:
        typer.echo(verdict.line(), err=True)


def _write_atomic(path: Path, text: str) -> None:
    from ..catalog import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


@bucket_sessions
def quick_cmd(
    run: str = typer.Argument(..., help="Run [ROBOT/]RUN."),
    joint: int = typer.Option(..., "--joint", help="Joint number 1..7."),
    profile: Optional[Path] = typer.Option(None, "--profile", help="Profile in use to compare with (default: nominal)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for the gap report (default: <lake>/reports/...)."),
    friction: bool = typer.Option(True, "--friction/--no-friction", help="Fit a Coulomb friction term."),
    delay_ms: int = typer.Option(0, "--delay-ms", min=0, max=4, help="Torque-to-motion delay assumed [ms]."),
    allow_warnings: bool = typer.Option(False, "--allow-warnings", help="Write the report even when the fit is not trustworthy."),
    as_json: bool = typer.Option(False, "--json", help="Print the fit as JSON."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """A first-order per-joint fit (inertia, viscous damping, Coulomb friction) with standard errors; gap report against the profile."""
    from ..catalog import lake_location
    from ..fit import quick_fit_run
    from ..fit import QuickFitRefused
    from .lake_session import lake_root

    root = lake_root(lake)
    # a bucket lake's session is a copy that goes when the command ends: the report's default home is here
    reports = root if lake_location(lake).is_local else Path.cwd()
    try:
        params, label = _load_profile(profile)
        report = quick_fit_run(root, run, joint, profile=params, profile_label=label, with_friction=friction,
                               delay_ms=delay_ms, strict=not allow_warnings)
    except QuickFitRefused as exc:
        fail(f"quick fit of {run} J{joint} refused: {exc}")
    except ValueError as exc:
        fail(error_text(exc))
    robot_run = report.run_label.split(" ")[0]
    robot, _, run_id = robot_run.partition("/")
    name = f"quick_j{joint}.fit.md"
    path = (out / f"{robot}.{run_id}.{name}") if out else reports / "reports" / f"robot={robot}" / f"run={run_id}" / name
    _write_atomic(path, report.markdown())
    r = report.result
    if as_json:
        typer.echo(json.dumps({
            "run": robot_run, "joint": joint, "trustworthy": r.trustworthy, "warnings": list(r.warnings),
            "inertia_kgm2": r.model.inertia_kgm2, "inertia_se": r.stderr.inertia_kgm2,
            "viscous_nms_per_rad": r.model.viscous_nms_per_rad, "viscous_se": r.stderr.viscous_nms_per_rad,
            "coulomb_nm": r.model.coulomb_nm, "coulomb_se": r.stderr.coulomb_nm,
            "condition_number": r.condition_number, "windows": r.num_windows, "report": str(path),
            "stderr_method": r.covariance_method, "bandwidth_windows": r.bandwidth_windows,
            "sim": {"inertia_kgm2": report.sim_model.inertia_kgm2,
                    "viscous_nms_per_rad": report.sim_model.viscous_nms_per_rad,
                    "coulomb_nm": report.sim_model.coulomb_nm}}, indent=2))
        return
    typer.echo(report.markdown())
    typer.echo(f"gap report: {path}", err=True)


@bucket_sessions
def report_cmd(
    fit: str = typer.Argument(..., help="Fit id."),
    out: Path = typer.Option(..., "--out", help="Output directory (index.html and the PNGs)."),
    nominal: Optional[Path] = typer.Option(None, "--nominal", help="Profile shown as the nominal values."),
    error_bars: bool = typer.Option(False, "--error-bars", help="Compute 95 % intervals now if the fit has none stored."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """Write a self-contained HTML report of a fit (plots embedded; PNGs beside it)."""
    from .lake_session import lake_root
    from ..fit import render_report
    from ..fit import report_data_from_lake
    from ..progress import Stages

    try:
        params, _ = _load_profile(nominal)
        with Stages("fit report") as stages:  # on stderr; the page's path is the only stdout
            stages.stage("gathering the fit, its validations and error bars")
            data = report_data_from_lake(lake_root(lake), fit, nominal=params, error_bars=error_bars)
            stages.stage("plotting")
            page = render_report(data, out)
    except ValueError as exc:
        fail(error_text(exc))
    typer.echo(str(page))
