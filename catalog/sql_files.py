"""What every catalog connection is built from, a local lake's or an object-storage lake's
(catalog/sql.py, catalog/store_catalog.py): the SQL files and their block markers, the
empty canonical tables, a new connection with `lake_root` set, and what a read-only
connection may read.

    -- requires: runs/*/*/frames.parquet [more globs]   block runs only if every glob matches
    -- unless: runs/*/*/frames.parquet                  block runs only if the glob matches nothing
    -- always                                           block runs unconditionally

Globs are answered by the caller's file index (`covers(pattern)`, `files(pattern)`: the local
file index, or the commit log's snapshot), else by globbing the lake root.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from .schema import FRAME_SCHEMA, RUN_SCHEMA

if TYPE_CHECKING:
    from .file_index import FileIndex

SQL_FILES: tuple[str, ...] = ("views", "clean_intervals", "fits", "validations", "campaigns",
                              "bag_streams")
"""SQL files loaded by `connect`, in order (files that do not exist yet are skipped)."""

INDEXED_VIEWS: tuple[tuple[str, str], ...] = (
    ("indexed_runs", "runs/*/*/run.parquet"),
    ("indexed_frames", "runs/*/*/frames.parquet"),
    ("indexed_targets", "runs/*/*/targets.parquet"),
)
"""(view, glob) pairs bound from the file index by `connect` before `SQL_FILES` run."""

_MARKER = re.compile(r"^--\s*(?:(requires|unless):\s*(\S.*)|(always))\s*$")


def load_sql(name: str) -> str:
    """The text of `sql/<name>.sql`; FileNotFoundError if there is no such file."""
    path = resources.files("twinlake.sql").joinpath(f"{name}.sql")
    if not path.is_file():
        raise FileNotFoundError(f"no SQL file sql/{name}.sql")
    return path.read_text(encoding="utf-8")


def sql_blocks(text: str) -> list[tuple[str, list[str], str]]:
    """Split a SQL file into `(kind, globs, sql)` blocks; kind is requires|unless|always."""
    blocks: list[tuple[str, list[str], str]] = []
    kind, globs, lines = "always", [], []
    for line in text.splitlines():
        m = _MARKER.match(line.strip())
        if m:
            blocks.append((kind, globs, "\n".join(lines)))
            kind = m.group(1) or m.group(3)
            globs, lines = (m.group(2) or "").split(), []
        else:
            lines.append(line)
    blocks.append((kind, globs, "\n".join(lines)))
    return [b for b in blocks if _has_sql(b[2])]


def _has_sql(sql: str) -> bool:
    return any(ln.strip() and not ln.strip().startswith("--") for ln in sql.splitlines())


def _matches(root: Path, pattern: str, index: FileIndex) -> bool:
    if index.covers(pattern):
        return next(index.files(pattern), None) is not None
    return next(iter(root.glob(pattern)), None) is not None


def _should_run(root: Path, kind: str, globs: list[str], index: FileIndex) -> bool:
    if kind == "requires":
        return all(_matches(root, g, index) for g in globs)
    if kind == "unless":
        return not any(_matches(root, g, index) for g in globs)
    return True


_DUCKDB_TYPES = {pa.int8(): "TINYINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
                 pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.string(): "VARCHAR"}


def _duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type of an Arrow type of the canonical schemas (flat, lists, structs)."""
    if pa.types.is_list(t):
        return _duckdb_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{_quoted(f.name)} {_duckdb_type(f.type)}" for f in t) + ")"
    return _DUCKDB_TYPES[t]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def empty_table_sql(name: str, schema: pa.Schema) -> str:
    """`CREATE TABLE <name> (...)`: the columns of `schema` (one of twinlake's own canonical
    schemas: names are never user input), then `robot`, `run` VARCHAR, as DDL. (Handing DuckDB
    an empty Arrow table would do the same but makes it import pandas: ~0.2-0.4 s in a
    fresh process.)"""
    columns = [f"{_quoted(f.name)} {_duckdb_type(f.type)}" for f in schema]
    return f"CREATE TABLE {_quoted(name)} ({', '.join(columns + ['robot VARCHAR', 'run VARCHAR'])})"


def new_catalog_connection(lake_root: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with `lake_root` set and what every view builds on:
    the empty canonical tables and the `lake_files` macro."""
    con = duckdb.connect(":memory:")
    con.execute("SET VARIABLE lake_root = ?", [lake_root])
    # glob views (fits, validations) read every file's footer (union_by_name): cache them
    con.execute("SET parquet_metadata_cache = true")
    for name, schema in (("empty_frames", FRAME_SCHEMA), ("empty_runs", RUN_SCHEMA)):
        con.execute(empty_table_sql(name, schema))
    con.execute(load_sql("lake_files"))
    return con


def run_sql_files(con: duckdb.DuckDBPyConnection, root: Path, index, strict: bool) -> None:
    """Run the blocks of `SQL_FILES` whose markers hold (globs answered by `index`, else by
    globbing `root`); a failing block of views.sql raises, of a later file warns unless `strict`."""
    for name in SQL_FILES:
        try:
            text = load_sql(name)
        except FileNotFoundError:
            continue
        for kind, globs, sql in sql_blocks(text):
            if _should_run(root, kind, globs, index):
                try:
                    con.execute(sql)
                except duckdb.Error as exc:
                    message = f"sql/{name}.sql: {exc}".splitlines()[0]
                    if strict or name == SQL_FILES[0]:
                        raise RuntimeError(message) from exc
                    warnings.warn(f"{message} (skipped)", stacklevel=3)


def readable_paths(root: Path, readable: Sequence[str | Path]) -> tuple[list[str], list[str]]:
    """(directories, files) a read-only connection may read: the lake (as given and with
    symbolic links resolved, since DuckDB compares the path a query names) and `readable`,
    a directory admitting everything under it, a file (or a path not there yet) itself."""
    directories = {str(root), str(root.resolve())}
    paths: set[str] = set()
    for item in readable:
        path = Path(item).absolute()
        (directories if path.is_dir() else paths).update({str(path), str(path.resolve())})
    return sorted(directories), sorted(paths)
