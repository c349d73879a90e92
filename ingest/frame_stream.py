"""A run's frames through the pipeline a chunk at a time: tick grid and `stale`, validation,
run statistics and `frames.parquet`, so an ingest holds about one chunk, not the file.

A reader of large files (`IngestUnit.more_frames`) hands its frames over in chunks; every
other reader's whole table is the one chunk. Each chunk is judged beside the last rows of the
one before (stale repeats, seq order, gaps, switches: `tick_grid.with_stale`,
`runstats.FrameStats`), so the results are those of the whole table. `FramesWriter` writes
`frames.parquet` on a background thread in row groups of exactly `ROW_GROUP_ROWS` rows
whatever the chunking: the bytes of one write of the whole table.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .registry import IngestError, IngestUnit
from .runstats import FrameStats
from .tick_grid import TimeOrder, frames_on_grid, with_stale
from .validate import validate_frames

PARQUET_COMPRESSION = "snappy"  # DuckDB's default too; ~20% faster to write than zstd
ROW_GROUP_ROWS = 61_440
"""Rows of a frames.parquet row group: half DuckDB's own (122 880), so the group the writer holds
while it fills (95 columns, ~47 MB) bounds the ingest's peak less (bench/RESULTS.md, "Ingest speed
and per-worker memory"); a run's scan still has a group per thread."""


@contextmanager
def ingest_allocations() -> Iterator[None]:
    """While the block runs: Arrow's buffers from the system allocator and numpy's large
    arrays on base (4 KiB) pages; both as they were before it afterwards (a buffer is freed by
    the pool that made it). An ingest touches each chunk's arrays once, so huge pages buy it
    nothing, and both defaults ask for them: Arrow's mimalloc pool and numpy (every array of
    4 MiB or more) madvise transparent huge pages, which a kernel with `defrag = madvise`
    (common) serves with direct compaction and a zeroed 2 MiB page per fault. On the 600 000-row
    bench file that was 0.3-0.7 s of system time of a ~3 s ingest and ~80 MB of peak RSS
    (bench/RESULTS.md, "Ingest: the allocators, overlap and start-up")."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray

    pool = pa.default_memory_pool()
    huge = multiarray._set_madvise_hugepage(False)
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(pool)
        multiarray._set_madvise_hugepage(huge)


class FramesWriter:
    """`path` (frames.parquet) written by a background thread from the chunks `put` to it,
    at most `AHEAD` waiting; `close` joins it and raises its error if it had one. The file is
    not fsynced here: the ingest starts that on a thread of its own (`RawStore.sync_in_background`)
    so the disk flushes while the run's intervals are computed, and the publish fsyncs every file."""

    AHEAD = 1

    def __init__(self, path: Path, contiguous: bool = False) -> None:
        self.path, self.contiguous = path, contiguous
        self._queue: queue.Queue = queue.Queue(maxsize=self.AHEAD)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="twinlake-frames", daemon=True)
        self._thread.start()

    def put(self, chunk: pa.Table) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(chunk)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abandon(self) -> None:
        """Stop the thread without finishing the file (the ingest failed)."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        writer, pending = None, None
        try:
            while (chunk := self._queue.get()) is not None:
                pending = chunk if pending is None else pa.concat_tables([pending, chunk])
                full = pending.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
                if full:
                    writer = writer or self._open(pending.schema)
                    _write_groups(writer, pending.slice(0, full), self.contiguous)
                    pending = pending.slice(full)
            if pending is not None and (pending.num_rows or writer is None):
                writer = writer or self._open(pending.schema)
                _write_groups(writer, pending, self.contiguous)
            if writer is not None:
                writer.close()
        except BaseException as exc:  # noqa: BLE001  raised in the ingest's thread
            self._error = exc
            while self._queue.get() is not None:  # let put() return until close()
                pass

    def _open(self, schema: pa.Schema) -> pq.ParquetWriter:
        """Snappy, no dictionary encoding: dictionaries are useless for 1 kHz float signals
        and trying them costs ~5x the write time (the options of `pq.write_table` else)."""
        return pq.ParquetWriter(self.path, schema, compression=PARQUET_COMPRESSION,
                                use_dictionary=False)


def _write_groups(writer: pq.ParquetWriter, table: pa.Table, contiguous: bool = False) -> None:
    """Row groups of `ROW_GROUP_ROWS` rows, as a write of the whole table slices them. A
    group spanning two chunks is written as it is, not copied: a column of 8-byte values in
    a group is 491 520 bytes, under the writer's 1 MiB data page, so it is one page whichever
    batches the writer is handed (checked: the same bytes as one `pq.write_table`).
    `contiguous`: each group copied into one piece first, for a table with wider columns
    (strings), whose pages the writer cuts where the pieces' batches end."""
    for start in range(0, table.num_rows, ROW_GROUP_ROWS):
        group = table.slice(start, ROW_GROUP_ROWS)
        writer.write_table(group.combine_chunks() if contiguous else group,
                           row_group_size=ROW_GROUP_ROWS)


