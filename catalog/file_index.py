"""The lake's file index: which Parquet files each run partition holds and their schemas, so
a catalog connection binds its views without globbing the lake or reading every footer.

The index is `<lake>/_catalog/files.json`::

    {"format": 1,
     "partitions": {"runs/robot=a/run=r1": {"dir_ino": 123, "dir_mtime_ns": 1700000000000000000,
                                            "files": {"frames.parquet": "<schema id>", ...}}, ...},
     "schemas": {"<schema id>": [["seq", "int64"], ["t_s", "double"], ...], ...}}

A schema id is the SHA-256 (first 16 hex digits) of the file's Arrow schema (names and types, in
order). The index is a cache of facts the files themselves hold, never the truth:

- Writers (`publish_partition`, `twinlake catalog rebuild`) update it under an exclusive lock
  (`_catalog/lock`, `flock`) and replace it atomically (temporary file + rename), so two
  writers never lose each other's partitions and a reader sees the old index or the new one.
- Readers (`current_files`) take no lock. They list the partition directories (a directory
  listing and one `stat` per partition, no file is opened) and trust an index entry only
  while the partition directory has the same inode and mtime; a partition that is new,
  replaced (the atomic replace swaps in another directory) or missing from a stale, absent or
  corrupt index has its footers read on the spot. Partitions that are gone are dropped.
- `rebuild_index` ignores the old index and reads every footer: the index can always be
  rebuilt from the files alone.

Files inside a published partition are never rewritten in place (a replace publishes a new
directory); a file edited in place by hand keeps its old schema in the index until
`twinlake catalog rebuild`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from .lake import INTERVALS_FILE

INDEX_FORMAT = 1
CATALOG_DIR = "_catalog"
INDEX_NAME = "files.json"
LOCK_NAME = "lock"
INDEXED_KINDS: dict[str, int] = {"runs": 2}
"""Partition kinds the index covers: top-level directory -> depth of its Hive partitions
(`runs/robot=<robot>/run=<run>/`)."""


@dataclass
class PartitionEntry:
    """One partition directory: its identity on disk and its Parquet files' schema ids."""

    dir_ino: int
    dir_mtime_ns: int
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class FileIndex:
    """The indexed partitions (relative path -> entry) and the schemas they use."""

    partitions: dict[str, PartitionEntry] = field(default_factory=dict)
    schemas: dict[str, list[list[str]]] = field(default_factory=dict)

    def files(self, pattern: str) -> Iterator[tuple[str, str]]:
        """`(relative path, schema id)` of every indexed file matching the glob `pattern`
        (relative to the lake root, `*` within one path component), sorted by path."""
        rx = _glob_regex(pattern)
        for rel in sorted(self.partitions):
            files = self.partitions[rel].files
            for name in sorted(files):
                path = rel + "/" + name
                if rx.match(path):
                    yield path, files[name]

    def schema_groups(self, pattern: str) -> list[list[str]]:
        """The files matching `pattern` grouped by identical schema, groups ordered by their
        first file: each group can be read as one `read_parquet` list without `union_by_name`."""
        groups: dict[str, list[str]] = {}
        for path, schema_id in self.files(pattern):
            groups.setdefault(schema_id, []).append(path)
        return list(groups.values())

    def covers(self, pattern: str) -> bool:
        """True if every file `pattern` can match lies where the index looks."""
        parts = pattern.strip("/").split("/")
        depth = INDEXED_KINDS.get(parts[0])
        return depth is not None and len(parts) == depth + 2 and "[" not in pattern \
            and "*" not in parts[-1] and "?" not in parts[-1]

    def to_json(self) -> str:
        used = {s for e in self.partitions.values() for s in e.files.values()}
        body = {
            "format": INDEX_FORMAT,
            "partitions": {rel: {"dir_ino": e.dir_ino, "dir_mtime_ns": e.dir_mtime_ns,
                                 "files": dict(sorted(e.files.items()))}
                           for rel, e in sorted(self.partitions.items())},
            "schemas": {s: self.schemas[s] for s in sorted(used)},
        }
        return json.dumps(body, separators=(",", ":")) + "\n"


def _glob_regex(pattern: str) -> re.Pattern:
    """`*` / `?` within one path component, everything else literal."""
    body = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
                   for c in pattern.strip("/"))
    return re.compile(body + r"\Z")


def index_path(root: Path) -> Path:
    """`<lake>/_catalog/files.json`."""
    return Path(root) / CATALOG_DIR / INDEX_NAME


def load_index(root: Path) -> FileIndex | None:
    """The stored index, or None when it is absent or cannot be read as one (a warning names
    the file and what is wrong; readers then read the footers themselves)."""
    path = index_path(root)
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        if body.get("format") != INDEX_FORMAT:
            raise ValueError(f"format {body.get('format')!r}, expected {INDEX_FORMAT}")
        parts = {rel: PartitionEntry(int(e["dir_ino"]), int(e["dir_mtime_ns"]),
                                     {str(k): str(v) for k, v in e["files"].items()})
                 for rel, e in body["partitions"].items()}
        schemas = {str(k): [[str(n), str(t)] for n, t in v] for k, v in body["schemas"].items()}
        missing = {s for e in parts.values() for s in e.files.values()} - schemas.keys()
        if missing:
            raise ValueError(f"schema ids without a schema: {sorted(missing)[:3]}")
        return FileIndex(parts, schemas)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(f"{path}: not a usable file index ({exc}); reading the files instead "
                      "(`twinlake catalog rebuild` rewrites it)", stacklevel=3)
        return None


