"""The lake's commit log: an append-only sequence of versions, each one published partition.

    <lake>/_log/00000000000000000001.json   {"version": 1, "partition": "runs/robot=a/run=r1",
                                             "data_dir": "runs/robot=a/run=r1/c-<id>", "files": [...],
                                             "replace": false, "created_utc": "..."}

Version N is the object `_log/<N, 20 digits>.json`, created with "only if absent" (S3
`If-None-Match: *`, locally a hard link; catalog/object_store.py): of two writers that try
the same version exactly one succeeds; the other reads the versions it missed and tries the
next one, or, if one of them published its partition, raises `PartitionExists`. An entry is
never rewritten or deleted. The lake at version V is the fold of entries 1..V: for each
partition, its latest entry (`Snapshot`). On object storage this log is what makes a
partition visible: readers list the log, never the data prefixes. A local lake appends an
entry after each publish's rename too, so its versions exist for `--as-of` and fit records.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from .object_store import Store

LOG_DIR = "_log"
CHECKPOINT_DIR = f"{LOG_DIR}/_checkpoints"
CHECKPOINT_EVERY = 100
"""A writer that commits a version divisible by this also writes the snapshot at it, so a
reader reads one checkpoint and the entries after it, not the whole log."""
_DIGITS = 20


@dataclass(frozen=True)
class LogFile:
    """One file of a committed partition: its path relative to the commit's `data_dir`, its
    size [bytes], and for a Parquet file directly in it, its schema id (file_index.schema_id)."""

    name: str
    size_bytes: int
    schema_id: str | None = None


@dataclass(frozen=True)
class Commit:
    """One version of the lake: `partition` (e.g. `runs/robot=a/run=r1`) is, from `version` on,
    the files under `data_dir` (relative to the lake root); `replace` when it superseded an
    earlier commit of the same partition."""

    version: int
    partition: str
    data_dir: str
    files: tuple[LogFile, ...]
    replace: bool = False
    created_utc: str = ""

    def to_json(self) -> bytes:
        body = asdict(self)
        body["files"] = [asdict(f) for f in self.files]
        return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Commit:
        body = json.loads(data)
        body["files"] = tuple(LogFile(**f) for f in body["files"])
        return cls(**body)


@dataclass
class Snapshot:
    """The lake at `version` (0: empty): each partition's latest commit, and every data_dir
    ever committed up to it (what orphan reclaim must never delete)."""

    version: int = 0
    partitions: dict[str, Commit] = field(default_factory=dict)
    committed_dirs: set[str] = field(default_factory=set)

    def apply(self, commit: Commit) -> None:
        self.version = commit.version
        self.partitions[commit.partition] = commit
        self.committed_dirs.add(commit.data_dir)

    def to_json(self) -> bytes:
        body = {"version": self.version, "committed_dirs": sorted(self.committed_dirs),
                "partitions": [json.loads(c.to_json()) for _, c in sorted(self.partitions.items())]}
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Snapshot:
        body = json.loads(data)
        commits = [Commit.from_json(json.dumps(c).encode()) for c in body["partitions"]]
        return cls(body["version"], {c.partition: c for c in commits}, set(body["committed_dirs"]))


class PartitionCommitted(FileExistsError):
    """Another writer committed the partition first (and `replace` was not asked for)."""

    def __init__(self, partition: str, version: int) -> None:
        super().__init__(f"partition {partition} is already committed (version {version})")
        self.partition, self.version = partition, version


def _versions(names: list[str]) -> list[int]:
    out = []
    for name in names:
        stem, _, ext = name.partition(".")
        if ext == "json" and len(stem) == _DIGITS and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def entry_name(version: int) -> str:
    return f"{LOG_DIR}/{version:0{_DIGITS}d}.json"


class CommitLog:
    """The commit log of the lake behind `store` (LocalStore or S3Store)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def versions(self, after: int = 0) -> list[int]:
        """The committed versions above `after`, ascending (one listing of `_log/`, starting
        past `after`'s entry)."""
        return _versions(self.store.list_names(LOG_DIR, after=entry_name(after).rpartition("/")[2] if after else ""))

    def latest(self) -> int:
        """The latest committed version (0: none), listing only past the latest checkpoint."""
        base = max(_versions(self.store.list_names(CHECKPOINT_DIR)), default=0)
        return max(self.versions(after=base), default=base)

    def _checkpoint(self, as_of: int | None, above: int) -> Snapshot | None:
        """The latest checkpoint at or below `as_of` (None: any) and above version `above`."""
        usable = [v for v in _versions(self.store.list_names(CHECKPOINT_DIR))
                  if v > above and (as_of is None or v <= as_of)]
        for v in reversed(usable):
            data = self.store.read(f"{CHECKPOINT_DIR}/{v:0{_DIGITS}d}.json")
            if data is not None:
                return Snapshot.from_json(data)
        return None

    def write_checkpoint(self, snap: Snapshot) -> None:
        """Store `snap` as the checkpoint of its version (only if absent: any writer may)."""
        self.store.put_new(f"{CHECKPOINT_DIR}/{snap.version:0{_DIGITS}d}.json", snap.to_json())

    def read(self, versions: list[int]) -> list[Commit]:
        """The entries of `versions` (fetched concurrently: one GET each on object storage)."""
        def one(v: int) -> Commit:
            data = self.store.read(entry_name(v))
            if data is None:
                raise FileNotFoundError(f"commit log entry {entry_name(v)} is listed but absent")
            return Commit.from_json(data)

        if len(versions) < 4:
            return [one(v) for v in versions]
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(one, versions))

    def snapshot(self, as_of: int | None = None, since: Snapshot | None = None) -> Snapshot:
        """The lake at version `as_of` (None: the latest), reading only the entries after
        `since` (a snapshot read before, updated in place and returned) when given.
        ValueError if `as_of` is above the latest version."""
        snap = since if since is not None else Snapshot()
        if as_of is None or as_of > snap.version:
            snap = self._checkpoint(as_of, snap.version) or snap
        versions = [v for v in self.versions(after=snap.version) if as_of is None or v <= as_of]
        for commit in self.read(versions):
            snap.apply(commit)
        if as_of is not None and as_of > snap.version:
            raise ValueError(f"version {as_of} is not in the lake's commit log (latest: {snap.version})")
        return snap

    def commit(self, partition: str, data_dir: str, files: tuple[LogFile, ...], *,
               replace: bool = False, snap: Snapshot | None = None) -> Commit:
        """Append one version making `partition` the files under `data_dir`. Raises
        `PartitionCommitted` when the partition is committed already and not `replace`
        (also when another writer commits it first, while this one retries)."""
        snap = self.snapshot(since=snap)
        while True:
            have = snap.partitions.get(partition)
            if have is not None and not replace:
                raise PartitionCommitted(partition, have.version)
            entry = Commit(snap.version + 1, partition, data_dir, files, replace=have is not None,
                           created_utc=datetime.now(timezone.utc).isoformat())
            if self.store.put_new(entry_name(entry.version), entry.to_json()):
                if entry.version % CHECKPOINT_EVERY == 0:
                    snap.apply(entry)
                    self.write_checkpoint(snap)
                return entry
            snap = self.snapshot(since=snap)  # lost that version to another writer: catch up
            if snap.version < entry.version:
                winner = self.store.read(entry_name(entry.version))
                if winner is not None:  # a listing behind the write: the winner itself
                    snap.apply(Commit.from_json(winner))
                else:  # S3's 409: a concurrent conditional write still in flight; try again
                    time.sleep(0.05)

    def append(self, partition: str, data_dir: str, files: tuple[LogFile, ...], *, replace: bool,
               known: int | None = None) -> Commit:
        """Append one version without reading the entries (a local lake, whose partition is
        visible already: nothing to check); the next free version, retried when taken.
        `known`: a version known to exist (this process's last append), tried past without
        a listing (a taken version only costs one refused create)."""
        latest = self.latest() if known is None else known
        while True:
            entry = Commit(latest + 1, partition, data_dir, files, replace=replace,
                           created_utc=datetime.now(timezone.utc).isoformat())
            if self.store.put_new(entry_name(entry.version), entry.to_json()):
                if entry.version % CHECKPOINT_EVERY == 0:  # the last checkpoint + 100 entries
                    self.write_checkpoint(self.snapshot(as_of=entry.version))
                return entry
            latest = max(self.versions(after=latest), default=entry.version)
