"""`twinlake sql`, `twinlake catalog runs|rebuild` and `twinlake intervals`: the lake's catalog and its
clean gap-free intervals (docs/lake.md, docs/intervals.md), over twinlake.catalog."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Optional

import pyarrow as pa
import typer

from ..catalog.intervals import OPTIONAL_SPLITS
from ..options import OBJECT_LAKE, fail

catalog_app = typer.Typer(help="Browse the lake's catalog.", no_args_is_help=True)

RUN_COLUMNS = ("robot", "run", "source_format", "source_version", "frame_count", "seq_first",
               "seq_last", "gap_count", "dropped", "resets", "complete",
               "completion_confirmed", "verdict", "flags")
TABLE_COLUMNS = ("robot", "run", "interval_index", "seq_first", "seq_last", "frame_count",
                 "duration_s", "controller", "start_reason", "end_reason")
CONTROLLER_NAMES = {0: "idle", 1: "cartesian", 2: "joint", 3: "admittance", 4: "hybrid"}


def sql_command(
    query: Optional[str] = typer.Argument(None, help="SQL query over the lake's views."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read the query from a .sql file."),
    fmt: str = typer.Option("table", "--format", help="Output format: table, csv or json."),
    read: list[Path] = typer.Option(
        [], "--read", metavar="PATH",
        help="A file or directory outside the lake the query may read too (repeatable); "
             "nothing else outside the lake is readable."),
    lake: Optional[Path] = OBJECT_LAKE,
    as_of: Optional[int] = typer.Option(
        None, "--as-of", min=1, metavar="VERSION",
        help="Query the lake as it was at this version of its commit log (what a fit read: `fit show`)."),
) -> None:
    """Run SQL over the lake (views: runs, frames, targets, intervals, fits, ...)."""
    if (query is None) == (file is None):
        fail("give a QUERY or --file FILE (exactly one)")
    if fmt not in ("table", "csv", "json"):
        fail(f"--format {fmt!r}: expected table, csv or json")
    if file is not None:
        try:
            query = file.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"{file}: cannot read: {exc.strerror}")
    con = _connect(lake, read, as_of)
    try:
        rel = con.execute(query)
        columns = [d[0] for d in rel.description] if rel.description else []
        rows = rel.fetchall() if rel.description else []
    except Exception as exc:  # duckdb errors: one line, exit 1
        fail(f"query failed: {str(exc).splitlines()[0]}", code=1)
    _emit(columns, rows, fmt)


@catalog_app.command("runs")
def runs_command(
    lake: Optional[Path] = OBJECT_LAKE,
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


@catalog_app.command("rebuild")
def rebuild_command(lake: Optional[Path] = OBJECT_LAKE) -> None:
    """Rebuild the lake's file index (_catalog/files.json) from the Parquet files alone."""
    from ..catalog import lake_location
    from ..catalog.file_index import index_path, rebuild_index

    location = lake_location(lake)
    if not location.is_local:  # nothing of the kind is stored in a bucket
        fail(f"lake {location.uri}: a lake on object storage keeps no file index to rebuild: each reader "
             "builds it from the commit log (docs/lake.md, \"Object storage\")")
    root = location.path
    if not root.is_dir():
        fail(f"lake {root}: no such directory (give --lake DIR or set $TWINLAKE_LAKE)")
    try:
        index = rebuild_index(root)
    except (OSError, ValueError) as exc:
        fail(f"lake {root}: cannot rebuild the file index: {str(exc).splitlines()[0]}", code=1)
    files = sum(len(e.files) for e in index.partitions.values())
    print(f"{index_path(root)}: {len(index.partitions)} partitions, {files} files, "
          f"{len(index.schemas)} schemas")


