"""A read-only catalog connection: SQL through it can read the lake but never write a file.

DuckDB has no read-only mode for the files a query touches: `enable_external_access = false`
with `allowed_directories` grants reading *and* writing inside those directories, and an
in-memory database cannot be opened read-only (a read-only database file still runs `COPY
... TO`). So a read-only connection is two things:

- DuckDB's own settings, then `lock_configuration`: no extension is installed or loaded
  on demand (`autoinstall_known_extensions` / `autoload_known_extensions` off, so a
  `https://` or `s3://` path or `CREATE SECRET` never fetches httpfs nor creates
  `~/.duckdb/`), and no file outside the lake (and the paths the caller names) is read
  (`enable_external_access = false` with `allowed_directories` / `allowed_paths`: no
  `read_csv('/etc/passwd')`, `read_text`, `read_blob`, `glob('/root/*')`, URL or
  secret store). After that no setting can change, except the few in `ALLOWED_SETTINGS`,
  which write nothing (so no `profiling_output`, `log_query_path`, `temp_directory`,
  `secret_directory`, `enable_logging`, ...);
- `ReadOnlyConnection`, a thin wrapper over the DuckDB connection that parses every SQL text
  with DuckDB's parser (`duckdb.extract_statements`) before running it and refuses the
  statement types that write files or reach outside the in-memory database
  (`REFUSED_STATEMENTS`: `COPY`, `EXPORT DATABASE`, `ATTACH`/`DETACH`, `INSTALL`/`LOAD`,
  `PREPARE`/`EXECUTE` (whose body it cannot see), and `EXPLAIN ANALYZE` of any of these).

What stays allowed: queries, `DESCRIBE`/`SUMMARIZE`/`SHOW`, `EXPLAIN`, `SET VARIABLE`, and
in-memory objects (`CREATE TEMP TABLE`, `CREATE MACRO`, ...): the only database is the
in-memory one, so nothing persists. The guard is on SQL text; Python code holding the
connection can still write files through DuckDB's relation API (`rel.write_parquet`), as it
could with `open()`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import duckdb

_T = duckdb.StatementType
REFUSED_STATEMENTS: frozenset = frozenset({
    _T.COPY, _T.COPY_DATABASE, _T.EXPORT, _T.ATTACH, _T.DETACH, _T.LOAD, _T.EXTENSION,
    _T.PREPARE, _T.EXECUTE, _T.LOGICAL_PLAN, _T.MULTI, _T.INVALID,
})
"""Statement types a read-only connection refuses."""

ALLOWED_SETTINGS: tuple[str, ...] = (
    "threads", "memory_limit", "enable_progress_bar", "enable_progress_bar_print",
    "enable_profiling", "profiling_mode", "profiling_coverage", "explain_output",
    "preserve_insertion_order", "timezone", "calendar", "default_order",
    "default_null_order", "errors_as_json",
)
"""Settings a read-only connection may still change (none of them names a file)."""

_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?:ANALYZE\s+|ANALYSE\s+)?", re.IGNORECASE)


class ReadOnlyRefused(duckdb.PermissionException):
    """A statement a read-only catalog connection does not run."""


def lock(con: duckdb.DuckDBPyConnection, directories: Sequence[str],
         paths: Sequence[str] = ()) -> None:
    """Confine `con` to reading `directories` (and every file under them) and the single files
    `paths` (absolute), with no extension installed or loaded on demand, then lock its
    configuration (DuckDB `lock_configuration`) except `ALLOWED_SETTINGS`."""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allowed_directories = ?", [list(directories)])
    con.execute("SET allowed_paths = ?", [list(paths)])
    con.execute("SET enable_external_access = false")
    con.execute("SET allowed_configs = ?", [list(ALLOWED_SETTINGS)])
    con.execute("SET lock_configuration = true")



def check_sql(query: str) -> None:
    """Raise `ReadOnlyRefused` naming the first statement of `query` a read-only connection
    refuses (a text DuckDB cannot parse is left to DuckDB, which refuses it itself)."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error:
        return  # not SQL DuckDB can parse: running it fails the same way
    for statement in statements:
        kind = statement.type
        if kind == _T.EXPLAIN:
            inner = _EXPLAIN.sub("", statement.query, count=1)
            if inner == statement.query:
                raise ReadOnlyRefused(f"read-only catalog: cannot check {statement.query[:60]!r}")
            check_sql(inner)
        elif kind in REFUSED_STATEMENTS:
            words = " ".join(statement.query.split()[:2])
            raise ReadOnlyRefused(
                f"read-only catalog: {kind.name} statements are refused ({words} ...); the "
                "lake is written only by twinlake's commands (ingest, fit, import)"
            )


class ReadOnlyConnection:
    """A DuckDB connection whose SQL is checked by `check_sql` first; everything else is the
    wrapped `duckdb.DuckDBPyConnection` (attributes are forwarded). `execute` returns this
    wrapper, like DuckDB's returns the connection, so `con.execute(q).fetchall()` works."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def __enter__(self) -> "ReadOnlyConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self._con.close()

    def execute(self, query: str, parameters: object = None) -> "ReadOnlyConnection":
        check_sql(query)
        self._con.execute(query, parameters)
        return self

    def executemany(self, query: str, parameters: object = None) -> "ReadOnlyConnection":
        check_sql(query)
        self._con.executemany(query, parameters)
        return self

    def sql(self, query: str, **kwargs: Any) -> Any:
        check_sql(query)
        return self._con.sql(query, **kwargs)

    def query(self, query: str, **kwargs: Any) -> Any:
        check_sql(query)
        return self._con.query(query, **kwargs)

    def from_query(self, query: str, **kwargs: Any) -> Any:
        check_sql(query)
        return self._con.from_query(query, **kwargs)

    def cursor(self) -> "ReadOnlyConnection":
        return ReadOnlyConnection(self._con.cursor())

    def install_extension(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyRefused("read-only catalog: installing extensions is refused")

    def load_extension(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyRefused("read-only catalog: loading extensions is refused")


Connection = duckdb.DuckDBPyConnection | ReadOnlyConnection
"""What `twinlake.catalog.connect` returns (read-only or not)."""

__all__ = ["ALLOWED_SETTINGS", "Connection", "REFUSED_STATEMENTS", "ReadOnlyConnection", "ReadOnlyRefused",
           "check_sql", "lock"]
