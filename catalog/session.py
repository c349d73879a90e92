"""A bucket lake worked on locally by one command: fits, validations, verdicts, campaigns.

    session = open_session(parse_location("s3://twin/lake"))        # the latest version, or as_of=V
    run_fit(session.root, settings)          # any code written for a local lake directory
    session.push()                           # what it published, committed to the bucket
    session.close()

Object storage has no directories to rename into and no files to append to, and the fit, the
validation and the campaign code read and write a lake directory. A session gives them one:
`root` is a private local lake (under the lake's scratch directory, catalog/lake.py
`open_lake`) holding the bucket's snapshot at `version` (each committed partition's files,
downloaded once per host into `objects/<commit prefix>/`, which nothing rewrites; a run's
`raw/` archive is left in the bucket: no fit or campaign reads it). Its commit log starts
with that snapshot as a checkpoint, so the local lake's version is the bucket's (what a fit
records as the version it read); `_staging/` is shared by the sessions of one host, so a
fit's checkpoint survives for `--resume`.

`push` commits to the bucket every partition the command published in the session (the
local log's entries after `version`) and every campaign directory it changed (a campaign is
a directory rewritten as it runs: each invocation ends as a new commit of it), each through
`publish_partition` (upload under a fresh prefix, one conditional log entry;
catalog/object_publish.py). A partition another writer committed first in the meantime is
refused (`PartitionExists`), as on a local lake. Only the process holding the session reads
or writes the bucket.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from .commit_log import CHECKPOINT_DIR, Commit, CommitLog, Snapshot
from .lake import INTERVALS_FILE, Lake, lake_location, open_lake
from .location import LakeLocation
from .object_store import Store, store_for

MUTABLE_KINDS = ("campaigns",)
"""Kinds whose partitions are directories rewritten in place by their writer (not published
once): pushed when their files changed."""

SESSION_MARKER = "_session.json"
"""A session's root holds this file (the bucket and version it copies): how code given a lake
directory knows that Ray workers elsewhere cannot see it (campaign/execution.py ships their
files back to the driver instead)."""

_SKIP_IN_RUNS = "raw/"
_PRIVATE = (".lock", "_tmp/")


@dataclass
class LakeSession:
    """`root`: the local lake of the command; `version`: the bucket's version it holds;
    `lake`: the bucket lake (a `Lake` with `remote`); `mutable`: each mutable partition's
    file manifest as materialised (to see what the command changed)."""

    root: Path
    version: int
    lake: Lake
    snapshot: Snapshot
    mutable: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)

    def push(self) -> list[str]:
        """Commit what the command published or changed here; returns the committed URIs."""
        from .local_log import local_log
        from .publish import publish_partition

        log = local_log(Lake(self.root))
        published: dict[str, bool] = {}
        for commit in log.read(log.versions(after=self.version)):
            published[commit.partition] = published.get(commit.partition, False) or commit.replace
        for partition, before in self.mutable.items():
            if _manifest(self.root / partition) != before:
                published.setdefault(partition, True)
        for kind in MUTABLE_KINDS:  # created by the command
            for part in sorted((self.root / kind).glob("*=*")):
                rel = part.relative_to(self.root).as_posix()
                if rel not in self.mutable and _manifest(part):
                    published.setdefault(rel, False)
        uris = []
        for partition, replaced in published.items():
            source = self.root / partition
            again = replaced or partition in self.snapshot.partitions
            uris.append(publish_partition(self.lake, partition, lambda d, s=source: _copy_public(s, d),
                                          replace=again))
        return [str(u) for u in uris]

    def close(self) -> None:
        """Remove the session's directory (the download cache and `_staging/` stay)."""
        shutil.rmtree(self.root, ignore_errors=True)


def is_session(root: str | Path) -> bool:
    """True when the lake directory `root` is a session's local copy of a bucket lake: a
    directory of this host only, which workers on other nodes do not see."""
    return (Path(root) / SESSION_MARKER).is_file()


def open_session(lake: str | Path | LakeLocation | None, as_of: int | None = None) -> LakeSession:
    """A local lake holding the bucket lake's snapshot at `as_of` (None: the latest).
    ValueError if `as_of` is not a version of the lake."""
    location = lake_location(lake)
    bucket = open_lake(location)
    store = store_for(location)
    snap = CommitLog(store).snapshot(as_of)
    scratch = bucket.root
    root = scratch / "sessions" / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    root.mkdir(parents=True)
    (scratch / "_staging").mkdir(parents=True, exist_ok=True)
    os.symlink(scratch / "_staging", root / "_staging")
    session = LakeSession(root, snap.version, bucket, snap)
    try:
        marker = {"lake": location.uri, "version": snap.version, "host": os.uname().nodename}
        (root / SESSION_MARKER).write_text(json.dumps(marker) + "\n")
        _materialise(store, snap, scratch / "objects", root)
        _write_local_checkpoint(root, snap)
        session.mutable = {p: _manifest(root / p) for p in snap.partitions if p.split("/")[0] in MUTABLE_KINDS}
        _write_file_index(root, snap)
    except BaseException:
        session.close()
        raise
    return session


