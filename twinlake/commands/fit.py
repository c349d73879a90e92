"""`twinlake fit run | list | show | export` (docs/fitting.md), over twinlake.fit.

`fit_app` is the `twinlake fit` group: these four commands, then `validate`, `quick` and
`report` from twinlake/commands/validation.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from . import validation
from .lake_session import bucket_sessions
from ..options import OBJECT_LAKE, error_text, fail

REFINE_ITERATIONS = 30
"""`fit run --refine`'s default, the full-data LM's iteration cap (it stops earlier once
converged; fit/replay/stopping.py). On the demo's gentle runs (0.9-1.2°, 4 s) 16 of 20 fits
still gained at a cap of 10, and the cap of 30 cost no measurable time there: the LM crawls along
the directions the data barely determine (bench/RESULTS.md, "The full-data LM's cap on gentle
runs")."""

fit_app = typer.Typer(help="Fit dynamics parameters, inspect and export fits.", no_args_is_help=True)


def _weights(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for spec in items:
        for item in filter(None, (s.strip() for s in spec.split(","))):
            run, eq, value = item.rpartition("=")
            try:
                if not eq or not run:
                    raise ValueError
                out[run] = float(value)
            except ValueError:
                raise ValueError(f"--weights {item!r}: expected RUN=WEIGHT (a number)") from None
    return out


@fit_app.command("run")
@bucket_sessions
def run_cmd(
    train: list[str] = typer.Option([], "--train", help="Training data [ROBOT/]RUN[:INTERVAL], one or more (--train a b, a,b or repeated)."),
    holdout: list[str] = typer.Option([], "--holdout", help="Held-out runs, never seen by the search (one or more)."),
    params: list[str] = typer.Option([], "--params", help="Freeze/re-bound/free: 'armature=0:0.6 dynamic_ratio=1 payload_mass=0:3' (or comma-separated), presets +payload, +smooth-friction, +sigmoid-friction, +asymmetry, +bias, +joint-delay, +links, +load-friction, or JSON files."),
    friction_law: Optional[str] = typer.Option(None, "--friction-law", help="The plant's friction law: stribeck (FrankaTwin's, default), tanh (smooth Coulomb) or sigmoid (Gaz et al. 2019); stored with the fit."),
    configured_load: Optional[str] = typer.Option(None, "--configured-load", help="The firmware's configured end-effector load MASS[,X,Y,Z] (kg; CoM m in the flange frame) for every run (default: each run's metadata, else none); stored with the fit."),
    population: int = typer.Option(32, "--population", min=2, help="CMA-ES population per generation."),
    generations: int = typer.Option(20, "--generations", min=1, help="Generations to run."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed and data give the same fit, bit for bit."),
    weights: list[str] = typer.Option([], "--weights", help="Per-run loss weights RUN=W, one or more (default 1)."),
    sigma0: float = typer.Option(0.3, "--sigma", help="Initial CMA-ES step in the normalised box."),
    q_scale: float = typer.Option(0.01, "--q-scale", help="Declared joint position error scale [rad]."),
    dq_scale: float = typer.Option(0.01 / 0.1**0.5, "--dq-scale", help="Declared joint velocity error scale [rad/s]."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", help="Use at most this many seconds of each interval."),
    min_seconds: float = typer.Option(0.5, "--min-seconds", help="Ignore clean intervals shorter than this [s]."),
    method: str = typer.Option("local", "--method", help="Search: local (multi-start LM on cheap windows, then LM on the full data; CMA-ES from the best local point when its gates fail), cma (CMA-ES, then --refine LM iterations) or torque (no replay: weighted least squares of the recorded joint torques; docs/fitting.md)."),
    explore_seconds: float = typer.Option(30.0, "--explore-seconds", min=0, help="--method local: wall-seconds budget of the search after a failed gate (more starts, then CMA-ES while it lowers the loss by >= 0.5 % per 2 generations; 0: none)."),
    torque: Optional[str] = typer.Option(None, "--torque", help="--method torque: the torque signal, commanded (tau_cmd) or measured (tau_J); default: commanded when the run has it."),
    cutoff_hz: Optional[float] = typer.Option(None, "--cutoff-hz", help="--method torque: the zero-phase low-pass cutoff [Hz] (default: from the data's spectrum)."),
    start_from: Optional[str] = typer.Option(None, "--start-from", help="Start the local search at fit FIT's parameters (one start instead of --method local's three); with --method torque, FIT's values are the nominal the prior holds."),
    refine_iterations: int = typer.Option(REFINE_ITERATIONS, "--refine", min=0, help="Cap on Levenberg–Marquardt iterations (each stops earlier once converged): the local search's full-data stage (0: 4) and after CMA-ES (--method cma, or a local fit's fallback; 0: none)."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Seeded searches (seeds S, S+1, ...); the best is the fit, the spread is flagged."),
    loop_noise_draws: int = typer.Option(16, "--loop-noise-draws", min=0, help="--method local: replays of the optimum with seeded measurement noise in the controller's loop, as a real arm's acts on its noisy encoders; the spread they cause is added to the error bars (docs/fitting.md, \"Error bars when the controller acts on noisy measurements\"). Cost: N + 1 replays of the training data, about half an LM iteration at 16. 0: off."),
    profile_check: bool = typer.Option(True, "--profile-check/--no-profile-check", help="--method local: check each 95 % interval against the loss at two and four times its half-width and, where the loss rises by less than a third of what the interval assumes (stick-slip friction on small motions), widen it to where the loss, with the parameter's joint re-fitted, reaches the interval's level (docs/fitting.md, \"Intervals checked against the loss\"). Cost: 4k + 1 replays (k free parameters: 113 for the default 28), and a few hundred on a joint whose intervals are widened."),
    workers: int = typer.Option(2, "--workers", min=0, help="Ray actors (0: evaluate in-process, no Ray)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join this Ray cluster (default: start a local one)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue the unfinished fit FIT from its last checkpoint (its settings are reused; --train etc. are ignored)."),
    fit_id: Optional[str] = typer.Option(None, "--id", help="Fit id (default fit-<utc time>-<settings hash>)."),
    model: Optional[Path] = typer.Option(None, "--model", help="MJCF of the arm (default: the bundled FR3)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    as_of: Optional[int] = typer.Option(None, "--as-of", min=1, help="Read the lake as it was at this version (a fit's 'lake version read'), to re-run that fit; needs an s3:// lake (a local one keeps only current files)."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """Fit the 29 FrankaTwin parameters (and any group --params frees) on clean intervals with
    the local-first search (or --method cma) on Ray; store the error bars at the optimum; publish fits/fit=<id>/."""
    from .lake_session import lake_root
    from ..fit import LossScales
    from ..fit import FitSettings, run_fit
    from ..fit import parse_space
    from ..option_lists import split_values

    from .cluster import check_address

    check_address(address)
    try:
        if resume and as_of is None:
            as_of = _resumed_version(lake, resume)
        root = lake_root(lake, as_of)
    except ValueError as exc:
        fail(error_text(exc))
    if method == "torque" and not resume:
        return _torque_run(root, train, holdout, params, friction_law, configured_load, torque, cutoff_hz,
                           start_from, model, fit_id, as_json)
    try:
        if resume:
            rec = run_fit(root, fit_id=resume, resume=True, workers=workers, address=address,
                          progress=sys.stderr.isatty() or not as_json)
        else:
            if not split_values(train):
                fail("give at least one --train [ROBOT/]RUN[:INTERVAL]")
            LossScales(q_scale, dq_scale)
            from ..sim.arm_model.load import parse_load

            load = None if configured_load is None else parse_load(configured_load).to_json()
            settings = FitSettings(
                train=split_values(train), holdout=split_values(holdout),
                space=parse_space(params, friction_law=friction_law).to_json(), configured_load=load,
                population=population, generations=generations, seed=seed, sigma0=sigma0,
                weights=_weights(weights), q_scale_rad=q_scale, dq_scale_rad_s=dq_scale,
                max_duration_s=max_seconds, min_duration_s=min_seconds,
                model_path=str(model.absolute()) if model else None, refine_iterations=refine_iterations,
                seeds=seeds, method=method, explore_s=explore_seconds, loop_noise_draws=loop_noise_draws,
                profile_check=profile_check,
            )
            if start_from:
                _start_from(root, settings, start_from)
            rec = run_fit(root, settings, fit_id=fit_id, workers=workers, address=address,
                          progress=sys.stderr.isatty() or not as_json)
    except ValueError as exc:
        fail(error_text(exc))
    _print_fit(root, rec, as_json)


def _resumed_version(lake, fit_id: str) -> int | None:
    """On a bucket lake, the version the stopped fit `fit_id` started from (its work directory,
    in this host's scratch, keeps it): the resumed fit reads that lake, not a newer one."""
    from ..catalog import check_id, lake_location, open_lake

    if lake_location(lake).is_local:
        return None
    # the fit's documented work directory, `<lake>/_staging/fitwork-<FIT>/` (fit/run.py work_dir)
    path = open_lake(lake).staging_dir / f"fitwork-{check_id('fit', fit_id)}" / "lake_version"
    return int(path.read_text()) if path.is_file() else None


def _print_fit(root, rec, as_json: bool) -> None:
    """A new fit's verdict (decided now and appended to the lake's verdicts), then its
    summary: JSON with --json, else what `fit show` prints."""
    from ..fit import current_verdict, record_with_other_route

    record_with_other_route(root, rec, "fit run")
    verdict = current_verdict(root, rec, [])
    if as_json:
        typer.echo(json.dumps(summary(rec, [], verdict), indent=2))
    else:
        show_record(rec, [], verdict)


def _start_from(root, settings, fit: str) -> None:
    """Start the local search at fit `fit`'s parameters (one start)."""
    from ..fit import load_fit
    from ..fit import recorded_configurations, start_vector

    if settings.method != "local":
        raise ValueError("--start-from: starts the local search (--method local)")
    start = start_vector(load_fit(root, fit), recorded_configurations(root, list(settings.train)), settings.model_path)
    settings.start_from, settings.start_params, settings.starts = fit, start.tolist(), 1


def _torque_run(root, train, holdout, params, friction_law, configured_load, torque, cutoff_hz, start_from,
                model, fit_id, as_json) -> None:
    """`fit run --method torque` (fit/torque/route.py)."""
    from ..fit import load_fit
    from ..fit import TorqueFitSettings, fit_torque
    from ..option_lists import split_values
    from ..sim.arm_model.load import parse_load

    try:
        if not split_values(train):
            fail("give at least one --train [ROBOT/]RUN[:INTERVAL]")
        specs = [p for item in params for p in item.replace(",", " ").split()]
        settings = TorqueFitSettings(
            train=split_values(train), holdout=split_values(holdout), torque=torque,
            friction_law=friction_law or "stribeck", params=specs, cutoff_hz=cutoff_hz,
            configured_load=None if configured_load is None else parse_load(configured_load).to_json(),
            model_path=str(model.absolute()) if model else None, start_from=start_from)
        start = load_fit(root, start_from).params if start_from else None
        rec = fit_torque(root, settings, fit_id=fit_id, start=start)
    except ValueError as exc:
        fail(error_text(exc))
    _print_fit(root, rec, as_json)


def summary(rec, validations=None, verdict=None) -> dict:
    """JSON-able summary of a FitRecord, its verdict first (fit/reports/show.py)."""
    from ..fit import fit_summary

    return fit_summary(rec, validations, verdict)


def _console():
    from ..fit import console

    return console()


def show_record(rec, validations=None, verdict=None) -> None:
    """Print a fit as rich tables, its verdict first (fit/reports/show.py)."""
    from ..fit import print_fit

    print_fit(rec, validations, verdict)


@fit_app.command("list")
@bucket_sessions
def list_cmd(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."), lake: Optional[Path] = OBJECT_LAKE) -> None:
    """List the fits in the lake (view `fits`) with each one's verdict and its reasons (view
    `fit_verdicts`; a fit from before verdicts existed: decided now, not stored)."""
    from rich.markup import escape
    from rich.table import Table

    from ..catalog import connect
    from .lake_session import lake_root
    from ..fit import load_fit
    from ..fit import verdict_json
    from ..fit import current_verdict, stored_verdicts

    root = lake_root(lake)
    con = connect(root)
    cols = [r[0] for r in con.execute("DESCRIBE fits").fetchall()]
    want = [c for c in ("fit", "fit_source", "created_utc", "status", "best_loss", "generations",
                        "refine_iterations", "holdout_loss", "motor_delay_ms") if c in cols]
    rows = con.execute(f"SELECT {', '.join(want)} FROM fits ORDER BY created_utc, fit").fetchall()
    stored = stored_verdicts(root)
    verdicts = [stored.get(r[0]) or current_verdict(root, load_fit(root, r[0])) for r in rows]
    if as_json:
        typer.echo(json.dumps([{**dict(zip(want, r)), "verdict": verdict_json(v)} for r, v in zip(rows, verdicts)],
                              indent=2, default=str))
        return
    table = Table(title=f"{len(rows)} fit(s)")
    for c in (*want[:1], "verdict", *want[1:]):
        table.add_column(c)
    for r, v in zip(rows, verdicts):
        cells = ["" if x is None else f"{x:.6g}" if isinstance(x, float) else str(x) for x in r]
        table.add_row(*(escape(c) for c in (cells[0], v.verdict.level.value, *cells[1:])))
    _console().print(table)
    for r, v in zip(rows, verdicts):  # the reasons, one line per fit, as `fit show` and `fit report` give them
        typer.echo(f"{r[0]}: {v.verdict.line()}")


@fit_app.command("show")
@bucket_sessions
def show_cmd(fit: str = typer.Argument(..., help="Fit id (see `twinlake fit list`)."),
             as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
             lake: Optional[Path] = OBJECT_LAKE) -> None:
    """Show a fit: parameters, intervals and losses, 95 % intervals and flags, condition number,
    weak directions, the spread over seeds, the held-out runs it passed and, for training runs
    made by `twinlake excite --design`, the predicted beside the realised half-widths."""
    from .lake_session import lake_root
    from ..fit import load_fit
    from ..fit import design_lines, fit_design_checks
    from ..fit import fit_validations
    from ..fit import current_verdict

    root = lake_root(lake)
    try:
        rec = load_fit(root, fit)
    except ValueError as exc:
        fail(error_text(exc))
    validations = fit_validations(root, fit)
    designs = fit_design_checks(root, rec)
    verdict = current_verdict(root, rec, validations)
    if as_json:
        typer.echo(json.dumps(summary(rec, validations, verdict) | {"settings": rec.settings,
                                                                    "designs": [d.to_json() for d in designs]},
                              indent=2, default=str))
    else:
        show_record(rec, validations, verdict)
        for check in designs:
            for line in design_lines(check):
                typer.echo(line)


@fit_app.command("export")
@bucket_sessions
def export_cmd(fit: str = typer.Argument(..., help="Fit id."),
               fmt: str = typer.Option("profile", "--format", help="profile | frankatwin | mjcf | model | randomization"),
               out: Optional[Path] = typer.Option(None, "--out", help="Output file (default: a name in the current directory)."),
               force: bool = typer.Option(False, "--force", help="Export a fit whose verdict is 'not trusted' anyway (the file still carries the verdict)."),
               lake: Optional[Path] = OBJECT_LAKE) -> None:
    """Export a fit as a profile JSON, FrankaTwin sysid_best_params.json, MJCF joint attributes, a whole MJCF model or a randomisation JSON.
    Every file carries the fit's verdict and each parameter's status; a 'not trusted' fit is refused (exit 2) unless --force."""
    from .lake_session import lake_root
    from ..fit import FORMATS, default_name, export_fit, export_notes
    from ..fit import load_fit
    from ..fit import current_verdict
    from ..fit import Level

    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        root = lake_root(lake)
        rec = load_fit(root, fit)
        verdict = current_verdict(root, rec)
        if verdict.verdict.level is Level.NOT_TRUSTED and not force:
            fail(f"fit {fit} is not trusted: {'; '.join(verdict.verdict.reasons)}. Not exported; "
                 "`--force` exports it anyway (the file says it is not trusted)")
        path = export_fit(rec, fmt, out or Path(default_name(rec, fmt)), verdict)
    except ValueError as exc:
        fail(error_text(exc))
    if verdict.verdict.level is not Level.TRUSTED:
        typer.echo(f"note: the fit's verdict is '{verdict.verdict.level.value}': "
                   f"{'; '.join(verdict.verdict.reasons)}", err=True)
    for note in export_notes(rec, fmt):  # what the format cannot hold, said plainly
        typer.echo(f"note: {note}", err=True)
    typer.echo(str(path))


@fit_app.command("compare")
@bucket_sessions
def compare_cmd(fit_a: str = typer.Argument(..., help="First fit id (e.g. a replay fit)."),
                fit_b: str = typer.Argument(..., help="Second fit id (e.g. a torque fit)."),
                threshold: float = typer.Option(3.0, "--threshold", help="Agree when |difference| is at most this many combined standard errors."),
                as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                lake: Optional[Path] = OBJECT_LAKE) -> None:
    """Compare two fits parameter by parameter (difference in combined standard errors, verdict,
    likely convention errors); exits 1 when they disagree."""
    from .lake_session import lake_root
    from ..fit import compare_fits, comparison_json
    from ..fit import load_fit

    from ..fit import record_verdict

    root = lake_root(lake)
    try:
        rec_a, rec_b = load_fit(root, fit_a), load_fit(root, fit_b)
        cmp = compare_fits(rec_a, rec_b, threshold)
        for rec in (rec_a, rec_b):  # a comparison arrived: each fit's verdict gets a new row
            record_verdict(root, rec, f"fit compare {fit_a} {fit_b}")
    except ValueError as exc:
        fail(error_text(exc))
    if as_json:
        typer.echo(comparison_json(cmp))
    else:
        _print_comparison(cmp)
    if cmp.verdict != "agree":
        raise typer.Exit(1)


def _print_comparison(cmp) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"{cmp.fit_a} (A) vs {cmp.fit_b} (B): {cmp.verdict} (threshold {cmp.threshold:g} "
                               "combined se)"))
    for col in ("parameter", "A", "B", "se A", "se B", "z", "verdict"):
        table.add_column(col)

    def num(x):
        return "" if x is None else f"{x:.4g}"
    for p in cmp.parameters:
        table.add_row(*(escape(c) for c in (p.name, num(p.a), num(p.b), num(p.se_a), num(p.se_b), num(p.z), p.verdict)))
    _console().print(table)
    if cmp.not_compared:
        rest = Table(title="not compared (not estimated in both fits)")
        for col in ("parameter", "A", "status in A", "B", "status in B"):
            rest.add_column(col)
        for p in cmp.not_compared:
            rest.add_row(*(escape(c) for c in (p.name, num(p.a), p.status_a, num(p.b), p.status_b)))
        _console().print(rest)
    for cause in cmp.causes:
        typer.echo(f"likely cause: {cause}")


fit_app.command("validate")(validation.validate_cmd)
fit_app.command("quick")(validation.quick_cmd)
fit_app.command("report")(validation.report_cmd)
