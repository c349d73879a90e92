"""What overlaps in an ingest and must not change its result: the next CSV span parsed while a
chunk is checked (`decimal_csv.read_decimal_chunks`), the first input's archive started before
the plan reaches it (`rawstore.archive_ahead`), and the allocators an ingest runs under
(`frame_stream.ingest_allocations`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from twinlake.ingest import ReadOptions, ingest_paths
from twinlake.ingest import decimal_csv, rawstore
from twinlake.ingest.decimal_csv import read_decimal_chunks, read_decimal_csv
from twinlake.ingest.frame_stream import ingest_allocations

HEADER = ["seq", "a", "b"]
TYPES = {"seq": pa.int64(), "a": pa.float64(), "b": pa.float64()}


def _csv(rows: int, bad_row: int | None = None) -> bytes:
    lines = [",".join(HEADER)]
    for i in range(rows):
        lines.append(f"{i},{i * 0.25:.12g},{-i / 7:.12g}" if i != bad_row else f"{i},1.0,x")
    return ("\n".join(lines) + "\n").encode()


def _chunks(text: bytes, chunk_bytes: int):
    data = np.frombuffer(text, dtype=np.uint8)
    released: list[tuple[int, int]] = []
    out = list(read_decimal_chunks(data, HEADER, TYPES, chunk_bytes, threads=2,
                                   release=lambda lo, hi: released.append((lo, hi))))
    return out, released


@pytest.mark.parametrize("cores", [1, 2])  # one core: no span parsed ahead
def test_spans_parsed_ahead_give_the_whole_files_table_and_release_each_parsed_span_once(cores, monkeypatch):
    monkeypatch.setattr(decimal_csv, "available_cores", lambda: cores)
    text = _csv(20_000)
    out, released = _chunks(text, 16_384)
    assert len(out) > 10 and all(table is not None for _, table in out)
    whole = read_decimal_csv(pa.py_buffer(text), HEADER, TYPES)
    assert pa.concat_tables([t for _, t in out]).equals(whole)
    first = text.index(b"\n") + 1
    assert released[0][0] == first and released[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(released, released[1:]))  # in order, no gap or overlap
    assert [lo for lo, _ in out] == [lo for lo, _ in released]


def test_a_span_that_declines_ends_the_chunks_unreleased_where_the_general_parser_starts():
    text = _csv(20_000, bad_row=15_000)
    out, released = _chunks(text, 16_384)
    (bad_lo, bad_table), parsed = out[-1], out[:-1]
    assert bad_table is None and all(t is not None for _, t in parsed)
    assert sum(t.num_rows for _, t in parsed) < 15_000 <= sum(t.num_rows for _, t in parsed) + \
        text[bad_lo:].count(b"\n")
    assert released and released[-1][1] == bad_lo  # the declined span's bytes stay readable


def test_an_archive_started_ahead_is_the_ingests_and_one_nothing_adopts_is_removed(lake, make_csv):
    ingested, other = make_csv("run001.csv", rows=3000), make_csv("run002.csv", rows=500)
    rawstore.archive_ahead(lake, ingested)
    rawstore.archive_ahead(lake, other)  # started, but its input is not in this ingest
    outcomes = list(ingest_paths(lake, [ingested], ReadOptions(robot="r")))
    assert [o.status for o in outcomes] == ["published"]
    assert not rawstore._AHEAD and not any(lake.staging_dir.iterdir())
    part = lake.root / "runs/robot=r/run=run001"
    assert rawstore.read_raw(part / "raw/run001.csv.zst") == ingested.read_bytes()
    fresh = lake.root.parent / "fresh"
    from twinlake.catalog import Lake

    list(ingest_paths(Lake(fresh), [ingested], ReadOptions(robot="r")))  # no archive ahead
    for name in ("frames.parquet", "raw/run001.csv.zst"):
        assert (part / name).read_bytes() == (fresh / "runs/robot=r/run=run001" / name).read_bytes()
    assert pq.read_table(part / "run.parquet").column("raw_sha256").equals(
        pq.read_table(fresh / "runs/robot=r/run=run001/run.parquet").column("raw_sha256"))


def test_the_allocators_are_restored_after_an_ingest():
    try:
        from numpy._core import multiarray
    except ImportError:
        from numpy.core import multiarray
    pool = pa.default_memory_pool()
    huge = multiarray._set_madvise_hugepage(True)
    try:
        with ingest_allocations():
            assert pa.default_memory_pool().backend_name == "system"
            assert multiarray._set_madvise_hugepage(False) is False  # off inside the block
        assert pa.default_memory_pool().backend_name == pool.backend_name
        assert multiarray._set_madvise_hugepage(True) is True  # on again after it
    finally:
        multiarray._set_madvise_hugepage(huge)


def test_a_spans_matrix_is_reused_only_once_no_table_refers_to_it(monkeypatch):
    text = _csv(40_000)
    data = np.frombuffer(text, dtype=np.uint8)
    whole = read_decimal_csv(pa.py_buffer(text), HEADER, TYPES)
    handed: list[int] = []
    matrices = decimal_csv.OutputBuffers.matrices

    def spy(self, *args):
        floats, ints = matrices(self, *args)
        handed.append(id(floats))
        return floats, ints

    monkeypatch.setattr(decimal_csv.OutputBuffers, "matrices", spy)
    kept = [t for _, t in read_decimal_chunks(data, HEADER, TYPES, 16_384)]
    assert len(set(handed)) == len(handed) > 20  # every span's tables alive: never a shared matrix
    assert pa.concat_tables(kept).equals(whole)
    handed.clear()
    rows = sum(t.num_rows for _, t in read_decimal_chunks(data, HEADER, TYPES, 16_384))  # each dropped at once
    assert rows == whole.num_rows and len(handed) > 20 and len(set(handed)) <= 3
