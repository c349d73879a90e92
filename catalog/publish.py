"""Atomic publish of a partition directory, atomic replacement of one file, and quarantine
of rejected input.

A partition is built in `<lake>/_staging/<random>/`, every file and the directory are
fsynced, then the directory is renamed to its final place in one `rename` system call, so a
reader (or a crash) sees the whole partition or none of it. On Linux `renameat2` is used with
`RENAME_NOREPLACE` (two racing writers: exactly one wins) and `RENAME_EXCHANGE` (replace
swaps old and new atomically); elsewhere a plain `os.rename`, which refuses a non-empty target.
What goes into a partition is its writer's (a run's intervals are the ingest's write step:
`intervals.stage_run_intervals`, called by ingest/pipeline.py in its `write_fn`); publishing moves the
files, whatever they are.
After the rename of a partition of an indexed kind (`runs/`), the lake's file index
(`catalog/file_index.py`) is updated under its lock; if that fails the partition stays
published and readers find it by listing (the index is a cache, never the truth).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

from .durable import fsync_path, fsync_tree
from .lake import Lake

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class PartitionExists(FileExistsError):
    """The target partition already exists and `replace` was not asked for."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(errno.EEXIST, f"partition already exists: {path}", str(path))
        self.path = path if isinstance(path, str) else Path(path)  # a URI on object storage


def _as_lake(lake: Lake | str | Path) -> Lake:
    return lake if isinstance(lake, Lake) else Lake(Path(lake))


def _libc_renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _libc_renameat2()