def _connect(lake: Optional[Path], readable: tuple[Path, ...] | list[Path] = (), as_of: Optional[int] = None):
    from ..catalog import connect, open_lake

    try:
        return connect(open_lake(lake), readable=readable, as_of=as_of)
    except Exception as exc:
        fail(f"cannot open the catalog: {str(exc).splitlines()[0]}")


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
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_lines=False)
    for c in columns:
        table.add_column(escape(c), overflow="fold")  # a value or name like "[mrad]" is text, not markup
    for row in rows:
        table.add_row(*(escape("NULL" if v is None else repr(v) if isinstance(v, float) else str(v))
                        for v in row))
    Console(width=max(120, 12 * len(columns))).print(table)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def intervals_command(
    run: Optional[str] = typer.Option(None, "--run", help="Only this run (reads only its files)."),
    robot: Optional[str] = typer.Option(None, "--robot", help="Only this robot."),
    min_duration_s: float = typer.Option(0.0, "--min-duration-s", help="Hide intervals shorter than this many seconds."),
    period_s: Optional[float] = typer.Option(
        None, "--period-s", help="Nominal tick period, seconds (default: each run's own median tick period)."),
    period_tol_s: Optional[float] = typer.Option(
        None, "--period-tol-s", help="Allowed |period - nominal|, seconds (default: half the period)."),
    no_split: list[str] = typer.Option(
        [], "--no-split", help=f"Switch optional rules off (one or more): {', '.join(OPTIONAL_SPLITS)}."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array of interval rows."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """List clean gap-free intervals: consecutive ticks under one controller configuration,
    with why each starts and ends (the `intervals` view; join it to `frames` in SQL)."""
    from ..catalog import connect, lake_location, open_lake
    from ..catalog.intervals import clean_intervals
    from ..option_lists import split_values

    no_split = split_values(no_split)
    for name in no_split:
        if name not in OPTIONAL_SPLITS:
            fail(f"--no-split {name!r}: expected one of {', '.join(OPTIONAL_SPLITS)}")
    try:
        location = lake_location(lake)
    except ValueError as exc:  # another URI scheme, named
        fail(str(exc).splitlines()[0])
    if location.is_local and not location.path.is_dir():
        fail(f"lake {location.path}: no such directory (give --lake DIR or set $TWINLAKE_LAKE)")
    root = location.path if location.is_local else location.uri
    splits = [r for r in OPTIONAL_SPLITS if r not in no_split]
    try:
        with _status("selecting clean intervals", enabled=not as_json):
            # a bucket lake is read as `twinlake sql` reads it (Arrow datasets, the read lock)
            con = connect(open_lake(location))
            _check_known(con, robot, run, root)
            table = clean_intervals(con, robot=robot, run=run, min_duration_s=min_duration_s,
                                    period_s=period_s, period_tol_s=period_tol_s, split_on=splits)
            skipped = _ineligible_runs(con, robot, run)
            why = None
            if table.num_rows == 0:  # say why: the same selection without the minimum duration
                every = table if min_duration_s == 0 else clean_intervals(
                    con, robot=robot, run=run, period_s=period_s, period_tol_s=period_tol_s, split_on=splits)
                why = why_none(every, min_duration_s, skipped)
    except typer.Exit:
        raise
    except ValueError as exc:  # a bad option value: name the option, not the parameter
        fail(_as_option(str(exc).splitlines()[0]))
    except Exception as exc:  # duckdb / file errors: one line
        fail(f"lake {root}: {str(exc).splitlines()[0]}", code=1)
    if as_json:
        print(json.dumps(_json_rows(table), allow_nan=False))
        if why:
            print(why, file=sys.stderr)
    else:
        _print_table(table, min_duration_s, skipped)
        if why:
            print(why)


def _as_option(message: str) -> str:
    """`period_s: expected ...` as `--period-s: expected ...` (the option the user typed)."""
    for name in ("min_duration_s", "period_tol_s", "period_s"):
        if message.startswith(f"{name}:"):
            return f"--{name.replace('_', '-')}:" + message[len(name) + 1:]
    return message


def why_none(every: pa.Table, min_duration_s: float, skipped: int) -> str:
    """Why `twinlake intervals` lists none: from `every` (the same selection without the
    minimum duration) the intervals that were too short, the longest, and the rule that split
    most (the `end_reason` counted over every interval but the runs' ends), with its count."""
    if every.num_rows == 0:
        if skipped:
            return (f"no interval: the {skipped} run{'s' if skipped != 1 else ''} selected "
                    f"{'are' if skipped != 1 else 'is'} fit_eligible = false (diagnostics, no 1 kHz ticks to fit)")
        return "no interval: no run with clean ticks matches (see `twinlake catalog runs`)"
    durations = [d or 0.0 for d in every.column("duration_s").to_pylist()]
    reasons = [r for r in every.column("end_reason").to_pylist() if r != "run_end"]
    counts = {r: reasons.count(r) for r in dict.fromkeys(reasons)}
    text = (f"no interval of at least {min_duration_s:g} s: {every.num_rows} shorter "
            f"one{'s' if every.num_rows != 1 else ''}, the longest {max(durations):.3f} s")
    if counts:
        top = max(counts, key=counts.get)
        text += f"; the rule that split most: {top} ({counts[top]} of {len(reasons)} splits)"
        if top in _WHAT_SPLIT:
            text += f": {_WHAT_SPLIT[top]}"
    else:
        text += "; no rule split them: the runs are that short"
    return text + " (docs/intervals.md)"


_WHAT_SPLIT = {
    "period_outlier": ("ticks whose control period is off; `--no-split period_outlier` joins them where seq is "
                       "continuous (no frame lost)"),
    "seq_gap": "frames lost from the recording (seq jumps); nothing bridges them",
    "time_gap": "time lost between consecutive rows of a source whose seq is not its own tick count",
    "stale": "repeated rows of a PC-side logger",
    "time_repeat": "rows with the same time as the row before (a clock that did not advance)",
    "clock_reversal": "rows whose time steps back",
}


def _check_known(con, robot: Optional[str], run: Optional[str], root: Path) -> None:
    """Fail with a clear line when --robot / --run names nothing in the lake."""
    if robot is None and run is None:
        return
    n = con.execute(
        "SELECT count(*) FROM runs WHERE ($robot IS NULL OR robot = $robot) AND ($run IS NULL OR run = $run)",
        {"robot": robot, "run": run},
    ).fetchall()[0][0]
    if n == 0:
        what = " and ".join(f"{k} {v!r}" for k, v in (("robot", robot), ("run", run)) if v is not None)
        fail(f"lake {root}: no run with {what} (see `twinlake catalog runs`)", code=1)


def _ineligible_runs(con, robot: Optional[str], run: Optional[str]) -> int:
    """Runs matching the filters whose run.parquet says `fit_eligible = false`."""
    return con.execute(
        "SELECT count(*) FROM (FROM runs UNION ALL BY NAME SELECT NULL::VARCHAR AS robot, "
        "NULL::VARCHAR AS run, NULL::BOOLEAN AS fit_eligible WHERE false) "
        "WHERE fit_eligible = false AND ($robot IS NULL OR robot = $robot) "
        "AND ($run IS NULL OR run = $run)",
        {"robot": robot, "run": run},
    ).fetchall()[0][0]


def _json_rows(table: pa.Table) -> list[dict]:
    rows = table.to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def _print_table(table: pa.Table, min_duration_s: float, skipped: int) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = Table(show_lines=False)
    for c in TABLE_COLUMNS:
        out.add_column(c, justify="right" if c not in ("robot", "run", "start_reason", "end_reason") else "left")
    for row in table.select(list(TABLE_COLUMNS)).to_pylist():
        cells = [escape(_cell(c, row[c])) for c in TABLE_COLUMNS]
        out.add_row(*cells)
    console = Console(width=140)
    console.print(out)
    total = sum(table.column("duration_s").to_pylist()) if table.num_rows else 0.0
    runs = len(set(zip(table.column("robot").to_pylist(), table.column("run").to_pylist())))
    hidden = f", shorter than {min_duration_s:g} s hidden" if min_duration_s > 0 else ""
    if skipped:
        hidden += f"; {skipped} run{'s' if skipped != 1 else ''} with fit_eligible = false skipped"
    print(f"({table.num_rows} interval{'s' if table.num_rows != 1 else ''} in {runs} run"
          f"{'s' if runs != 1 else ''}, {total:.3f} s in total{hidden})")


def _cell(column: str, value) -> str:
    if value is None:
        return "NULL"
    if column == "duration_s":
        return f"{value:.3f}"
    if column == "controller":
        return f"{value} {CONTROLLER_NAMES.get(value, '')}".strip()
    return str(value)


class _status:
    """A rich spinner on stderr while the query runs (off for --json or a non-terminal)."""

    def __init__(self, message: str, enabled: bool) -> None:
        self._message, self._enabled, self._ctx = message, enabled and sys.stderr.isatty(), None

    def __enter__(self):
        if self._enabled:
            from rich.console import Console

            self._ctx = Console(stderr=True).status(self._message)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
