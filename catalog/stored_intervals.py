"""Stored intervals: each run partition's clean intervals under the default rules, written
once at publish and read back instead of planning the rules' query for every request.

`publish_partition` of a run partition (`runs/robot=<robot>/run=<run>`) calls
`store_run_intervals` on the staged directory after the writer's files are there and before
the fsync and the rename, so `intervals.parquet` is published with the run, whole or not at
all, and a replaced run gets its own. It holds the rows of sql/clean_intervals_run.sql (the
query `clean_intervals` runs for one run, over the `clean_intervals` macro: one owner of the
rules) with the default rules (`DEFAULT_RULES`), and in its Parquet key-value metadata
(`STORE_KEY`) the key it is valid for:

    {"format": 1, "rules": "<sha256 of both SQL files and the default parameters>",
     "robot": ..., "run": ..., "frames.parquet": [size_bytes, mtime_ns],
     "run.parquet": [size_bytes, mtime_ns]}

`stored_run_intervals` serves it only while every part of the key holds now: same rules
(an edited macro or other defaults change the hash), same ids (a renamed partition), same
size and modification time of both files (a file rewritten in place). Anything else (no
file, an older lake, other rules, a stale or unreadable file) returns None and the caller
queries. Only runs whose two files hold every canonical column are stored (what ingest
writes); the data is deterministic, the key (modification times) is not.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .intervals import DEFAULT_RULES, IntervalRules, _one_run_query, run_query_params
from .lake import INTERVALS_FILE
STORE_FORMAT = 1
STORE_KEY = b"twinlake.intervals"
"""Parquet key-value metadata key of the validity key (JSON, see the module docstring)."""
_SOURCES = ("frames.parquet", "run.parquet")

_WRITER_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def rules_version() -> str:
    """SHA-256 (hex) of sql/clean_intervals.sql, sql/clean_intervals_run.sql and the default
    parameters: a stored file computed under other rules never matches."""
    from .sql import load_sql

    digest = hashlib.sha256()
    for text in (load_sql("clean_intervals"), _one_run_query(),
                 json.dumps(run_query_params(None, None, DEFAULT_RULES), sort_keys=True)):
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _key(directory: str, robot: str, run: str) -> dict | None:
    """The validity key of `directory`'s two files as they are now; None if one is missing."""
    key: dict = {"format": STORE_FORMAT, "rules": rules_version(), "robot": robot, "run": run}
    for name in _SOURCES:
        try:
            st = os.stat(os.path.join(directory, name))
        except OSError:
            return None
        key[name] = [st.st_size, st.st_mtime_ns]
    return key


def read_stored_intervals(directory: str | Path, robot: str, run: str) -> pa.Table | None:
    """The intervals stored in run partition `directory` of `robot`/`run`, when its
    intervals.parquet exists and its key matches the files as they are now; else None."""
    directory = str(directory)
    try:
        stored = pq.ParquetFile(os.path.join(directory, INTERVALS_FILE))
        raw = (stored.schema_arrow.metadata or {}).get(STORE_KEY)
        if raw is None or json.loads(raw) != _key(directory, robot, run):
            return None
        return stored.read().replace_schema_metadata(None)
    except (OSError, ValueError, pa.ArrowException):  # absent, unreadable or not JSON
        return None


def stored_run_intervals(con, robot: str | None, run: str | None,
                         rules: IntervalRules) -> pa.Table | None:
    """`clean_intervals(con, robot, run, ...)` from the run's stored intervals, when `rules`
    are the defaults but for `min_duration_s` (applied here as the macro applies it) and the
    stored file is valid (`read_stored_intervals`); None when the caller must query."""
    if robot is None or run is None or replace(rules, min_duration_s=0.0) != DEFAULT_RULES:
        return None
    from .sql import run_files

    files = run_files(con, robot, run)
    if files is None:
        return None
    table = read_stored_intervals(os.path.dirname(files[0]), robot, run)
    if table is None or rules.min_duration_s == 0.0:
        return table
    return table.filter(_long_enough(table.column("duration_s"), rules.min_duration_s))


def _long_enough(duration_s: pa.ChunkedArray, min_duration_s: float) -> pa.ChunkedArray:
    """The macro's `coalesce(t_last_s - t_first_s, 0.0) >= min_duration_s` in Arrow: a null
    duration counts as 0, and NaN passes (DuckDB orders NaN above every number)."""
    import pyarrow.compute as pc  # imported here: only a minimum duration needs it

    filled = pc.fill_null(duration_s, 0.0)
    return pc.or_(pc.is_nan(filled), pc.greater_equal(filled, min_duration_s))


def store_run_intervals(directory: str | Path, robot: str, run: str) -> Path | None:
    """Compute the default-rule intervals of the run whose files are in `directory` (a
    staged partition: `frames.parquet`, `run.parquet`) with sql/clean_intervals_run.sql and
    write them, with their key, to `directory/intervals.parquet`. Returns its path; None
    (nothing written, any older intervals.parquet there removed) when a file is missing or
    lacks a canonical column, or the query fails (with a warning): readers then query."""
    from .sql import _both_canonical

    directory = Path(directory)
    target = directory / INTERVALS_FILE
    target.unlink(missing_ok=True)
    files = tuple(str(directory / name) for name in _SOURCES)
    key = _key(str(directory), robot, run)
    if key is None or not _both_canonical(files):
        return None
    import duckdb

    params = {**run_query_params(robot, run, DEFAULT_RULES),
              "frames_files": [files[0]], "runs_files": [files[1]]}
    try:
        with _WRITER_LOCK:
            table = _writer_connection().sql(_one_run_query(), params=params).to_arrow_table()
    except duckdb.Error as exc:
        warnings.warn(f"{robot}/{run}: intervals not stored ({str(exc).splitlines()[0]}); "
                      "readers query them", stacklevel=2)
        return None
    metadata = {STORE_KEY: json.dumps(key, sort_keys=True).encode()}
    pq.write_table(table.replace_schema_metadata(metadata), target)
    return target


@lru_cache(maxsize=1)
def _writer_connection():
    """A private in-memory DuckDB connection with the `clean_intervals` macro, made on the
    first publish of the process and kept (a second publish does not define it again). The
    macro binds over empty canonical tables `frames` / `runs`, which the one-run query's CTEs
    shadow. Used under `_WRITER_LOCK`."""
    import duckdb

    from .intervals import ensure_interval_sql
    from .schema import FRAME_SCHEMA, RUN_SCHEMA
    from .sql import empty_table_sql

    con = duckdb.connect(":memory:")
    con.execute(empty_table_sql("frames", FRAME_SCHEMA))
    con.execute(empty_table_sql("runs", RUN_SCHEMA))
    ensure_interval_sql(con)
    return con


__all__ = ["INTERVALS_FILE", "STORE_KEY", "read_stored_intervals", "rules_version",
           "store_run_intervals", "stored_run_intervals"]
