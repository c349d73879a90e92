"""Clean gap-free intervals: the Python face of `sql/clean_intervals.sql`.

An interval is a maximal stretch of consecutive ticks (`seq` step 1) of one run recorded under
one controller configuration, with finite state and targets, valid joint targets and control
periods within tolerance. The rules live in SQL (table macro `clean_intervals`, view
`intervals`); this module only binds the parameters (never pasted into SQL text) and returns
an Arrow table. Rules and a worked example: docs/intervals.md.

One run's intervals under the default rules are also stored with the run
(`store_run_intervals`, called by `publish_partition`: the same one-run query over the
staged files) and served from there while valid (`stored_run_intervals`; the file format
is catalog/stored_intervals.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from .lake import Lake

OPTIONAL_SPLITS: tuple[str, ...] = (
    "reset",
    "gain_change",
    "target_invalid",
    "nonfinite",
    "period_outlier",
)
"""Rules a caller may switch off (`split_on`); all are on by default."""

ALWAYS_SPLITS: tuple[str, ...] = ("seq_gap", "recorded_gap", "mode_change", "time_gap",
                                  "clock_reversal", "time_repeat", "stale")
"""Rules that always split: nothing is ever bridged across lost ticks (by seq or by time), a
clock going backwards or standing still, a stale repeated row or a controller switch."""

REASONS: tuple[str, ...] = ("run_start", "run_end", "seq_gap", "recorded_gap", "mode_change",
                            *OPTIONAL_SPLITS, "time_gap", "clock_reversal", "stale", "time_repeat")
"""Every value `start_reason` / `end_reason` can take (in the SQL's code order)."""

INTERVAL_COLUMNS: tuple[str, ...] = (
    "robot", "run", "interval_index", "seq_first", "seq_last", "t_first_s", "t_last_s",
    "frame_count", "duration_s", "controller", "K_joint", "D_joint", "filter_alpha",
    "use_friction", "joint_reset_count", "start_reason", "end_reason", "ticks_lost_before",
    "ticks_lost_after", "period_s",
)
"""Columns of the result, in order (see sql/clean_intervals.sql for types and units)."""

_QUERY = """
SELECT * FROM clean_intervals(
    robot_filter := $robot, run_filter := $run, min_duration_s := $min_duration_s,
    period_s := $period_s, period_tol_s := $period_tol_s, split_on := $split_on)
"""


@dataclass(frozen=True)
class IntervalRules:
    """Parameters of the interval selection.

    min_duration_s: drop intervals with `t_last_s - t_first_s` below this [s] (>= 0).
    period_s, period_tol_s: nominal tick period and its tolerance [s]; None (the default):
        each run's own median tick period (`runs.tick_period_s`, else `1 / runs.rate_hz`;
        with neither, no time rule and 1 ms for `period_outlier`) and half of it. A tick whose `control_period_s` differs from the period by more than
        the tolerance starts a new interval (`period_outlier`; the first tick of a run is
        exempt, a null period is not checked); a step in `t_s` over 1.5 periods on
        consecutive seq is a `time_gap`.
    split_on: the optional rules that split (subset of `OPTIONAL_SPLITS`).
    """

    min_duration_s: float = 0.0
    period_s: float | None = None
    period_tol_s: float | None = None
    split_on: tuple[str, ...] = OPTIONAL_SPLITS

    def __post_init__(self) -> None:
        _check_number("min_duration_s", self.min_duration_s, minimum=0.0)
        if self.period_s is not None:
            _check_number("period_s", self.period_s, minimum=0.0, strict=True)
        if self.period_tol_s is not None:
            _check_number("period_tol_s", self.period_tol_s, minimum=0.0)
        object.__setattr__(self, "split_on", _check_splits(self.split_on))


def _check_number(name: str, value: float, *, minimum: float, strict: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum or (strict and value == minimum):
        relation = ">" if strict else ">="
        raise ValueError(f"{name}: expected a finite number {relation} {minimum}, got {value!r}")


def _check_splits(split_on: Iterable[str]) -> tuple[str, ...]:
    if isinstance(split_on, str):
        split_on = [split_on]
    out: list[str] = []
    for reason in split_on:
        if reason in ALWAYS_SPLITS:
            continue  # always applied; accepted so callers may list every rule they rely on
        if reason not in OPTIONAL_SPLITS:
            raise ValueError(
                f"split_on: unknown rule {reason!r}; expected any of {', '.join(OPTIONAL_SPLITS)}"
            )
        if reason not in out:
            out.append(reason)
    return tuple(r for r in OPTIONAL_SPLITS if r in out)


DEFAULT_RULES = IntervalRules()
"""The rules of the `intervals` view and of the stored intervals."""


@lru_cache(maxsize=1)
def _one_run_query() -> str:
    from .sql import load_sql

    return load_sql("clean_intervals_run")


def ensure_interval_sql(con) -> None:
    """Define the `clean_intervals` macro and `intervals` view on `con` (a connection from
    `twinlake.catalog.connect` already has them; this is for any other connection that has
    `frames` and `runs`)."""
    from .sql import load_sql

    con.execute(load_sql("clean_intervals"))


def run_query_params(robot: str | None, run: str | None, rules: IntervalRules) -> dict:
    """The bound parameters of `clean_intervals(...)` (the macro's named arguments) for
    `rules` and the robot / run filters."""
    return {
        "robot": robot,
        "run": run,
        "min_duration_s": float(rules.min_duration_s),
        "period_s": None if rules.period_s is None else float(rules.period_s),
        "period_tol_s": None if rules.period_tol_s is None else float(rules.period_tol_s),
        "split_on": list(rules.split_on),
    }


def clean_intervals(
    con,
    robot: str | None = None,
    run: str | None = None,
    min_duration_s: float = 0.0,
    period_s: float | None = None,
    period_tol_s: float | None = None,
    split_on: Iterable[str] | None = None,
) -> pa.Table:
    """The clean intervals of the lake behind `con` (a `twinlake.catalog.connect` connection),
    one row per interval with `INTERVAL_COLUMNS`, ordered by robot, run, seq_first.

    `robot` / `run` restrict the query before the window. With both given and the default
    rules (any `min_duration_s`), the run's stored intervals (`intervals.parquet`, written
    at publish by the same query; catalog/stored_intervals.py) are read when they are valid
    for the run's files as they are now. Otherwise only that run's files are read: straight
    (sql/clean_intervals_run.sql) when they hold every canonical column, else through views
    narrowed to them (`run_scope`), so the cost does not grow with the lake. Other
    arguments: see `IntervalRules`. Raises ValueError on a bad argument.
    """
    rules = IntervalRules(
        min_duration_s=min_duration_s,
        period_s=period_s,
        period_tol_s=period_tol_s,
        split_on=OPTIONAL_SPLITS if split_on is None else tuple(split_on),
    )
    for name, value in (("robot", robot), ("run", run)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name}: expected a string id or None, got {value!r}")
    stored = stored_run_intervals(con, robot, run, rules)
    if stored is not None:
        return stored
    return _query(con, robot, run, run_query_params(robot, run, rules))


def _query(con, robot: str | None, run: str | None, params: dict) -> pa.Table:
    """`clean_intervals` by query: one run's two files straight, else the scoped views."""
    import duckdb

    from .sql import exact_run_files, run_scope

    files = exact_run_files(con, robot, run)
    try:
        if files is not None:  # one run, canonical files: read them straight (no views to scope)
            frames_path, runs_path = files
            one_run = {**params, "frames_files": [frames_path], "runs_files": [runs_path]}
            return con.sql(_one_run_query(), params=one_run).to_arrow_table()
        with run_scope(con, robot, run):
            return con.sql(_QUERY, params=params).to_arrow_table()
    except duckdb.CatalogException as exc:
        if "clean_intervals" not in str(exc):
            raise
    ensure_interval_sql(con)  # a plain connection: define the macro, then ask again
    return con.sql(_QUERY, params=params).to_arrow_table()


RULES_VERSION = 2
"""The rules' version, part of `rules_version()`'s hash: raised whenever what a rule means
changes (2: late ticks of a tick-counting recorder are not time gaps; `time_repeat`; a row
stepping back is no lost time after it), so stored intervals of the older rules are never
served, even if the SQL's text were to hash alike."""


@lru_cache(maxsize=1)
def prepare_run_intervals():
    """Start importing DuckDB and hashing the rules' SQL (`rules_version`) on a thread, once
    per process, and return it: an ingest starts it as it reads its input, so its publish's
    `stage_run_intervals` finds them, and DuckDB's own first-connection set-up, done instead of
    paying ~0.1 s for them on one core while the other waits. Join it before the process ends (a daemon thread mid-import at exit)."""
    import threading

    def warm() -> None:
        try:
            import duckdb

            from . import sql  # noqa: F401
            rules_version()
            duckdb.connect(":memory:").close()  # a process's first connection sets DuckDB up
        except Exception:  # noqa: BLE001  the publish does it again and reports what fails
            pass

    thread = threading.Thread(target=warm, name="twinlake-intervals-warm", daemon=True)
    thread.start()
    return thread


@lru_cache(maxsize=1)
def rules_version() -> str:
    """SHA-256 (hex) of `RULES_VERSION`, sql/clean_intervals.sql, sql/clean_intervals_run.sql
    and the default parameters: stored intervals computed under other rules never match."""
    from .sql import load_sql

    digest = hashlib.sha256()
    for text in (f"rules {RULES_VERSION}", load_sql("clean_intervals"), _one_run_query(),
                 json.dumps(run_query_params(None, None, DEFAULT_RULES), sort_keys=True)):
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


def stored_run_intervals(con, robot: str | None, run: str | None,
                         rules: IntervalRules) -> pa.Table | None:
    """`clean_intervals(con, robot, run, ...)` from the run's stored intervals, when `rules`
    are the defaults but for `min_duration_s` (applied here as the macro applies it) and the
    stored file is valid for the run's files now; None when the caller must query."""
    if robot is None or run is None or replace(rules, min_duration_s=0.0) != DEFAULT_RULES:
        return None
    from .sql import run_files
    from .stored_intervals import read_stored_intervals

    files = run_files(con, robot, run)
    if files is not None:
        table = read_stored_intervals(os.path.dirname(files[0]), robot, run, rules_version())
    else:  # a lake on object storage: the run's committed intervals.parquet
        from .store_catalog import committed_intervals

        table = committed_intervals(con, robot, run, rules_version())
    if table is None or rules.min_duration_s == 0.0:
        return table
    return table.filter(_long_enough(table.column("duration_s"), rules.min_duration_s))


def _long_enough(duration_s: pa.ChunkedArray, min_duration_s: float) -> pa.ChunkedArray:
    """The macro's `coalesce(t_last_s - t_first_s, 0.0) >= min_duration_s` in Arrow: a null
    duration counts as 0, and NaN passes (DuckDB orders NaN above every number)."""
    import pyarrow.compute as pc  # imported here: only a minimum duration needs it

    filled = pc.fill_null(duration_s, 0.0)
    return pc.or_(pc.is_nan(filled), pc.greater_equal(filled, min_duration_s))


def stage_run_intervals(lake: Lake, staged: Path, robot: str, run: str) -> None:
    """A run's default-rule intervals computed from its staged files and written beside them
    (`intervals.store_run_intervals`), so they are published, or replaced, with the run: the
    ingest calls it as the last part of writing a run partition. The query spills to a
    directory of its own under `_staging/` (removed after it; an orphan of a killed process
    goes with `clean_staging`)."""
    from .publish import new_staging_dir

    spill = new_staging_dir(lake, "spill")
    try:
        store_run_intervals(staged, robot, run, spill_dir=spill)
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def store_run_intervals(directory: str | Path, robot: str, run: str,
                        spill_dir: str | Path | None = None) -> Path | None:
    """Compute the default-rule intervals of the run whose files are in `directory` (a staged
    partition) with sql/clean_intervals_run.sql and store them there (`intervals.parquet`,
    catalog/stored_intervals.py). The query holds at most `writer_memory_limit` in DuckDB and
    spills beyond it to `spill_dir` (an empty directory the caller removes; None: DuckDB's
    default, beside the process's working directory). Returns the stored file's path; None
    (nothing stored, any older file there removed) when a file is missing or lacks a canonical
    column, or the query fails (with a warning): readers then query."""
    from .stored_intervals import write_stored_intervals

    def compute(frames_path: str, runs_path: str) -> pa.Table | None:
        return _default_intervals(frames_path, runs_path, robot, run, spill_dir)

    return write_stored_intervals(directory, robot, run, rules_version(), compute)


WRITER_MEMORY_MB = (300, 200)
"""DuckDB's memory limit [MB] while computing a run's stored intervals at publish: for a run of up
to `UNSPILLED_FRAMES` frames, and for a longer one. The query's window sorts the whole run (~400
bytes a frame at its peak: ~1.4 GB for a one-hour 1 kHz run); with the limit it spills instead,
so an ingest's peak does not grow with the run (bench/RESULTS.md, "Ingest in bounded memory").
300 MB holds a 10-minute 1 kHz run without spilling (at 200 MB its spill cost ~80 ms of
~0.37 s); a longer run spills at either, and 200 MB keeps its ingest's peak lower (bench/RESULTS.md,
"Ingest: the allocators, overlap and start-up")."""
UNSPILLED_FRAMES = 700_000


def writer_memory_limit(frames: int) -> str:
    """DuckDB's `memory_limit` for the stored intervals of a run of `frames` frames."""
    return f"{WRITER_MEMORY_MB[0] if frames <= UNSPILLED_FRAMES else WRITER_MEMORY_MB[1]}MB"


def _default_intervals(frames_path: str, runs_path: str, robot: str, run: str,
                       spill_dir: str | Path | None) -> pa.Table | None:
    """The one-run query's rows for these two files under the default rules, on a private
    connection limited to `writer_memory_limit`; None for files lacking a canonical column or
    on an error."""
    import duckdb

    from .sql import _both_canonical

    if not _both_canonical((frames_path, runs_path)):
        return None
    params = {**run_query_params(robot, run, DEFAULT_RULES),
              "frames_files": [frames_path], "runs_files": [runs_path]}
    try:
        import pyarrow.parquet as pq

        con = _writer_connection(spill_dir, writer_memory_limit(pq.read_metadata(frames_path).num_rows))
        try:
            return con.sql(_one_run_query(), params=params).to_arrow_table()
        finally:
            con.close()
    except (duckdb.Error, OSError, pa.ArrowException) as exc:
        warnings.warn(f"{robot}/{run}: intervals not stored ({str(exc).splitlines()[0]}); "
                      "readers query them", stacklevel=3)
        return None


def _writer_connection(spill_dir: str | Path | None, memory_limit: str):
    """A private in-memory DuckDB connection with the `clean_intervals` macro, its memory
    limited to `memory_limit` and spilling to `spill_dir`; one per publish (~40 ms to
    make), so each spills where its own lake's staging is. The macro binds over empty
    canonical tables `frames` / `runs`, which the one-run query's CTEs shadow."""
    import duckdb

    from .schema import FRAME_SCHEMA, RUN_SCHEMA
    from .sql import empty_table_sql

    config = {"memory_limit": memory_limit}
    if spill_dir is not None:
        config["temp_directory"] = str(spill_dir)
    con = duckdb.connect(":memory:", config=config)
    con.execute("SET enable_progress_bar = false")  # a long spill must not draw on stderr
    con.execute(empty_table_sql("frames", FRAME_SCHEMA))
    con.execute(empty_table_sql("runs", RUN_SCHEMA))
    ensure_interval_sql(con)
    return con
