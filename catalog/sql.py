"""The DuckDB catalog: an in-process connection with the views of `sql/*.sql` over a lake.

SQL files run in the order of `SQL_FILES` (missing files are skipped). Each file is a
sequence of blocks separated by marker comment lines:

    -- requires: runs/*/*/frames.parquet [more globs]   block runs only if every glob matches
    -- unless: runs/*/*/frames.parquet                  block runs only if the glob matches nothing
    -- always                                           block runs unconditionally

Text before the first marker runs unconditionally. Globs are relative to the lake root; a glob
over run partitions (`runs/*/*/<file>`) is answered from the lake's file index
(`catalog/file_index.py`), others by globbing the lake.

Before the files of `SQL_FILES`, `connect` creates the indexed views of `INDEXED_VIEWS`
(`indexed_runs`, `indexed_frames`, `indexed_targets`): the index's files of that name, one
`lake_files(...)` (sql/lake_files.sql) per schema group, unioned by name, the Hive columns
`robot`, `run` last. A view exists only when some file does; views.sql reads them.
The lake root reaches SQL only as the DuckDB variable `lake_root` (`getvariable('lake_root')`),
set with a bound parameter, never by string concatenation. Empty tables `empty_frames` and
`empty_runs` (canonical columns plus `robot`, `run`) exist for `-- unless` fallbacks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import duckdb
import pyarrow as pa

from .file_index import FileIndex, current_files
from .lake import Lake, check_id
from .read_only import ReadOnlyConnection, lock
from .schema import FRAME_SCHEMA, RUN_SCHEMA
from .sql_files import (  # re-exported: sql.py has always been their public home
    INDEXED_VIEWS,
    SQL_FILES,
    empty_table_sql,
    load_sql,
    new_catalog_connection,
    readable_paths,
    run_sql_files,
    sql_blocks,
)

__all__ = ["INDEXED_VIEWS", "SQL_FILES", "connect", "empty_table_sql", "exact_run_files", "load_sql",
           "run_files", "run_scope", "sql_blocks"]


def _create_indexed_views(con: duckdb.DuckDBPyConnection, root: Path,
                          index: FileIndex) -> list[tuple[str, list[str]]]:
    """One view per `INDEXED_VIEWS` entry with files: its schema groups, each read from the
    list variable `<view>_<i>` (absolute paths, bound parameters), unioned by name.

    Each variable holds only its group's first file for now (same schema as the whole
    group), so creating this view and the views of `SQL_FILES` over it binds one file per
    schema; returns the `(variable, full list)` pairs `connect` sets once they exist
    (DuckDB binds a view's text again at every query, so queries see the full lists)."""
    full: list[tuple[str, list[str]]] = []
    prefix = str(root) + os.sep
    for view, pattern in INDEXED_VIEWS:
        groups = index.schema_groups(pattern)
        if not groups:
            continue
        parts = []
        for i, group in enumerate(groups):
            var = f"{view}_{i}"
            con.execute(f"SET VARIABLE {var} = ?", [[prefix + group[0]]])
            full.append((var, [prefix + rel for rel in group]))
            parts.append(f"SELECT * FROM lake_files(getvariable('{var}'))")
        body = " UNION ALL BY NAME ".join(parts)
        if len(parts) > 1:  # keep the Hive columns last, as one read_parquet puts them
            body = f"SELECT * EXCLUDE (robot, run), robot, run FROM ({body})"
        con.execute(f"CREATE OR REPLACE VIEW {view} AS {body}")
    return full


def connect(lake: Lake | str | Path, *, read_only: bool = True, strict: bool = False,
            readable: Sequence[str | Path] = (),
            as_of: int | None = None) -> duckdb.DuckDBPyConnection | ReadOnlyConnection:
    """An in-process (in-memory) DuckDB connection with the lake's views.

    Views are bound to the files present when they are created: connect again to see
    tables that appeared later. `read_only` (the default): SQL through the connection can
    read but never write a file: the configuration is locked and file-writing statements
    (`COPY`, `EXPORT`, `ATTACH`, `INSTALL`/`LOAD`, ...) raise `ReadOnlyRefused`
    (`catalog/read_only.py`), and SQL reads only files under the lake and the files and
    directories of `readable` (DuckDB's `allowed_directories` / `allowed_paths` with
    `enable_external_access = false`), never installing or loading an extension;
    `read_only=False` gives the plain DuckDB connection. A failing
    block of `views.sql` raises; a failing block of a later file is skipped with a warning
    (its views are missing) unless `strict`, so one broken view never takes the whole
    catalog down. `as_of`: the runs as at that version of the lake's commit log
    (catalog/as_of.py). A `Lake` on object storage is read through its commit log
    (catalog/store_catalog.py).
    """
    if isinstance(lake, Lake) and lake.remote:  # object storage: views over the commit log
        from .store_catalog import connect_store

        return connect_store(lake, read_only=read_only, strict=strict, readable=readable, as_of=as_of)
    root = (lake.root if isinstance(lake, Lake) else Path(lake)).absolute()
    index = current_files(root)
    if as_of is not None:
        from .as_of import index_as_of

        index = index_as_of(Lake(root), index, as_of)
    con = new_catalog_connection(str(root))
    file_lists = _create_indexed_views(con, root, index)
    run_sql_files(con, root, index, strict)
    for var, files in file_lists:
        con.execute(f"SET VARIABLE {var} = ?", [files])
    if not read_only:
        return con
    directories, paths = readable_paths(root, readable)
    lock(con, directories, paths)
    return ReadOnlyConnection(con)


_DROP_SCOPE = ("DROP VIEW IF EXISTS temp.frames", "DROP VIEW IF EXISTS temp.runs")


@contextmanager
def run_scope(con, robot: str | None, run: str | None) -> Iterator[bool]:
    """Within the block, `frames` and `runs` of the catalog connection `con` read only the
    files of run `robot`/`run` (sql/run_scope.sql; sql/run_scope_exact.sql when both files
    hold every canonical column, so no union with the empty tables is bound), so a query
    naming one run binds and plans over its files alone, flat in the size of the lake. Yields True if narrowed; False (views
    untouched) when robot or run is None, not a valid id, the run has no frames.parquet
    or run.parquet now, or `con` has no `lake_root` (not a `connect` connection). The run's files are read
    as they are when the block runs, not as at `connect`."""
    files = run_files(con, robot, run)
    if files is None:
        yield False
        return
    frames_path, runs_path = files
    con.execute("SET VARIABLE run_scope_frames = ?", [[frames_path]])
    con.execute("SET VARIABLE run_scope_runs = ?", [[runs_path]])
    exact = _both_canonical(files)
    try:
        con.execute(_scope_sql(exact))
        yield True
    finally:
        for statement in _DROP_SCOPE:
            con.execute(statement)


def exact_run_files(con, robot: str | None, run: str | None) -> tuple[str, str] | None:
    """`(frames.parquet, run.parquet)` absolute paths of run `robot`/`run` when both exist now
    and hold every canonical column with its canonical type (read straight, they need no
    union with the empty canonical tables); None otherwise, under the same conditions as
    `run_scope` yielding False, or when either file lacks a canonical column."""
    files = run_files(con, robot, run)
    return files if files is not None and _both_canonical(files) else None


def _both_canonical(files: tuple[str, str]) -> bool:
    """True if (frames.parquet, run.parquet) both hold every canonical column with its type."""
    return _is_canonical(files[0], FRAME_SCHEMA) and _is_canonical(files[1], RUN_SCHEMA)


@lru_cache(maxsize=2)
def _scope_sql(exact: bool) -> str:
    return load_sql("run_scope_exact" if exact else "run_scope")


def _is_canonical(path: str, schema: pa.Schema) -> bool:
    """True if the Parquet file at `path` has every column of `schema` with its type (its
    footer only is read, once per file version: the answer is cached under the file's
    inode, size and mtime): its view then needs no union with the empty canonical table."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return _footer_is_canonical(path, st.st_ino, st.st_size, st.st_mtime_ns, schema)


@lru_cache(maxsize=4096)
def _footer_is_canonical(path: str, ino: int, size: int, mtime_ns: int, schema: pa.Schema) -> bool:
    import pyarrow.parquet as pq

    try:
        have = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return False
    return all(have.get_field_index(f.name) >= 0 and have.field(f.name).type == f.type for f in schema)


def run_files(con, robot: str | None, run: str | None) -> tuple[str, str] | None:
    """`(frames.parquet, run.parquet)` absolute paths of run `robot`/`run` of `con`'s lake when
    both exist now, else None (also when robot or run is None or not a valid id, or `con`
    has no `lake_root`)."""
    directory = _run_dir(con, robot, run)
    if directory is None:
        return None
    paths = (os.path.join(directory, "frames.parquet"), os.path.join(directory, "run.parquet"))
    return paths if all(os.path.isfile(p) for p in paths) else None


def _run_dir(con, robot: str | None, run: str | None) -> str | None:
    """The run's partition directory under `con`'s lake root; None if robot or run is None or
    not a valid id, or `con` has no `lake_root`."""
    if robot is None or run is None:
        return None
    try:
        check_id("robot", robot)
        check_id("run", run)
        ((root,),) = con.execute("SELECT getvariable('lake_root')").fetchall()
    except (ValueError, duckdb.Error):
        return None
    if root is None:
        return None
    return os.path.join(root, "runs", f"robot={robot}", f"run={run}")
