"""Partition files prepared before publish, on background threads.

Keeps original files byte for byte: SHA-256 of the original bytes plus a copy under the
partition's `raw/`, compressed by default (`raw/<name>.zst`; codecs in `RAW_CODECS`:
zstd, lz4, or none for a plain kernel-side copy). The primary file is archived on a
background thread overlapping CSV parsing: one pass over a memory map of it (the page
cache the reader parses from too) cuts it into `CHUNK_BYTES` blocks, this thread hashes
each block while `ARCHIVE_THREADS` workers compress blocks into independent frames, written
in input order (so the bytes do not depend on the thread count or timing). hashlib and
Arrow's `Codec.compress` release the GIL. Small companion files are added synchronously.
Large tables (frames) are written to Parquet on another thread, overlapping validation.
Each file is fsynced by the thread that wrote it, so the publish's own fsync finds little
left to flush. Everything lands in a private `_staging/prep-*` directory that `move_into`
moves into the partition being published.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..catalog import Lake, new_staging_dir
from ..catalog.durable import fsync_path
from ..contracts.cores import available_cores

CHUNK_BYTES = 1 << 23
"""Input bytes per compressed frame (8 MiB: smaller frames cost more CPU, larger save none)."""
RAW_CODECS = {"zstd": ".zst", "lz4": ".lz4", "none": ""}
"""Codec of the kept raw copy → file suffix. zstd (default, level `ZSTD_LEVEL`) keeps ~31%
of a CSV v2's bytes at ~0.4-0.45 GB/s per core; lz4 ~62% at ~0.6 GB/s; none copies in the
kernel (no CPU)."""
DEFAULT_RAW_CODEC = "zstd"
ZSTD_LEVEL = 1
"""zstd level of the archive. Measured on the 527 MB bench CSV v2 (CPU s, kept fraction):
level 3 3.6 s / 36%, 2 1.7 s / 33%, 1 1.2-1.3 s / 31%, -1 1.1 s / 56%, -3 0.9 s / 60%,
-10 0.7 s / 75%: on float text 1 is both the cheapest level that entropy-codes the digits
and the smallest output; every faster level nearly doubles the archive."""
ARCHIVE_THREADS = 2
"""Workers compressing the primary file's frames (on top of the hashing thread), where the
process may run on more than one core; on one, the hashing thread compresses them itself (one
block in memory instead of four: the bytes are the same)."""


@dataclass(frozen=True)
class StoredFile:
    """One kept raw file (fields of catalog.RAW_FILE_TYPE)."""

    name: str
    role: str
    sha256: str
    size_bytes: int
    stored_as: str

    def as_row(self) -> dict:
        return {"name": self.name, "role": self.role, "sha256": self.sha256,
                "size_bytes": self.size_bytes, "stored_as": self.stored_as}


def store_file(src: Path, raw_dir: Path, role: str, codec: str = DEFAULT_RAW_CODEC,
               chunk_bytes: int = CHUNK_BYTES, threads: int = 1) -> StoredFile:
    """Hash `src` and write `raw_dir/<name><suffix>` in one pass over a memory map of it,
    then fsync it. Compressed copies are a sequence of independent frames of `chunk_bytes`
    input each (a valid zstd / lz4-frame stream; one-shot frames cost ~25% less CPU than a
    stream), compressed by `threads` workers while this thread hashes; same bytes for any
    `threads`."""
    if codec not in RAW_CODECS:
        raise ValueError(f"raw codec {codec!r}: expected one of {', '.join(RAW_CODECS)}")
    dst = raw_dir / f"{src.name}{RAW_CODECS[codec]}"
    size = src.stat().st_size
    mapped = _MappedFile(src, size)
    digest = hashlib.sha256()
    blocks = (mapped.block(start, min(chunk_bytes, size - start))
              for start in range(0, size, chunk_bytes))
    if codec == "none":
        shutil.copyfile(src, dst)  # sendfile/copy_file_range: no user-space copy
        for block in blocks:
            digest.update(memoryview(block))
            mapped.done(block)
    else:
        level = ZSTD_LEVEL if codec == "zstd" else None
        with open(dst, "wb") as out:
            for frame in _frames(blocks, pa.Codec(codec, level), digest, threads):
                out.write(frame)
                mapped.done_next()
    fsync_path(dst)
    return StoredFile(src.name, role, digest.hexdigest(), size, f"raw/{dst.name}")


class _MappedFile:
    """A file's memory map read once in order: each block's pages are dropped from this
    process (`MADV_DONTNEED`; the page cache keeps them) once hashed and compressed, so the
    archive's resident memory does not grow with the file."""

    def __init__(self, src: Path, size: int) -> None:
        self._map = None
        if size:
            with open(src, "rb") as fh:
                self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._spans: deque = deque()

    def block(self, start: int, length: int) -> pa.Buffer:
        self._spans.append((start, length))
        return pa.py_buffer(memoryview(self._map)[start:start + length])

    def done_next(self) -> None:
        """The oldest block handed out is hashed and compressed: drop its pages."""
        start, length = self._spans.popleft()
        lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # a page shared with the next block stays
        hi = (start + length) // mmap.PAGESIZE * mmap.PAGESIZE
        if hi > lo:
            self._map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    def done(self, _block: pa.Buffer) -> None:
        self.done_next()