def _partition_dirs(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """`(relative path, stat)` of every partition directory of the indexed kinds."""
    for kind, depth in INDEXED_KINDS.items():
        level = [(kind, Path(root) / kind)]
        for _ in range(depth):
            nxt = []
            for rel, path in level:
                try:
                    entries = list(os.scandir(path))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                for entry in entries:
                    if "=" in entry.name and not entry.name.startswith((".", "_")) \
                            and entry.is_dir():
                        nxt.append((f"{rel}/{entry.name}", Path(entry.path)))
            level = nxt
        for rel, path in sorted(level):
            try:
                yield rel, path.stat()
            except FileNotFoundError:  # removed while we listed
                continue


def schema_id(columns: list[list[str]]) -> str:
    """16 hex digits of the SHA-256 of a schema's `[name, type]` list."""
    return hashlib.sha256(json.dumps(columns).encode()).hexdigest()[:16]


def scan_partition(root: Path, rel: str, st: os.stat_result, index: FileIndex) -> PartitionEntry:
    """Read the footers of the Parquet files directly inside partition `rel` (not `raw/`, not
    the stored intervals `INTERVALS_FILE`, a cache no view reads), adding their schemas to
    `index.schemas`. A file that is not readable Parquet raises ValueError naming it."""
    entry = PartitionEntry(st.st_ino, st.st_mtime_ns)
    for item in sorted(os.scandir(Path(root) / rel), key=lambda e: e.name):
        if not item.name.endswith(".parquet") or item.name.startswith(".") \
                or item.name == INTERVALS_FILE or not item.is_file():
            continue
        try:
            schema = pq.read_schema(item.path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError
            raise ValueError(f"{item.path}: not a readable Parquet file ({exc})") from exc
        columns = [[f.name, str(f.type)] for f in schema]
        sid = schema_id(columns)
        index.schemas.setdefault(sid, columns)
        entry.files[item.name] = sid
    return entry


def reconcile(root: Path, index: FileIndex | None) -> tuple[FileIndex, bool]:
    """The index brought up to date with the partition directories on disk: entries whose
    directory is unchanged are kept, new or replaced partitions are read, vanished ones
    dropped. Returns `(index, changed)`."""
    old = index or FileIndex()
    new = FileIndex(schemas=dict(old.schemas))
    changed = index is None
    for rel, st in _partition_dirs(root):
        entry = old.partitions.get(rel)
        if entry is None or entry.dir_ino != st.st_ino or entry.dir_mtime_ns != st.st_mtime_ns:
            try:
                entry = scan_partition(root, rel, st, new)
            except FileNotFoundError:  # replaced or removed while we read it
                continue
            changed = True
        new.partitions[rel] = entry
    changed = changed or old.partitions.keys() != new.partitions.keys()
    return new, changed


def current_files(root: Path) -> FileIndex:
    """The files of the lake as they are now (reader side: no lock, nothing written)."""
    return reconcile(Path(root), load_index(Path(root)))[0]


class _IndexLock:
    """Exclusive `flock` on `<lake>/_catalog/lock` for the duration of a `with` block."""

    def __init__(self, root: Path) -> None:
        self._path = Path(root) / CATALOG_DIR / LOCK_NAME
        self._fd = -1

    def __enter__(self) -> "_IndexLock":
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _write(root: Path, index: FileIndex) -> None:
    from .durable import atomic_write_text

    atomic_write_text(index_path(root), index.to_json())


def update_index(root: Path) -> FileIndex:
    """Writer side: under the lock, reconcile the stored index with the disk and replace it
    atomically if anything changed. Returns the index now stored."""
    root = Path(root)
    with _IndexLock(root):
        index, changed = reconcile(root, load_index(root))
        if changed:
            _write(root, index)
    return index


def store_index(root: Path, index: FileIndex) -> None:
    """Under the lock, replace the index with `index` (built by a writer that knows every
    partition's schemas already: a bucket lake's session, from its commit log)."""
    with _IndexLock(Path(root)):
        _write(Path(root), index)


def rebuild_index(root: Path) -> FileIndex:
    """Under the lock, read every partition's footers (the old index is ignored, so a deleted
    or corrupt one is restored) and replace the index atomically. Returns it."""
    root = Path(root)
    with _IndexLock(root):
        index, _ = reconcile(root, FileIndex())
        _write(root, index)
    return index


__all__ = ["CATALOG_DIR", "FileIndex", "INDEXED_KINDS", "PartitionEntry", "current_files",
           "index_path", "load_index", "rebuild_index", "reconcile", "store_index", "update_index"]
