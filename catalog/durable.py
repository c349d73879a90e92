"""Durable file writes: fsync a tree, and replace one file atomically (a reader or a crash sees
the old file or the new one, never a part). The ground of every other writer in the lake:
`publish.py` (partitions), `file_index.py` (the file index), fit checkpoints, excitation files."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def fsync_tree(path: Path) -> None:
    """fsync every regular file under `path`, then every directory bottom-up."""
    for dirpath, _dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            fsync_path(Path(dirpath, name))
        fsync_path(Path(dirpath))


def fsync_path(path: Path) -> None:
    """fsync one file or directory (a directory: its entries, so a rename in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace the file `path` by `data` atomically; returns `path`.

    The bytes go to a hidden temporary file beside it (`.<name>.<pid>-<random>.tmp`, same
    directory, so same filesystem), which is fsynced and renamed over `path` (`os.replace`),
    then the directory is fsynced: a reader, or a crash, sees the old file or the new one,
    never a part. The directory must exist. On an error the temporary file is removed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """`atomic_write_bytes` of `text` encoded (UTF-8 by default, newlines as given)."""
    return atomic_write_bytes(path, text.encode(encoding))