def _frames(blocks: Iterator[pa.Buffer], codec: pa.Codec, digest, threads: int
            ) -> Iterator[pa.Buffer]:
    """The compressed frames of `blocks`, in order, each block hashed into `digest` on this
    thread while up to 2 × `threads` blocks are compressed ahead on `threads` workers
    (`Codec.compress` keeps no state between calls: one codec serves every worker)."""
    if threads <= 1:
        for block in blocks:
            digest.update(memoryview(block))
            yield codec.compress(block)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="twinlake-archive") as pool:
        ahead: deque = deque()
        for block in blocks:
            ahead.append(pool.submit(codec.compress, block))
            digest.update(memoryview(block))
            if len(ahead) >= 2 * threads:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def read_raw(stored: Path) -> bytes:
    """The original bytes of a kept raw file (codec from its suffix)."""
    codec = next((c for c, sfx in RAW_CODECS.items() if sfx and stored.name.endswith(sfx)), None)
    with pa.input_stream(str(stored), compression=codec) as fh:
        return fh.read()


class _Background:
    """Threads of one kind and the errors they raised: `start(name, work)` runs `work()` on a
    daemon thread; `join()` waits for every one started and raises the first error (again at a
    later `join`), `join(report=False)` only waits."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def start(self, name: str, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # noqa: BLE001  raised by join(), in the ingest's thread
                self._errors.append(exc)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self, report: bool = True) -> None:
        for thread in self._threads:
            thread.join()
        self._threads = []
        if report and self._errors:
            raise self._errors[0]


class RawStore:
    """Raw copies (and pre-written tables) built in their own `_staging/prep-*` directory,
    moved into a partition by `move_into(partition_dir)`; `discard()` removes them if the
    ingest does not publish."""

    def __init__(self, lake: Lake, codec: str = DEFAULT_RAW_CODEC) -> None:
        if codec not in RAW_CODECS:
            raise ValueError(f"raw codec {codec!r}: expected one of {', '.join(RAW_CODECS)}")
        self.codec = codec
        self.dir = new_staging_dir(lake, "prep")
        (self.dir / "raw").mkdir()
        self._stored: dict[str, StoredFile] = {}
        self._primary: str | None = None
        self._archive, self._writes, self._syncs = _Background(), _Background(), _Background()

    def write_async(self, name: str, write: Callable[[Path], None]) -> None:
        """Run `write(self.dir / name)` on a background thread (e.g. a Parquet write)."""

        def work() -> None:
            write(self.dir / name)
            fsync_path(self.dir / name)

        self._writes.start(f"twinlake-write-{name}", work)  # reported by wait_writes()

    def sync_in_background(self, name: str) -> None:
        """Start flushing `self.dir / name` (written, not yet fsynced) to disk on a thread:
        the flush then overlaps the work before the publish, whose own fsync finds it done.
        `wait_syncs` joins it and raises its error (an fsync error is reported once, to this
        thread's descriptor, and not again to the publish's)."""
        fd = os.open(self.dir / name, os.O_RDONLY)  # the file may be moved meanwhile: fd, not path

        def work() -> None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        self._syncs.start(f"twinlake-sync-{name}", work)

    def wait_syncs(self) -> None:
        self._syncs.join()

    @property
    def started(self) -> bool:
        """True once `start_primary` ran."""
        return self._primary is not None

    def start_primary(self, src: Path, role: str = "recording") -> None:
        """Begin hashing + compressing `src` on a background thread (with `ARCHIVE_THREADS`
        compressing workers)."""
        self._primary = src.name

        def work() -> None:
            threads = ARCHIVE_THREADS if available_cores() > 1 else 1
            self._stored[src.name] = store_file(src, self.dir / "raw", role, self.codec, threads=threads)

        self._archive.start("twinlake-rawstore", work)  # reported by wait()

    def add(self, src: Path, role: str) -> None:
        """Hash + compress a (small) companion file now; the primary is never added twice."""
        if src.name != self._primary and src.name not in self._stored:
            self._stored[src.name] = store_file(src, self.dir / "raw", role, self.codec)

    def wait(self) -> list[StoredFile]:
        """Join the background work; the stored files, primary first."""
        self._archive.join()
        first = [self._stored[self._primary]] if self._primary in self._stored else []
        return first + [f for n, f in self._stored.items() if n != self._primary]

    def sha256_of(self, name: str) -> str:
        self.wait()
        return self._stored[name].sha256

    def wait_writes(self) -> None:
        self._writes.join()

    def move_into(self, partition_dir: Path) -> None:
        """Move `raw/` and every pre-written file into `partition_dir` (same filesystem)."""
        self.wait()
        self.wait_writes()
        for entry in self.dir.iterdir():
            os.rename(entry, partition_dir / entry.name)

    def discard(self) -> None:
        for background in (self._archive, self._writes, self._syncs):
            background.join(report=False)
        shutil.rmtree(self.dir, ignore_errors=True)


_AHEAD: dict[tuple[str, str], RawStore] = {}
"""Archives started before their input's ingest (`archive_ahead`), by (resolved path, codec)."""


def archive_ahead(lake: Lake, path: Path, codec: str = DEFAULT_RAW_CODEC) -> None:
    """Start archiving file `path` (its hash and compressed copy, `RawStore.start_primary`) now,
    before the ingest reaches it: a command starts its first input's archive as soon as it has
    the lake, so the work runs on the core that the rest of its start-up leaves idle. The
    input's ingest adopts it (`adopt_ahead`); `discard_ahead` removes what none adopted."""
    key = (str(path.resolve()), codec)
    if key in _AHEAD or not path.is_file():
        return
    store = RawStore(lake, codec)
    store.start_primary(path)
    _AHEAD[key] = store


def adopt_ahead(lake: Lake, path: Path, codec: str) -> RawStore | None:
    """The archive `archive_ahead` started for `path` in `lake`'s staging, now the caller's;
    None when there is none."""
    key = (str(path.resolve()), codec)
    store = _AHEAD.get(key)
    if store is None or store.dir.parent != lake.staging_dir:
        return None
    return _AHEAD.pop(key)


def discard_ahead() -> None:
    """Remove every archive started ahead that no ingest adopted (its input was not ingested)."""
    while _AHEAD:
        _AHEAD.popitem()[1].discard()
