"""The commit log of a local lake (catalog/commit_log.py on a `LocalStore`): one entry per
publish, written after the rename that made the partition visible.

A local lake is read by listing its partition directories (the file index); its log numbers
the publishes, so that a fit can record the version it read and `twinlake sql --as-of V`
can show the runs published up to V. A crash between the rename and the entry leaves a
visible partition without a version: it belongs to every later snapshot but to no
`--as-of` before the next entry.
"""

from __future__ import annotations

import os
from pathlib import Path

from .commit_log import CommitLog, LogFile, Snapshot
from .lake import Lake
from .object_store import LocalStore


def local_log(lake: Lake) -> CommitLog:
    """The commit log of the local lake rooted at `lake.root`."""
    return CommitLog(LocalStore(Path(lake.root)))


def lake_log(lake: Lake) -> CommitLog:
    """The commit log of any lake: local, or on object storage."""
    if lake.remote:
        from .object_store import store_for

        return CommitLog(store_for(lake.location))
    return local_log(lake)


def current_version(lake: Lake | str | Path) -> int:
    """The lake's latest version (0: nothing committed yet): what a reader starting now sees,
    and what a fit records as the version it read (`twinlake sql --as-of`)."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    return lake_log(lk).latest()


def append_local_commit(lake: Lake, rel: Path, replace: bool) -> int:
    """Append the version of partition `rel` (just published, or replaced); returns it."""
    partition = rel.as_posix()
    log = local_log(lake)
    root = str(Path(lake.root).absolute())
    version = log.append(partition, partition, _files(lake.root / rel), replace=replace,
                         known=_APPENDED.get(root)).version
    _APPENDED[root] = version
    return version


_APPENDED: dict[str, int] = {}
"""Per lake root, the version this process appended last: the next append starts past it
instead of listing `_log/` (which grows with the lake)."""


def _files(directory: Path) -> tuple[LogFile, ...]:
    """The partition's files (top level and one level below, e.g. `raw/`) with sizes."""
    out = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_file():
            out.append(LogFile(entry.name, entry.stat().st_size))
        elif entry.is_dir():
            for sub in sorted(os.scandir(entry.path), key=lambda e: e.name):
                if sub.is_file():
                    out.append(LogFile(f"{entry.name}/{sub.name}", sub.stat().st_size))
    return tuple(out)


def local_snapshot(lake: Lake, as_of: int | None = None) -> Snapshot:
    """The local lake's log folded up to `as_of` (None: the latest)."""
    return local_log(lake).snapshot(as_of)
