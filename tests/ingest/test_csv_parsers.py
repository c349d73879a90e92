"""The polars fast path of the CSV v2 reader gives exactly the Arrow path's table, or
declines (returns None) so the Arrow path names the line and field of the problem."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ingest_helpers import column_bits

from twinlake.ingest.fr3_stack import recording_csv as fr3_csv
from twinlake.ingest.pipeline import write_parquet
from twinlake.ingest.samples import SampleSpec, write_sample


def _both(path):
    header = fr3_csv.read_header(path)
    fast = fr3_csv.polars_csv(path, header)
    arrow = fr3_csv._read_csv(path, pa.memory_map(str(path)).read_buffer(), header)
    return fast, arrow


def test_fast_path_is_bit_identical_to_arrow(tmp_path):
    path = write_sample(tmp_path / "a.csv", SampleSpec(rows=3000, gap_at=(10,),
                                                       nan_tau_rows=(5, 2999), idle_rows=40))
    text = path.read_text().splitlines(keepends=True)
    # the fr3_stack writer prints non-finite doubles as nan, -nan, inf, -inf; -0 stays -0
    cells = text[7].split(",")
    cells[3], cells[4], cells[5], cells[6] = "-nan", "inf", "-inf", "-0"
    text[7] = ",".join(cells)
    path.write_text("".join(text))
    fast, arrow = _both(path)
    assert fast is not None and fast.schema == arrow.schema and fast.num_rows == 3000
    for a, b in zip(column_bits(fast), column_bits(arrow)):
        np.testing.assert_array_equal(a, b)
    # the chunk layouts differ (polars splits per thread); the Parquet bytes do not
    for name, table in (("fast", fast), ("arrow", arrow)):
        write_parquet(fr3_csv.canonical_frames(table, 2), tmp_path / f"{name}.parquet")
    assert (tmp_path / "fast.parquet").read_bytes() == (tmp_path / "arrow.parquet").read_bytes()


@pytest.mark.parametrize("edit", [
    lambda lines: lines[:3] + ["\n"] + lines[3:],                  # empty line
    lambda lines: lines + ["\n"],                                  # empty last line
    lambda lines: lines[:3] + [lines[3].replace(",", ",,", 1)] + lines[4:],  # extra field
    lambda lines: lines[:3] + [lines[3].rsplit(",", 1)[0] + "\n"] + lines[4:],  # short row
    lambda lines: lines[:3] + [lines[3].replace(",", ",abc,", 1).replace(",", "", 1)]
    + lines[4:],                                                   # text in a number
    lambda lines: lines[:3] + ["17.0" + lines[3][lines[3].index(","):]] + lines[4:],  # 17.0
])
def test_fast_path_declines_what_it_cannot_vouch_for(tmp_path, edit):
    path = write_sample(tmp_path / "b.csv", SampleSpec(rows=50))
    path.write_text("".join(edit(path.read_text().splitlines(keepends=True))))
    header = fr3_csv.read_header(path)
    assert fr3_csv.polars_csv(path, header) is None