def _rename(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(src, dst, flags); False if the call is unavailable here (caller falls back)."""
    if _RENAMEAT2 is None:
        return False
    rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def new_staging_dir(lake: Lake | str | Path, label: str = "part") -> Path:
    """A fresh empty directory under `<lake>/_staging/` (same filesystem as the lake)."""
    staging = _as_lake(lake).staging_dir
    staging.mkdir(parents=True, exist_ok=True)
    path = staging / f"{label}-{os.getpid()}-{uuid.uuid4().hex}"
    path.mkdir()
    return path


def clean_staging(lake: Lake | str | Path) -> list[Path]:
    """Remove orphans under `_staging/` left by processes that no longer run (a crash or
    SIGKILL mid-publish); the owner's pid is part of each staging directory's name.
    Returns the removed paths."""
    lk = _as_lake(lake)
    staging, removed = lk.staging_dir, []
    if lk.remote:  # expired leases of writers on any host (object_publish.reclaim_staging)
        from .object_publish import reclaim_staging

        reclaim_staging(lk)
    if not staging.is_dir():
        return removed
    for entry in staging.iterdir():
        parts = entry.name.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit() and not _alive(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _move_into_place(staged: Path, target: Path, replace: bool) -> None:
    if replace and target.exists():
        if _rename(staged, target, _RENAME_EXCHANGE):
            shutil.rmtree(staged, ignore_errors=True)  # `staged` now holds the old partition
            return
        old = staged.with_name(staged.name + "-old")
        os.rename(target, old)
        os.rename(staged, target)
        shutil.rmtree(old, ignore_errors=True)
        return
    try:
        if not _rename(staged, target, _RENAME_NOREPLACE):
            if target.exists():
                raise PartitionExists(target)
            os.rename(staged, target)  # refuses a non-empty existing target
    except OSError as exc:
        if isinstance(exc, PartitionExists):
            raise
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise PartitionExists(target) from None
        raise


def publish_partition(
    lake: Lake | str | Path,
    relative_dir: str | Path,
    write_fn: Callable[[Path], None],
    *,
    replace: bool = False,
) -> Path | str:
    """Build a partition in `_staging/` with `write_fn(staging_path)`, fsync it, then rename it
    to `<lake>/<relative_dir>` atomically. Returns the final path.

    Raises `PartitionExists` if the target exists and `replace` is false (checked before
    `write_fn` runs, and again atomically at the rename). The staging directory is removed
    on any failure; a crash leaves at worst an orphan under `_staging/`. On an object-storage
    lake (`lake.remote`) the partition is uploaded and committed instead of renamed
    (catalog/object_publish.py); returns the URI of its committed prefix.
    """
    lk = _as_lake(lake)
    rel = Path(relative_dir)
    if rel.is_absolute() or ".." in rel.parts or str(rel).startswith("_"):
        raise ValueError(f"relative_dir {str(rel)!r} must be a relative path inside the lake")
    if lk.remote:  # object storage: upload under a unique prefix, then commit (object_publish.py)
        from .object_publish import publish_to_store

        from .commit_log import PartitionCommitted

        staged = new_staging_dir(lk, rel.name.replace("=", "-"))
        try:
            return publish_to_store(lk, rel, write_fn, replace=replace, staged=staged)
        except PartitionCommitted:
            raise PartitionExists(lk.shown(rel)) from None
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    target = lk.root / rel
    if target.exists() and not replace:
        raise PartitionExists(target)
    staged = new_staging_dir(lk, rel.name.replace("=", "-"))
    try:
        write_fn(staged)
        if not any(staged.iterdir()):
            raise ValueError(f"write_fn left the partition {rel} empty")
        fsync_tree(staged)
        target.parent.mkdir(parents=True, exist_ok=True)
        _move_into_place(staged, target, replace)
        fsync_path(target.parent)
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)
    _update_file_index(lk, rel)
    _append_local_log(lk, rel, replace)
    return target


def _update_file_index(lake: Lake, rel: Path) -> None:
    from .file_index import INDEXED_KINDS, update_index

    if rel.parts[0] not in INDEXED_KINDS:
        return
    try:
        update_index(lake.root)
    except (OSError, ValueError) as exc:
        warnings.warn(f"{lake.root}: partition {rel} is published, but the file index was not "
                      f"updated ({exc}); readers list it anyway, `twinlake catalog rebuild` "
                      "rewrites the index", stacklevel=3)


def _append_local_log(lake: Lake, rel: Path, replace: bool) -> None:
    """A version in the local lake's commit log for the partition just renamed into place
    (catalog/commit_log.py): the directory is visible already (a local lake is read by listing);
    the entry numbers it, for `--as-of` and the version a fit read."""
    from .local_log import append_local_commit

    try:
        append_local_commit(lake, rel, replace)
    except (OSError, ValueError) as exc:
        warnings.warn(f"{lake.root}: partition {rel} is published, but no commit log entry was "
                      f"written ({exc})", stacklevel=3)


def quarantine(lake: Lake | str | Path, files: Iterable[str | Path], reason: dict) -> Path | str:
    """Copy the rejected input `files` (files or directories) to `<lake>/_quarantine/<utc-time>-<name>-<rand>/` with
    `reason.json` (the `reason` dict plus `quarantined_at_utc` and the original paths).
    Returns the quarantine directory; it appears atomically, like a partition. On an
    object-storage lake it is built locally, then copied to the bucket: returns its URI."""
    lk = _as_lake(lake)
    files = [Path(f) for f in files]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    first = files[0].name if files else "input"
    name = f"{stamp}-{first}-{uuid.uuid4().hex[:8]}"
    staged = new_staging_dir(lk, "quarantine")
    try:
        for f in files:
            if f.is_file():
                shutil.copy2(f, staged / f.name)
            elif f.is_dir():
                shutil.copytree(f, staged / f.name)
        body = dict(reason)
        body.setdefault("files", [str(f.absolute()) for f in files])
        body["quarantined_at_utc"] = datetime.now(timezone.utc).isoformat()
        (staged / "reason.json").write_text(json.dumps(body, indent=2, default=str) + "\n")
        fsync_tree(staged)
        lk.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = lk.quarantine_dir / name
        os.rename(staged, target)
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)
    if lk.remote:  # the input is kept in the bucket, beside the lake
        from .object_publish import upload_quarantine

        return upload_quarantine(lk, target)
    return target
