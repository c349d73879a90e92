"""Command-line commands owned by twinlake.catalog (registered on the root app)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Optional

import typer

catalog_app = typer.Typer(help="Browse the lake's catalog.", no_args_is_help=True)

LAKE_HELP = "Lake root (default $TWINLAKE_LAKE, else ./lake)."
RUN_COLUMNS = ("robot", "run", "source_format", "source_version", "frame_count", "seq_first",
               "seq_last", "gap_count", "dropped", "resets", "complete",
               "completion_confirmed", "verdict", "flags")


def register(app: typer.Typer) -> None:
    """Add this folder's commands to the root `twinlake` app (`sql`, `catalog ...`, `intervals`)."""
    from twinlake.catalog import intervals_cli

    app.command("sql")(sql_command)
    app.add_typer(catalog_app, name="catalog")
    intervals_cli.register(app)


def sql_command(
    query: Optional[str] = typer.Argument(None, help="SQL query over the lake's views."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read the query from a .sql file."),
    fmt: str = typer.Option("table", "--format", help="Output format: table, csv or json."),
    lake: Optional[Path] = typer.Option(None, "--lake", help=LAKE_HELP),
) -> None:
    """Run SQL over the lake (views: runs, frames, targets, intervals, fits, ...)."""
    if (query is None) == (file is None):
        _fail("give a QUERY or --file FILE (exactly one)")
    if fmt not in ("table", "csv", "json"):
        _fail(f"--format {fmt!r}: expected table, csv or json")
    if file is not None:
        try:
            query = file.read_text(encoding="utf-8")
        except OSError as exc:
            _fail(f"{file}: cannot read: {exc.strerror}")
    con = _connect(lake)
    try:
        rel = con.execute(query)
        columns = [d[0] for d in rel.description] if rel.description else []
        rows = rel.fetchall() if rel.description else []
    except Exception as exc:  # duckdb errors: one line, exit 1
        _fail(f"query failed: {str(exc).splitlines()[0]}", code=1)
    _emit(columns, rows, fmt)


@catalog_app.command("runs")
def runs_command(
    lake: Optional[Path] = typer.Option(None, "--lake", help=LAKE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array of run rows."),
) -> None:
    """List the runs in the lake (one line each: counts, gaps, completion, verdict)."""
    con = _connect(lake)
    if as_json:
        rel = con.execute("SELECT * EXCLUDE (metadata_json) FROM runs ORDER BY robot, run")
        _emit([d[0] for d in rel.description], rel.fetchall(), "json")
        return
    rel = con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY robot, run")
    _emit(list(RUN_COLUMNS), rel.fetchall(), "table")


def _connect(lake: Optional[Path]):
    from twinlake.catalog import connect, resolve_lake

    try:
        return connect(resolve_lake(lake))
    except Exception as exc:
        _fail(f"cannot open the catalog: {str(exc).splitlines()[0]}")


def _fail(message: str, code: int = 2) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def _jsonable(value):
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _emit(columns: list[str], rows: list[tuple], fmt: str) -> None:
    if fmt == "json":
        out = [{c: _jsonable(v) for c, v in zip(columns, row)} for row in rows]
        print(json.dumps(out, indent=None, allow_nan=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        _table(columns, rows)


def _table(columns: list[str], rows: list[tuple]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*("NULL" if v is None else repr(v) if isinstance(v, float) else str(v)
                        for v in row))
    Console(width=max(120, 12 * len(columns))).print(table)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
