"""The compiled decimal reader gives exactly Arrow's table, bit for bit, or declines (None)
so the general readers decide; never a different number. Every read here runs both kernels
(C, numba) and checks they agree bit for bit."""

from __future__ import annotations

import shutil
import sys
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest_helpers import column_bits

from twinlake.ingest import decimal_csv, decimal_native, decimal_numba
from twinlake.ingest.fr3_stack import recording_csv as fr3_csv
from twinlake.ingest.pipeline import write_frames_parquet
from twinlake.ingest.samples import SampleSpec, write_sample

TYPES = {"x": pa.float64(), "n": pa.int8()}


def _arrow(text: bytes, types: dict[str, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(pa.BufferReader(text),
                          convert_options=pacsv.ConvertOptions(column_types=types))


NUMBA = (decimal_numba.count_newlines, decimal_numba.parse_rows)
NATIVE = decimal_native.load()
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the C kernels")


@contextmanager
def _kernels(pair):
    """decimal_csv reads with `pair` (count_newlines, parse_rows) inside the block."""
    chosen = decimal_csv.kernels
    decimal_csv.kernels = lambda: pair
    try:
        yield
    finally:
        decimal_csv.kernels = chosen


def _read_both(buf: pa.Buffer, header: list[str], types: dict[str, pa.DataType], threads: int):
    """The table of the kernels this machine uses (C where built, else numba's), or None,
    after checking the other: where numba's kernels accept, the C ones give the same bits; the
    C ones also take cells outside the exact fast path (strtod), which numba's decline."""
    with _kernels(NUMBA):
        table = decimal_csv.read_decimal_csv(buf, header, types, threads=threads)
    if NATIVE is None:
        return table
    with _kernels((NATIVE.count_newlines, NATIVE.parse_rows)):
        other = decimal_csv.read_decimal_csv(buf, header, types, threads=threads)
    if table is not None:
        assert other is not None and other.schema == table.schema
        for a, b in zip(column_bits(other), column_bits(table), strict=True):
            np.testing.assert_array_equal(a, b)
    return other


def _decimal(text: bytes, types: dict[str, pa.DataType] = TYPES, threads: int = 1):
    header = [name.strip() for name in text.split(b"\n", 1)[0].decode().split(",")]
    return _read_both(pa.py_buffer(text), header, types, threads)


@needs_cc
def test_the_c_kernels_are_built_and_chosen():
    assert NATIVE is not None and decimal_native.library_path().is_file()
    assert isinstance(getattr(decimal_csv.kernels()[1], "__self__", None), decimal_native.NativeKernel)


def test_powers_of_ten_are_exact():
    assert [int(p) for p in decimal_csv._POW10] == [10 ** k for k in range(23)]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_recording_is_bit_identical_to_arrow(tmp_path, threads):
    path = write_sample(tmp_path / "a.csv", SampleSpec(rows=12_000, gap_at=(10,),
                                                       nan_tau_rows=(5, 11_999), idle_rows=40))
    lines = path.read_text().splitlines(keepends=True)
    cells = lines[7].split(",")  # the writer prints non-finite doubles as nan, -nan, inf, -inf
    cells[3], cells[4], cells[5], cells[6] = "-nan", "inf", "-inf", "-0"
    lines[7] = ",".join(cells)
    path.write_text("".join(lines))
    header = fr3_csv.read_header(path)
    buf = pa.memory_map(str(path)).read_buffer()
    assert len(decimal_csv._spans(np.frombuffer(buf, np.uint8), 1, threads)) == threads
    fast = _read_both(buf, header, fr3_csv._column_types(header), threads)
    arrow = fr3_csv._read_csv(path, buf, header)
    assert fast is not None and fast.schema == arrow.schema and fast.num_rows == 12_000
    for a, b in zip(column_bits(fast), column_bits(arrow), strict=True):
        np.testing.assert_array_equal(a, b)
    for name, table in (("fast", fast), ("arrow", arrow)):
        write_frames_parquet(fr3_csv.canonical_frames(table, 2), tmp_path / f"{name}.parquet")
    assert (tmp_path / "fast.parquet").read_bytes() == (tmp_path / "arrow.parquet").read_bytes()


_FORMATS = ["%.12g", "%.17g", "%r", "%.6f", "%.3e", "%.0f", "%.15E", "%.1f"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=False, width=64), st.sampled_from(_FORMATS),
                          st.integers(-128, 127)), min_size=1, max_size=40))
def test_every_number_it_accepts_is_arrows(cells):
    text = "x,n\n" + "".join(f"{fmt % x},{n}\n" for x, fmt, n in cells)
    fast = _decimal(text.encode())
    if fast is None:
        return
    for a, b in zip(column_bits(fast), column_bits(_arrow(text.encode(), TYPES)), strict=True):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(min_value=1e-9, max_value=1e9),
                          st.floats(min_value=-1e9, max_value=-1e-9), st.just(0.0)),
                min_size=1, max_size=40))
def test_what_the_recorder_writes_is_never_declined(values):
    text = "x,n\n" + "".join(f"{x:.12g},{i % 100}\n" for i, x in enumerate(values))
    fast = _decimal(text.encode())
    assert fast is not None
    np.testing.assert_array_equal(column_bits(fast)[0], column_bits(_arrow(text.encode(), TYPES))[0])


@needs_cc
@pytest.mark.parametrize("cell", [b"-2.96984659087e-18", b"1e23", b"1e-23", b"9007199254740993",
                                  b"0.30000000000000004", b"4.9406564584124654e-300", b"1.7e308"])