def _materialise(store: Store, snap: Snapshot, cache: Path, root: Path) -> None:
    """Every committed partition's files (a run's but its raw archive) into `root`: runs
    hard-linked from the download cache (never written in a session), the others copied (a
    campaign appends to its files)."""
    todo = [(c, f.name, f.size_bytes) for c in snap.partitions.values() for f in c.files
            if not (c.partition.startswith("runs/") and f.name.startswith(_SKIP_IN_RUNS))]

    def one(item: tuple[Commit, str, int]) -> None:
        commit, name, size = item
        cached = _download(store, cache, f"{commit.data_dir}/{name}", size)
        target = root / commit.partition / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if commit.partition.startswith("runs/"):
            os.link(cached, target)
        else:
            shutil.copyfile(cached, target)

    runs = [c for c in snap.partitions.values() if c.partition.startswith("runs/")]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, todo))
        list(pool.map(lambda c: _restore_intervals_key(c, root / c.partition), runs))


def _download(store: Store, cache: Path, key: str, size: int) -> Path:
    """The cached copy of object `key` (relative to the lake), fetched if absent; objects of
    a commit prefix are never rewritten, so a cached file of the listed size is that object."""
    cached = cache / key
    if cached.is_file() and cached.stat().st_size == size:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f".{cached.name}.{uuid.uuid4().hex}.tmp")
    with store.fs.open_input_stream(store.path(key)) as src, open(tmp, "wb") as out:
        while chunk := src.read(8 << 20):
            out.write(chunk)
    os.replace(tmp, cached)
    return cached


def _restore_intervals_key(commit: Commit, directory: Path) -> None:
    """Give a run's two source files the modification times its stored intervals' key holds,
    when the key's sizes are the ones the commit lists (what makes the intervals valid in the
    bucket, catalog/stored_intervals.py `read_committed_intervals`): the downloaded files are
    those bytes, so the stored intervals are served locally instead of recomputed."""
    import pyarrow.parquet as pq

    from .stored_intervals import SOURCES, STORE_KEY

    sizes = {f.name: f.size_bytes for f in commit.files}
    if INTERVALS_FILE not in sizes:
        return
    try:
        raw = (pq.read_schema(directory / INTERVALS_FILE).metadata or {}).get(STORE_KEY)
        key = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return
    if all((key.get(n) or [None])[0] == sizes.get(n) for n in SOURCES):
        for name in SOURCES:
            mtime_ns = key[name][1]
            os.utime(directory / name, ns=(mtime_ns, mtime_ns))


def _write_file_index(root: Path, snap: Snapshot) -> None:
    """The session's file index from the commits (their Parquet files' schema ids), reading
    one footer per distinct schema instead of every run's (catalog/file_index.py)."""
    import pyarrow.parquet as pq

    from .file_index import FileIndex, PartitionEntry, schema_id, store_index

    index = FileIndex()
    for commit in snap.partitions.values():
        if not commit.partition.startswith("runs/"):
            continue
        directory = root / commit.partition
        files = {}
        for f in commit.files:
            if "/" in f.name or not f.name.endswith(".parquet") or f.name == INTERVALS_FILE:
                continue
            sid = f.schema_id
            if sid is None or sid not in index.schemas:  # a commit without the id: its footer
                schema = [[c.name, str(c.type)] for c in pq.read_schema(directory / f.name)]
                sid = sid or schema_id(schema)
                index.schemas[sid] = schema
            files[f.name] = sid
        st = directory.stat()
        index.partitions[commit.partition] = PartitionEntry(st.st_ino, st.st_mtime_ns, files)
    store_index(root, index)


def _write_local_checkpoint(root: Path, snap: Snapshot) -> None:
    """The session's commit log: the bucket's snapshot as the checkpoint of its version, each
    partition's files where the local lake has them (`data_dir` = the partition)."""
    from .object_store import LocalStore

    local = Snapshot(snap.version, {p: replace(c, data_dir=p) for p, c in snap.partitions.items()},
                     set(snap.partitions))
    if snap.version:
        (root / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
        CommitLog(LocalStore(root)).write_checkpoint(local)


def _manifest(directory: Path) -> dict[str, tuple[int, int]]:
    """`relative name -> (size, mtime_ns)` of a partition's public files (not its lock or `_tmp/`)."""
    if not directory.is_dir():
        return {}
    out = {}
    for path in directory.rglob("*"):
        name = path.relative_to(directory).as_posix()
        if path.is_file() and not any(name == p or name.startswith(p) for p in _PRIVATE):
            st = path.stat()
            out[name] = (st.st_size, st.st_mtime_ns)
    return out


def _copy_public(source: Path, staged: Path) -> None:
    """Copy a session partition's public files into the publish's staging directory."""
    for name in sorted(_manifest(source)):
        target = staged / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
