"""The catalog of a lake on object storage: DuckDB views over the files its commit log names.

DuckDB reads the bucket through Arrow datasets that this module builds and registers (pyarrow's
S3 filesystem, catalog/object_store.py), never through an extension: the connection stays
locked as a local one is (catalog/read_only.py: no extension installed or loaded, no file
outside the named paths, configuration locked), and `s3://` URLs in SQL stay refused.

`indexed_runs`, `indexed_frames`, `indexed_targets` (catalog/sql.py `INDEXED_VIEWS`) are one
Arrow dataset each: the committed files of that name, the schema their groups unify to, and
per file the partition expression `robot = … AND run = …`, so a query naming a run reads that
run's files only. The views of `SQL_FILES` are then created as for a local lake, their
`-- requires:` globs answered from the commit log (kinds not kept on object storage yet, e.g.
fits, match nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .commit_log import CommitLog, Snapshot
from .lake import Lake
from .location import parse_location
from .object_store import S3Store, store_for
from .read_only import ReadOnlyConnection, lock
from .sql_files import INDEXED_VIEWS, readable_paths, new_catalog_connection, run_sql_files


class SnapshotIndex:
    """The files of a commit-log snapshot as catalog/sql.py asks a file index: paths relative
    to the lake root as if each partition held its files directly (`runs/robot=a/run=r/run.parquet`)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self._files: dict[str, tuple[str | None, str]] = {}  # logical path -> (schema id, data path)
        for partition, commit in snap.partitions.items():
            for f in commit.files:
                self._files[f"{partition}/{f.name}"] = (f.schema_id, f"{commit.data_dir}/{f.name}")

    def covers(self, pattern: str) -> bool:
        return True  # nothing on object storage is listed: the log is the whole truth

    def files(self, pattern: str) -> Iterator[tuple[str, str | None]]:
        rx = re.compile("^" + re.escape(pattern).replace(r"\*", "[^/]*") + "$")
        for logical in sorted(self._files):
            if rx.match(logical):
                yield logical, self._files[logical][0]

    def data_path(self, logical: str) -> str:
        return self._files[logical][1]


def connect_store(lake: Lake, *, read_only: bool = True, strict: bool = False,
                  readable: Sequence[str | Path] = (), as_of: int | None = None):
    """The catalog connection of an object-storage lake at version `as_of` (None: the latest).
    ValueError if `as_of` is not a version of its log."""
    store = store_for(lake.location)
    snap = CommitLog(store).snapshot(as_of)
    index = SnapshotIndex(snap)
    con = new_catalog_connection(lake.location.uri)
    con.execute("SET VARIABLE lake_version = ?", [snap.version])
    con.execute("SET VARIABLE lake_store = ?", [lake.location.uri])
    _remember(lake.location.uri, snap)
    for view, pattern in INDEXED_VIEWS:
        dataset = _dataset(store, index, pattern)
        if dataset is not None:
            con.register(view, dataset)
    run_sql_files(con, Path(lake.root), index, strict)
    if not read_only:
        return con
    directories, paths = readable_paths(Path(lake.root), readable)
    lock(con, [d for d in directories if not d.startswith(str(Path(lake.root)))], paths)
    return ReadOnlyConnection(con)


def _dataset(store: S3Store, index: SnapshotIndex, pattern: str) -> ds.Dataset | None:
    """One Arrow dataset over the committed files matching `pattern`, with `robot`, `run` from
    each file's partition (VARCHAR, as the local views have them); None if there are none."""
    files = list(index.files(pattern))
    if not files:
        return None
    schemas: dict[str | None, pa.Schema] = {}
    paths, partitions = [], []
    for logical, sid in files:
        path = store.path(index.data_path(logical))
        if sid not in schemas or sid is None:
            schemas[sid] = pq.read_schema(path, filesystem=store.fs)
        robot, run = (part.partition("=")[2] for part in logical.split("/")[1:3])
        paths.append(path)
        partitions.append((ds.field("robot") == robot) & (ds.field("run") == run))
    schema = pa.unify_schemas(list(schemas.values()), promote_options="permissive")
    schema = schema.append(pa.field("robot", pa.string())).append(pa.field("run", pa.string()))
    return ds.FileSystemDataset.from_paths(paths, schema=schema, format=ds.ParquetFileFormat(),
                                           filesystem=store.fs, partitions=partitions)


_SNAPSHOTS: dict[tuple[str, int], Snapshot] = {}


def _remember(uri: str, snap: Snapshot) -> None:
    """Keep the snapshots of the last few connections (what `committed_intervals` reads)."""
    _SNAPSHOTS[(uri, snap.version)] = snap
    while len(_SNAPSHOTS) > 4:
        _SNAPSHOTS.pop(next(iter(_SNAPSHOTS)))


def committed_intervals(con, robot: str, run: str, rules: str) -> pa.Table | None:
    """The stored default-rule intervals of run `robot`/`run` of `con`'s object-storage lake,
    at the connection's version, when they match `rules` and the commit's files
    (stored_intervals.read_committed_intervals); None otherwise (not such a connection, no
    such run, no valid file): the caller queries."""
    from .stored_intervals import SOURCES, read_committed_intervals

    try:
        ((uri, version),) = con.execute(
            "SELECT getvariable('lake_store'), getvariable('lake_version')").fetchall()
    except Exception:  # not a connection of this module
        return None
    snap = _SNAPSHOTS.get((uri, version))
    commit = None if snap is None else snap.partitions.get(f"runs/robot={robot}/run={run}")
    if commit is None:
        return None
    sizes = {f.name: f.size_bytes for f in commit.files if f.name in SOURCES}
    store = store_for(parse_location(uri))
    return read_committed_intervals(store.fs, store.path(commit.data_dir), robot, run, rules, sizes)