def test_the_c_kernels_take_cells_outside_the_fast_path_with_arrows_bits(cell):
    """What the recorder writes for a numerical zero (`-2.96984659087e-18`: 10^-29 is no exact
    double) and other correctly rounded cells beyond |e| <= 22 or 2^53: the C kernels read
    them with strtod, numba's decline the file (then polars or Arrow read it)."""
    text = b"x,n\n" + cell + b",0\n1.5,1\n"
    with _kernels(NUMBA):
        assert decimal_csv.read_decimal_csv(pa.py_buffer(text), ["x", "n"], TYPES) is None
    fast = _decimal(text)
    assert fast is not None
    np.testing.assert_array_equal(column_bits(fast)[0], column_bits(_arrow(text, TYPES))[0])


def test_non_finite_and_signed_zero_keep_their_bits():
    fast = _decimal(b"x,n\nnan,0\n-nan,0\ninf,0\n-inf,0\n-0,0\n0e5,0\n")
    got = fast.column("x").to_numpy().view(np.uint64)
    assert [hex(v) for v in got] == ["0x7ff8000000000000", "0xfff8000000000000",
                                     "0x7ff0000000000000", "0xfff0000000000000",
                                     "0x8000000000000000", "0x0"]


@pytest.mark.parametrize("text", [
    b"x,n\n+1,0\n", b"x,n\n1.,0\n", b"x,n\n.,0\n", b"x,n\n-.e1,0\n", b"x,n\n1e,0\n", b"x,n\n1e+,0\n",
    b"x,n\n1e12345,0\n", b"x,n\n 1,0\n", b"x,n\n1 ,0\n", b"x,n\nNaN,0\n", b"x,n\nInf,0\n",
    b"x,n\nnana,0\n", b"x,n\n0x10,0\n", b"x,n\n1,0\r\n", b"x,n\n,0\n",
    b"x,n\n1234567890123456789,0\n", b"x,n\n1e-320,0\n", b"x,n\n1e308e,0\n",
    b"x,n\n1,17.0\n", b"x,n\n1,128\n", b"x,n\n1,-129\n", b"x,n\n1,+1\n", b"x,n\n1,\n",
    b"x,n\n1,0", b"x,n\n1,0,2\n", b"x,n\n1\n", b"x,n\n1,0\n\n", b"x ,n\n1,0\n", b"x,n\n",
    b"x,n\n1,0\n2;0\n", b"x,n\n-,0\n", b"x,n\n1,-\n",
])
def test_it_declines_what_it_cannot_vouch_for(text):
    assert _decimal(text) is None


def test_integer_bounds_are_the_types():
    fast = _decimal(b"x,n\n1,127\n2,-128\n")
    assert fast.column("n").type == pa.int8() and fast.column("n").to_pylist() == [127, -128]
    wide = _decimal(b"x,n\n1,9007199254740993\n", {"x": pa.float64(), "n": pa.int64()})
    assert wide.column("n").to_pylist() == [9007199254740993]


def test_the_fast_path_sits_in_front_of_the_readers(tmp_path, monkeypatch):
    """parse_frames takes the decimal table when it accepts, and the general readers'
    answer (here: the line and field of the bad cell) when it declines."""
    monkeypatch.setattr(fr3_csv, "DECIMAL_MIN_BYTES", 0)  # this small file too
    path = write_sample(tmp_path / "c.csv", SampleSpec(rows=50))
    lines = path.read_text().splitlines(keepends=True)
    header = fr3_csv.read_header(path)
    buf = pa.memory_map(str(path)).read_buffer()
    assert fr3_csv.decimal_table(buf, header) is not None
    frames, _ = fr3_csv.parse_frames(path, header, 2, False)
    assert frames.num_rows == 50
    monkeypatch.setattr(fr3_csv, "DECIMAL_MIN_BYTES", buf.size + 1)
    assert fr3_csv.decimal_table(buf, header) is not None  # loaded in this process: used
    monkeypatch.delitem(sys.modules, "twinlake.ingest.decimal_csv")
    monkeypatch.setenv(decimal_native.SWITCH, "0")  # as on a machine without the C kernels
    assert fr3_csv.decimal_table(buf, header) is None  # not loaded, file small: not loaded
    assert "twinlake.ingest.decimal_csv" not in sys.modules
    monkeypatch.delenv(decimal_native.SWITCH)
    if decimal_native.is_built():  # the C kernels cost a dlopen: any file takes them
        assert fr3_csv.decimal_table(buf, header) is not None
        monkeypatch.delitem(sys.modules, "twinlake.ingest.decimal_csv")
    monkeypatch.setattr(fr3_csv, "DECIMAL_MIN_BYTES", 0)
    lines[4] = lines[4].replace(",", ",1x", 1)
    path.write_text("".join(lines))
    assert fr3_csv.decimal_table(pa.memory_map(str(path)).read_buffer(), header) is None
    with pytest.raises(fr3_csv.IngestError) as err:
        fr3_csv.parse_frames(path, header, 2, False)
    assert err.value.line == 5 and err.value.field == header[1]


def test_spans_are_whole_lines_covering_the_file():
    lines = [b"%d.123456789,%d\n" % (i, i % 7) for i in range(900_000)]  # ~15 MB
    data = np.frombuffer(b"x,n\n" + b"".join(lines), np.uint8)
    spans = decimal_csv._spans(data, 4, threads=3)
    assert len(spans) == 3
    assert [first for _, _, first in spans] == [0, spans[0][1], spans[0][1] + spans[1][1]]
    assert sum(count for _, count, _ in spans) == len(lines)
    assert all(data[start - 1] == 10 for start, _, _ in spans)
    one_line = np.frombuffer(b"x\n" + b"1" * (1 << 23) + b"\n", np.uint8)
    assert decimal_csv._spans(one_line, 2, threads=2) == [(2, 1, 0)]  # no cut inside a line
