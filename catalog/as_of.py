"""A local lake as at one version of its commit log (catalog/local_log.py): `twinlake sql
--as-of V` and a fit re-run at the version it read.

    index_as_of(lake, current_files(root), 12)   # the file index narrowed to runs of versions <= 12

A local lake keeps only the current bytes of a partition: a run replaced after V cannot be
shown as it was, so asking for V then is refused (ValueError naming the run and the version
that replaced it), never answered with the new bytes. On object storage every version's files
are kept and `--as-of` reads them (catalog/store_catalog.py).
"""

from __future__ import annotations

from .commit_log import Snapshot
from .file_index import FileIndex
from .lake import Lake
from .local_log import local_log


def index_as_of(lake: Lake, index: FileIndex, version: int) -> FileIndex:
    """`index` keeping only the run partitions committed at or before `version`."""
    log = local_log(lake)
    snap = log.snapshot(version)
    later = log.read(log.versions(after=version))
    _refuse_replaced(snap, later, version)
    keep = {rel: entry for rel, entry in index.partitions.items() if rel in snap.partitions}
    return FileIndex(partitions=keep, schemas=index.schemas)


def _refuse_replaced(snap: Snapshot, later: list, version: int) -> None:
    for commit in later:
        if commit.partition in snap.partitions:
            raise ValueError(f"{commit.partition} was replaced at version {commit.version}; a local "
                             f"lake keeps only its current bytes, so it cannot be shown as at version "
                             f"{version}")
