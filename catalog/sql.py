"""The DuckDB catalog: an in-process connection with the views of `sql/*.sql` over a lake.

SQL files run in the order of `SQL_FILES` (missing files are skipped). Each file is a
sequence of blocks separated by marker comment lines:

    -- requires: runs/*/*/frames.parquet [more globs]   block runs only if every glob matches
    -- unless: runs/*/*/frames.parquet                  block runs only if the glob matches nothing
    -- always                                           block runs unconditionally

Text before the first marker runs unconditionally. Globs are relative to the lake root.
The lake root reaches SQL only as the DuckDB variable `lake_root` (`getvariable('lake_root')`),
set with a bound parameter, never by string concatenation. Empty tables `empty_frames` and
`empty_runs` (canonical columns plus `robot`, `run`) exist for `-- unless` fallbacks.
"""

from __future__ import annotations

import re
import warnings
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from twinlake.catalog.lake import Lake
from twinlake.catalog.read_only import ReadOnlyConnection, lock
from twinlake.catalog.schema import FRAME_SCHEMA, RUN_SCHEMA

SQL_FILES: tuple[str, ...] = ("views", "clean_intervals", "fits", "validations", "campaigns")
"""SQL files loaded by `connect`, in order (files that do not exist yet are skipped)."""

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


def _matches(root: Path, pattern: str) -> bool:
    return next(iter(root.glob(pattern)), None) is not None


def _should_run(root: Path, kind: str, globs: list[str]) -> bool:
    if kind == "requires":
        return all(_matches(root, g) for g in globs)
    if kind == "unless":
        return not any(_matches(root, g) for g in globs)
    return True


def _empty_table(schema: pa.Schema) -> pa.Table:
    full = schema.append(pa.field("robot", pa.string())).append(pa.field("run", pa.string()))
    return full.empty_table()


def connect(lake: Lake | str | Path, *, read_only: bool = True,
            strict: bool = False) -> duckdb.DuckDBPyConnection | ReadOnlyConnection:
    """An in-process (in-memory) DuckDB connection with the lake's views.

    Views are bound to the files present when they are created: connect again to see
    tables that appeared later. `read_only` (the default): SQL through the connection can
    read but never write a file: the configuration is locked and file-writing statements
    (`COPY`, `EXPORT`, `ATTACH`, `INSTALL`/`LOAD`, ...) raise `ReadOnlyRefused`
    (`catalog/read_only.py`); `read_only=False` gives the plain DuckDB connection. A failing
    block of `views.sql` raises; a failing block of a later file is skipped with a warning
    (its views are missing) unless `strict`, so one broken view never takes the whole
    catalog down.
    """
    root = (lake.root if isinstance(lake, Lake) else Path(lake)).absolute()
    con = duckdb.connect(":memory:")
    con.execute("SET VARIABLE lake_root = ?", [str(root)])
    # the views read every file's footer (union_by_name) on each query: cache them
    con.execute("SET parquet_metadata_cache = true")
    for name, schema in (("empty_frames", FRAME_SCHEMA), ("empty_runs", RUN_SCHEMA)):
        con.register(f"_{name}_arrow", _empty_table(schema))
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_arrow")
        con.unregister(f"_{name}_arrow")
    for name in SQL_FILES:
        try:
            text = load_sql(name)
        except FileNotFoundError:
            continue
        for kind, globs, sql in sql_blocks(text):
            if _should_run(root, kind, globs):
                try:
                    con.execute(sql)
                except duckdb.Error as exc:
                    message = f"sql/{name}.sql: {exc}".splitlines()[0]
                    if strict or name == SQL_FILES[0]:
                        raise RuntimeError(message) from exc
                    warnings.warn(f"{message} (skipped)", stacklevel=2)
    if not read_only:
        return con
    lock(con)
    return ReadOnlyConnection(con)
