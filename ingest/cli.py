"""Command-line commands owned by twinlake.ingest (registered on the root app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add `twinlake ingest`, `export bundle`, `validate bundle` to the root app."""
    from twinlake.ingest import formats_cli

    app.command("ingest")(ingest_command)
    formats_cli.register(app)


def ingest_command(
    paths: list[Path] = typer.Argument(..., help="Recording files or directories to ingest."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Lake root (default $TWINLAKE_LAKE, else ./lake)."),
    robot: Optional[str] = typer.Option(None, "--robot", help="Robot id (default: robot_id of the companion metadata)."),
    run: Optional[str] = typer.Option(None, "--run", help="Run id (default: recording id, else file stem); one input only."),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing run whose bytes differ."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="Keep the complete rows of a truncated file (complete=false)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per input."),
    raw_codec: str = typer.Option("zstd", "--raw-codec", help="Compression of the kept original files: zstd, lz4 or none."),
) -> None:
    """Ingest fr3_stack 1 kHz recording CSVs (v2, legacy v1) and other known formats into the lake.

    Exit status: 0 all published / already ingested; 1 some input rejected (quarantined:
    broken, or a FrankaTwin sidecar whose 1 kHz log was not saved) or a directory in which
    nothing was recognised; 2 usage error (robot not named, run exists with different
    bytes, missing path).
    """
    from rich.console import Console

    from twinlake.catalog import Lake, resolve_lake
    from twinlake.ingest.pipeline import ingest_paths
    from twinlake.ingest.registry import ReadOptions

    err = Console(stderr=True)
    if run is not None and (len(paths) > 1 or any(p.is_dir() for p in paths)):
        err.print("error: --run names one run; give exactly one file with it")
        raise typer.Exit(2)
    if raw_codec not in ("zstd", "lz4", "none"):
        err.print(f"error: --raw-codec {raw_codec!r}: expected zstd, lz4 or none")
        raise typer.Exit(2)
    the_lake = Lake(resolve_lake(lake))
    options = ReadOptions(robot=robot, run=run, allow_partial=allow_partial)
    worst = 0
    with err.status("ingesting...", spinner="dots") as status:
        for outcome in ingest_paths(the_lake, list(paths), options, replace=replace,
                                    raw_codec=raw_codec):
            status.update(f"ingested {Path(outcome.path).name}")
            worst = max(worst, outcome.exit_code)
            _report(outcome, as_json, err)
    raise typer.Exit(worst)


def _report(outcome, as_json: bool, err) -> None:
    if outcome.status == "skipped":  # a note, not an ingest result: stderr in both modes
        err.print(f"note: {outcome.message}", markup=False, highlight=False, soft_wrap=True)
    elif as_json:
        print(json.dumps(outcome.as_dict(), sort_keys=True), flush=True)
    elif outcome.exit_code == 0:
        print(outcome.message, flush=True)
    else:
        err.print(f"error: {outcome.message}", markup=False, highlight=False, soft_wrap=True)
