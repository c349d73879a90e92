"""Publish on object storage, where there is no rename: unique data prefix, then a commit.

    publish_to_store(lake, "runs/robot=a/run=r1", write_fn)   # -> "s3://b/lake/runs/robot=a/run=r1/c-<id>"

1. The partition is built and checked locally exactly as on a local lake (`write_fn` into a
   local staging directory, the stored intervals computed from it: catalog/publish.py).
2. A lease `_staging/<id>.json` is written first: the data prefix it claims, and when the claim
   expires (`lease_expires_utc`, UTC; `LEASE_S` after the start).
3. Every file is uploaded under the unique prefix `<partition>/c-<id>/` (pyarrow's S3
   filesystem). Nothing there is visible: readers list the commit log, never the prefixes.
4. One commit log entry lists the files (catalog/commit_log.py, `If-None-Match: *`): from
   that version on the partition is those files. Of two writers of the same partition
   exactly one commits; the other deletes its prefix and gets `PartitionExists`.
5. The lease is deleted.

A writer killed at any step leaves at worst an uncommitted prefix and its lease: invisible,
and blocking no one (the next writer commits the next version). `reclaim_staging`, run at
the start of every ingest, deletes the prefixes of expired leases that no commit names,
whatever host wrote them and whether or not it still runs (a lease, not a pid).
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.fs as pafs

from .commit_log import CommitLog, LogFile, PartitionCommitted
from .lake import INTERVALS_FILE, Lake
from .object_store import Store, store_for, upload_tree

LEASE_S = 3600.0
"""How long a writer's claim on its data prefix lasts [s]: far above any publish's upload
time and any sane clock skew between hosts; a writer past it refuses to commit."""

STAGING_DIR = "_staging"


def publish_to_store(lake: Lake, rel: Path, write_fn: Callable[[Path], None], *,
                     replace: bool = False, staged: Path) -> str:
    """Fill the local directory `staged` with `write_fn`, upload it under a fresh prefix of the
    object-storage lake and commit it as partition `rel`. Returns the URI of the committed
    prefix. `PartitionCommitted` when the partition is committed already (before the upload,
    or by a writer that committed first: its prefix is deleted then)."""
    store, partition = store_for(lake.location), rel.as_posix()
    log = CommitLog(store)
    snap = log.snapshot()
    have = snap.partitions.get(partition)
    if have is not None and not replace:
        raise PartitionCommitted(partition, have.version)
    write_fn(staged)
    if not any(staged.iterdir()):
        raise ValueError(f"write_fn left the partition {rel} empty")
    commit_id = uuid.uuid4().hex[:16]
    data_dir = f"{partition}/c-{commit_id}"
    expires = _write_lease(store, commit_id, partition, data_dir)
    try:
        upload_tree(store, staged, data_dir)
        if datetime.now(timezone.utc) >= expires:
            raise TimeoutError(f"{lake.location.uri}: the upload of {partition} outlived its lease "
                               f"({LEASE_S:.0f} s); not committed")
        log.commit(partition, data_dir, _log_files(staged), replace=replace, snap=snap)
    except BaseException:
        _delete_prefix(store, data_dir)  # best effort: a lease left behind is reclaimed later
        raise
    finally:
        store.delete(f"{STAGING_DIR}/{commit_id}.json")
    return f"{lake.location.uri}/{data_dir}"


def _write_lease(store: Store, commit_id: str, partition: str, data_dir: str) -> datetime:
    """Write `_staging/<id>.json` (the claim) before any data file; returns its expiry."""
    now = datetime.now(timezone.utc)
    expires = now + timedelta(seconds=LEASE_S)
    body = {"partition": partition, "data_dir": data_dir, "started_utc": now.isoformat(),
            "lease_expires_utc": expires.isoformat(), "host": socket.gethostname()}
    store.put_new(f"{STAGING_DIR}/{commit_id}.json", (json.dumps(body, indent=1) + "\n").encode())
    return expires


def _log_files(staged: Path) -> tuple[LogFile, ...]:
    """Every file under `staged` (relative names, sizes), with the schema id of each Parquet
    file directly in it that a view reads (not the stored intervals)."""
    import pyarrow.parquet as pq

    from .file_index import schema_id

    files = []
    for path in sorted(p for p in staged.rglob("*") if p.is_file()):
        name = path.relative_to(staged).as_posix()
        sid = None
        if "/" not in name and name.endswith(".parquet") and name != INTERVALS_FILE:
            sid = schema_id([[f.name, str(f.type)] for f in pq.read_schema(path)])
        files.append(LogFile(name, path.stat().st_size, sid))
    return tuple(files)


def _delete_prefix(store: Store, data_dir: str) -> None:
    """Best effort: what is left is invisible, and reclaimed once its lease expires."""
    try:
        store.delete_prefix(data_dir)
    except OSError:
        pass


def reclaim_staging(lake: Lake, now: datetime | None = None) -> list[str]:
    """Delete the data prefixes of expired leases that no commit names, and those leases
    (a writer killed mid-publish, on any host). Returns the reclaimed data prefixes."""
    store = store_for(lake.location)
    now = now or datetime.now(timezone.utc)
    expired = []
    for name in store.list_names(STAGING_DIR):
        data = store.read(f"{STAGING_DIR}/{name}") if name.endswith(".json") else None
        if data is None:
            continue
        lease = json.loads(data)
        if datetime.fromisoformat(lease["lease_expires_utc"]) <= now:
            expired.append((name, lease["data_dir"]))
    if not expired:
        return []
    committed = CommitLog(store).snapshot().committed_dirs
    reclaimed = []
    for name, data_dir in expired:
        if data_dir not in committed:
            _delete_prefix(store, data_dir)
            reclaimed.append(data_dir)
        store.delete(f"{STAGING_DIR}/{name}")
    return reclaimed


def upload_quarantine(lake: Lake, local_dir: Path) -> str:
    """Copy a quarantine directory built locally to `<lake>/_quarantine/<name>/` and remove the
    local copy; returns its URI. (Quarantine is not read by views: no commit needed.)"""
    store = store_for(lake.location)
    rel = f"_quarantine/{local_dir.name}"
    upload_tree(store, local_dir, rel)
    shutil.rmtree(local_dir, ignore_errors=True)
    return f"{lake.location.uri}/{rel}"


def published_file(lake: Lake, rel: str | Path, name: str) -> tuple[pafs.FileSystem, str] | None:
    """`(filesystem, path)` of file `name` of partition `rel` as published now (a local lake:
    the file in its directory; object storage: in the latest committed version); None when
    the partition or the file is not there."""
    if not lake.remote:
        path = Path(lake.root) / rel / name
        return (pafs.LocalFileSystem(), str(path)) if path.is_file() else None
    store = store_for(lake.location)
    commit = CommitLog(store).snapshot().partitions.get(Path(rel).as_posix())
    if commit is None or not any(f.name == name for f in commit.files):
        return None
    return store.fs, store.path(f"{commit.data_dir}/{name}")
