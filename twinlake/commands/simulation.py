"""`twinlake sim replay` (a lake run through the simulation, twinlake/replay.py) and
`twinlake sim record` (the offline recorder: the daemon's plant, controller and CSV writer in
simulated time).

`sim_app` is the `twinlake sim` group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..options import OBJECT_LAKE, TRUE_FRICTION_LAW, TRUE_PAYLOAD, fail
from .lake_session import bucket_sessions

sim_app = typer.Typer(help="Simulate the FR3: replay recorded runs.", no_args_is_help=True)


@sim_app.command("replay")
@bucket_sessions
def replay_command(
    run: str = typer.Argument(..., help="Run id, or ROBOT/RUN when several robots have it."),
    out: Path = typer.Option(..., "--out", help="Output directory for the sim CSV and its sidecar."),
    interval: Optional[int] = typer.Option(None, "--interval", help="Clean-interval index (default: the longest)."),
    params: Optional[Path] = typer.Option(None, "--params", help="Profile JSON or FrankaTwin sysid_best_params.json (default: nominal)."),
    lake: Optional[Path] = OBJECT_LAKE,
    model: Optional[Path] = typer.Option(None, "--model", help="Own FR3 MJCF (joints matched by name *joint1..7)."),
    joint_map: Optional[str] = typer.Option(None, "--joint-map", help="With --model: '1=name1,2=name2,...,7=name7'."),
    no_ema: bool = typer.Option(False, "--no-ema", help="Drive with post-EMA targets, EMA bypassed."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay one clean interval of RUN and write FrankaTwin's sim-CSV layout + sidecar."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ..replay import run_replay
    from .lake_session import lake_root

    err = Console(stderr=True)
    try:
        parse_joint_map(joint_map)
        with Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed}/{task.total} ticks"),
                      TimeRemainingColumn(), console=err, transient=True, disable=as_json) as bar:
            task = bar.add_task("replay", total=None)
            summary = run_replay(lake_root(lake), run, out, interval=interval, params_path=params,
                                 model_path=model, joint_map=parse_joint_map(joint_map), use_ema=not no_ema,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    rmse = summary["q_rmse_vs_recording_rad"]
    typer.echo(f"{summary['robot']}/{summary['run']} interval {summary['interval_index']}: "
               f"{summary['samples']} samples, {summary['ticks']} ticks")
    if rmse:
        typer.echo("q RMSE vs recording [mrad]: " + " ".join(f"{1e3 * v:.2f}" for v in rmse))
    typer.echo(f"wrote {summary['csv']}\nwrote {summary['sidecar']}")


def parse_joint_map(text: str | None) -> dict[int, str] | None:
    """'1=a,2=b,...' → {1: 'a', ...}; ValueError naming the bad item."""
    if not text:
        return None
    mapping: dict[int, str] = {}
    for item in text.split(","):
        key, sep, name = item.strip().partition("=")
        if not sep or not key.strip().isdigit() or not 1 <= int(key) <= 7 or not name.strip():
            raise ValueError(f"--joint-map item {item.strip()!r}: expected J=NAME with J in 1..7")
        mapping[int(key)] = name.strip()
    return mapping


@sim_app.command("record")
def sim_record(
    reference: str = typer.Option(..., "--reference", help="reference.csv (t_s, q_ref1..7) from `twinlake excite`."),
    out: str = typer.Option(..., "--out", help="Output CSV v2 path (must not exist)."),
    truth: str | None = typer.Option(None, "--truth", help="True dynamics: profile JSON or sysid_best_params.json (default: bundled demo robot)."),
    seed: int = typer.Option(0, "--seed", help="Noise seed."),
    noise: str = typer.Option("q=2e-5,dq=5e-4,tau=0.05", "--noise", help="'none' or q=RAD,dq=RAD_S,tau=NM."),
    tail: float = typer.Option(1.0, "--tail", help="Seconds simulated after the last reference row."),
    robot_id: str | None = typer.Option(None, "--robot-id", help="Robot identity for the meta file (default: the reference's metadata.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    payload: str | None = TRUE_PAYLOAD,
    configured_load: str | None = typer.Option(None, "--configured-load", help="The firmware's configured load MASS[,X,Y,Z] (its gravity compensation; default: none); written to the metadata."),
    friction_law: str = TRUE_FRICTION_LAW,
    enforce_guards: bool = typer.Option(False, "--enforce-guards", help="End the recording where fr3_stack's client would have aborted the run (exit 1; the recording is kept)."),
    tracking_rule: str | None = typer.Option(None, "--tracking-rule", help="Enforced tracking rule: anchor (|q − anchor|, fr3_stack's code; default) | target (|q − last sent target|, its docs). Both are reported."),
    tracking_error: float | None = typer.Option(None, "--tracking-error", help="Tracking guard bound [rad] (default: the reference's metadata.json guard_settings, else 0.05)."),
    max_velocity: float | None = typer.Option(None, "--max-velocity", help="Speed guard bound [rad/s] (default: the plan's max_velocity in metadata.json, else 0.1)."),
    stale_after: float | None = typer.Option(None, "--stale-after", help="State age bound [s] (default: metadata.json, else 0.2)."),
) -> None:
    """Offline recorder: the daemon's plant, controller and CSV writer in simulated time. It
    checks fr3_stack's streaming guards before each reference row and says where its client
    would have aborted the run, and why."""
    from rich.progress import Progress

    from ..daemon.guards import GuardBounds, report_lines
    from ..daemon.noise import NoiseConfig
    from ..daemon.offline import reference_metadata, record_offline

    from ..sim.arm_model.load import NO_LOAD, parse_load

    try:
        loads = {"payload": None if payload is None else parse_load(payload, "--payload"),
                 "configured_load": NO_LOAD if configured_load is None else parse_load(configured_load)}
        guards = GuardBounds.from_metadata(reference_metadata(reference), tracking_rule=tracking_rule,
                                           tracking_error=tracking_error, max_velocity=max_velocity,
                                           stale_after=stale_after)
        with Progress(transient=True, disable=json_out) as progress:
            task = progress.add_task("simulating", total=1.0)
            result = record_offline(reference, out, truth_path=truth, seed=seed, noise=NoiseConfig.parse(noise),
                                    tail_s=tail, robot_id=robot_id, friction_law=friction_law, guards=guards,
                                    enforce_guards=enforce_guards,
                                    progress=lambda f: progress.update(task, completed=f), **loads)
    except (ValueError, OSError) as exc:
        typer.echo(f"twinlake sim record: {exc}", err=True)
        raise typer.Exit(1)
    summary = {"csv": str(result.csv_path), "rows": result.rows, "sim_seconds": result.sim_seconds,
               "wall_seconds": round(result.wall_seconds, 3), "speedup": round(result.speedup, 2),
               "status": result.status.to_dict(), "guards": result.guards}
    typer.echo(json.dumps(summary) if json_out else
               f"{result.rows} rows, {result.sim_seconds:g} s simulated in {result.wall_seconds:.2f} s "
               f"({result.speedup:.1f}x real time) -> {result.csv_path}\n" + "\n".join(report_lines(result.guards)))
    if enforce_guards and result.guards["would_abort"] is not None:
        raise typer.Exit(1)
