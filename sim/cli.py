"""Command-line commands owned by twinlake.sim (registered on the root app).

`sim_app` is the `twinlake sim` group; the daemon folder adds `sim record` to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

sim_app = typer.Typer(help="Simulate the FR3: replay recorded runs.", no_args_is_help=True)


@sim_app.command("replay")
def replay_command(
    run: str = typer.Argument(..., help="Run id, or ROBOT/RUN when several robots have it."),
    out: Path = typer.Option(..., "--out", help="Output directory for the sim CSV and its sidecar."),
    interval: Optional[int] = typer.Option(None, "--interval", help="Clean-interval index (default: the longest)."),
    params: Optional[Path] = typer.Option(None, "--params", help="Profile JSON or FrankaTwin sysid_best_params.json (default: nominal)."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Lake directory (default $TWINLAKE_LAKE or ./lake)."),
    model: Optional[Path] = typer.Option(None, "--model", help="Own FR3 MJCF (joints matched by name *joint1..7)."),
    joint_map: Optional[str] = typer.Option(None, "--joint-map", help="With --model: '1=name1,2=name2,...,7=name7'."),
    no_ema: bool = typer.Option(False, "--no-ema", help="Drive with post-EMA targets, EMA bypassed."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay one clean interval of RUN and write FrankaTwin's sim-CSV layout + sidecar."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from twinlake.catalog import resolve_lake

    from .replay_cli import run_replay

    err = Console(stderr=True)
    try:
        parse_joint_map(joint_map)
        with Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed}/{task.total} ticks"),
                      TimeRemainingColumn(), console=err, transient=True, disable=as_json) as bar:
            task = bar.add_task("replay", total=None)
            summary = run_replay(resolve_lake(lake), run, out, interval=interval, params_path=params,
                                 model_path=model, joint_map=parse_joint_map(joint_map), use_ema=not no_ema,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
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


def register(app: typer.Typer) -> None:
    """Add `twinlake sim ...` to the root app."""
    app.add_typer(sim_app, name="sim")
