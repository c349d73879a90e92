"""`frames.parquet` is written by Arrow's writer: the same bytes in any process (whatever
polars' thread count, which wrote it before), the same values and types as the table."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from twinlake.ingest.fr3_stack import recording_csv as fr3_csv
from twinlake.ingest.pipeline import ROW_GROUP_ROWS, write_frames_parquet
from twinlake.ingest.samples import SampleSpec, write_sample

_WRITE = """
import sys
from pathlib import Path
from twinlake.ingest.fr3_stack import recording_csv as fr3_csv
from twinlake.ingest.pipeline import write_frames_parquet
csv = Path(sys.argv[1])
frames, _ = fr3_csv.parse_frames(csv, fr3_csv.read_header(csv), 2, False)
write_frames_parquet(frames, Path(sys.argv[2]))
"""


def test_same_bytes_for_any_thread_count(tmp_path):
    csv = write_sample(tmp_path / "a.csv", SampleSpec(rows=ROW_GROUP_ROWS + 17,
                                                      nan_tau_rows=(3,), idle_rows=50))
    for threads in (1, 2):
        env = dict(os.environ, POLARS_MAX_THREADS=str(threads))
        subprocess.run([sys.executable, "-c", _WRITE, str(csv), str(tmp_path / f"{threads}.pq")],
                       check=True, env=env)
    assert (tmp_path / "1.pq").read_bytes() == (tmp_path / "2.pq").read_bytes()
    frames, _ = fr3_csv.parse_frames(csv, fr3_csv.read_header(csv), 2, False)
    back = pq.ParquetFile(tmp_path / "1.pq")
    assert back.metadata.num_row_groups == 2
    assert back.metadata.row_group(0).num_rows == ROW_GROUP_ROWS
    table = back.read()
    assert table.schema.names == frames.schema.names
    assert table.schema.types == frames.schema.types
    for name in frames.column_names:  # nulls where the table has them, NaN bit for bit
        assert _bits(table.column(name)) == _bits(frames.column(name)), name


def _bits(column: pa.ChunkedArray) -> tuple[list, list]:
    """(null mask, values with nulls as 0; a float as its 64 bits)."""
    values = pc.fill_null(column, False if pa.types.is_boolean(column.type) else 0).to_numpy(
        zero_copy_only=False)
    if values.dtype.kind == "f":
        values = values.view(np.uint64)
    return column.is_null().to_pylist(), values.tolist()


def test_every_table_is_written_by_arrow(tmp_path):
    table = pa.table({"seq": pa.array([1, 2], pa.int64()), "note": ["a", "b"]})
    write_frames_parquet(table, tmp_path / "t.parquet")
    back = pq.ParquetFile(tmp_path / "t.parquet")
    assert back.metadata.created_by.startswith("parquet-cpp-arrow")
    assert back.read().equals(table)
    numbers = pa.table({"seq": pa.array([1, 2], pa.int64()), "x": [0.5, float("nan")]})
    write_frames_parquet(numbers, tmp_path / "n.parquet")
    assert pq.ParquetFile(tmp_path / "n.parquet").metadata.created_by.startswith("parquet-cpp-arrow")
    back = pq.read_table(tmp_path / "n.parquet")
    assert back.schema == numbers.schema and np.isnan(back.column("x")[1].as_py())