def write_chunks(chunks: Iterator[pa.Table], out: Path) -> None:
    """A table given a chunk at a time (`IngestUnit.extra_chunks`) written to `out` as
    `FramesWriter` writes frames, each row group in one piece: the bytes of one write of the
    whole table (`pipeline.write_parquet`) when no group holds pieces of two chunks, and the
    same bytes however the table is chunked."""
    writer = FramesWriter(out, contiguous=True)
    try:
        for chunk in chunks:
            writer.put(chunk)
    except BaseException:
        writer.abandon()
        raise
    writer.close()


def stream_frames(path: Path, unit: IngestUnit, out: Path) -> dict:
    """Place, flag, validate and count the unit's frames chunk by chunk, writing them to
    `out`; the run statistics (`runstats.frame_stats` of the whole run). Raises IngestError
    naming the line (or frame) of the first violation."""
    writer = FramesWriter(out)
    try:
        stats = _each_chunk(path, unit, writer)
    except BaseException:
        writer.abandon()
        raise
    writer.close()
    return_freed_memory()
    return stats


def return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`; nothing where
    there is none). The stream's chunks are freed by now, but the heap keeps their pages, and
    the run's intervals query, next, takes its own memory (bench/RESULTS.md, "Ingest: the
    allocators, overlap and start-up": ~120 MB back after a 3.6 M-row stream)."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return
    trim(0)


def _each_chunk(path: Path, unit: IngestUnit, writer: FramesWriter) -> dict:
    version = unit.run_fields.get("source_version")
    stats, before, line, rows = FrameStats(), None, unit.first_line, 0
    order = TimeOrder()
    for k, chunk in enumerate(_chunks(unit)):
        if k == 0:
            unit.frames = chunk = frames_on_grid(path, unit)
        else:
            if "seq" not in chunk.column_names:
                raise IngestError(path, "a chunk of frames without seq", field="seq")
            chunk = with_stale(_conform(chunk), before)
        validate_frames(path, chunk, version, line, rows)
        _check_order(path, before, chunk, line, rows)
        writer.put(chunk)
        stats.add(chunk)
        if "t_s" in chunk.column_names:
            order.add(chunk.column("t_s").to_numpy(zero_copy_only=False))
        before = chunk.slice(max(chunk.num_rows - 2, 0))
        line = None if line is None else line + chunk.num_rows
        rows += chunk.num_rows
    unit.more_frames = None
    if (reason := order.reason()) is not None:
        unit.reasons.append(reason)
    return stats.result()


def _chunks(unit: IngestUnit) -> Iterator[pa.Table]:
    yield unit.frames
    if unit.more_frames is not None:
        yield from unit.more_frames


def _conform(chunk: pa.Table) -> pa.Table:
    from .canonical import conform_frames

    return conform_frames(chunk)


def _check_order(path: Path, before: pa.Table | None, chunk: pa.Table, line: int | None,
                 rows: int) -> None:
    """seq strictly increasing across a chunk boundary (`validate` checks within a chunk)."""
    if before is None or not before.num_rows or not chunk.num_rows:
        return
    last, first = before.column("seq")[-1].as_py(), chunk.column("seq")[0].as_py()
    if first <= last:
        what = f"duplicate seq {first}" if first == last else \
            f"seq not strictly increasing: {first} after {last}"
        raise IngestError(path, what + ("" if line is not None else f" at frame {rows}"),
                          line=line, field="seq", kind="seq")
