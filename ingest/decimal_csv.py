"""A compiled reader for CSV files of plain decimal numbers, exact or not at all.

The fr3_stack writer prints every cell with `%.12g` or as an integer, so a recording is a
grid of short decimal numbers. `read_decimal_csv` parses such a file in one compiled pass
(about half polars' CPU seconds on the 527 MB bench file, ingest/README.md; two spans of
whole lines on two threads) and gives the table polars would give, bit for bit, or None
when the file holds anything outside the grammar below; the caller then parses it the
general way, which also names the line and field of an error. It never guesses.

The pass is one of two kernels with the same results, bit for bit: C (`decimal_kernel.c`,
built once per machine and loaded with ctypes by `decimal_native`: a fresh process pays a
dlopen) or, where no C compiler can build it, numba's (`decimal_numba`: ~0.5 s of CPU per
process to import numba and load its cached kernels). `kernels()` chooses.

A float cell is `[-][digits][.digits][(e|E)[+|-]digits]` with a digit before the exponent
and after any point, or `nan`, `-nan`, `inf`, `-inf`.
Its value is exact by Clinger's fast path: with the significant digits as an integer
m ≤ 2^53 and the decimal exponent e in [-22, 22], m and 10^|e| are both exact doubles, so
the one IEEE multiplication or division m·10^e rounds correctly, as every correctly-rounding
parser (polars', Arrow's) does. A cell outside that range (a mantissa over 2^53, |e| > 22:
the recorder writes numerical zeros such as `-2.96984659087e-18`) is read by the C kernel with
the C library's `strtod`, correctly rounded too (glibc, musl), if it gives a normal finite
double, else the whole file is declined; numba's kernel declines the file. `nan` is the quiet NaN
0x7ff8000000000000, `-nan` the same with the sign bit (as polars reads them); `-0` is -0.0.
An integer cell is `[-]digits` within its column's type. Lines end in `\\n` (no `\\r`),
every line has the header's number of fields, no cell is empty and no space is allowed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
import pyarrow as pa

from . import decimal_native
from ..contracts.cores import available_cores

_POW10 = np.array([10.0 ** k for k in range(23)])  # exact doubles: 10^0 .. 10^22
_MIN_SPAN_BYTES = 1 << 22  # a thread per 4 MiB at least
_INT_DTYPES = {pa.int64(): np.int64, pa.int32(): np.int32, pa.int16(): np.int16, pa.int8(): np.int8}


@lru_cache(maxsize=1)
def kernels():
    """The kernels `(count_newlines, parse_rows)`: the C ones (`decimal_native`, a dlopen)
    when they can be built or are built already, else numba's (`decimal_numba`, imported
    only then). Both give the same results, bit for bit."""
    native = decimal_native.load()
    if native is not None:
        return native.count_newlines, native.parse_rows
    from . import decimal_numba

    return decimal_numba.count_newlines, decimal_numba.parse_rows


def read_decimal_csv(buf: pa.Buffer, header: list[str], types: dict[str, pa.DataType],
                     threads: int = 2) -> pa.Table | None:
    """The table of `buf` (a whole CSV file whose first line is exactly `header`, joined by
    commas): one column per header name, typed by `types` (float64 or a signed integer
    type), parsed by up to `threads` threads, each a span of whole lines. None when any
    line, cell or integer is outside the grammar of the module docstring, or the first
    line is not `header`."""
    data = np.frombuffer(buf, dtype=np.uint8)
    newline = np.flatnonzero(data[: 1 << 16] == 10)
    if not newline.size or data[-1] != 10 or data[: newline[0]].tobytes() != \
            ",".join(header).encode():
        return None
    start = int(newline[0]) + 1
    if start == data.size:
        return None  # no rows: the caller says so, naming the line
    return _parse_span(data, start, data.size, header, types, threads)


def read_decimal_chunks(data: np.ndarray, header: list[str], types: dict[str, pa.DataType],
                        chunk_bytes: int, threads: int = 2,
                        release: Callable[[int, int], None] | None = None
                        ) -> Iterator[tuple[int, pa.Table | None]]:
    """`(first byte, table)` of each span of whole lines of about `chunk_bytes` of `data`
    (a whole CSV file as uint8, first line exactly `header`), in order, each parsed as
    `read_decimal_csv` parses a file; the table is None (and the iteration ends) where a span
    declines or the first line is not `header`: the caller parses from that byte on the
    general way. `release(lo, hi)` once a span is parsed, before its table is handed over: its
    bytes are not read again.
    The next span is parsed while the caller handles a table (one span ahead) when the process
    may run on more than one core."""
    newline = np.flatnonzero(data[: 1 << 16] == 10)
    if not newline.size or data[-1] != 10 or data[: newline[0]].tobytes() != \
            ",".join(header).encode():
        yield 0, None
        return
    lo = int(newline[0]) + 1
    if lo == data.size:
        yield lo, None  # no rows: the caller says so, naming the line
        return
    spans = _line_spans(data, lo, chunk_bytes)
    with ThreadPoolExecutor(1, thread_name_prefix="twinlake-csv-ahead") as ahead:

        buffers = OutputBuffers()

        def parse(span: tuple[int, int]):
            return span, ahead.submit(_parse_span, data, *span, header, types, threads, buffers)

        early = available_cores() > 1  # one core (a Ray task's): parsing ahead saves no time, holds a span
        current = parse(next(spans))
        while current is not None:
            (lo, hi), parsing = current
            table = parsing.result()
            following = next(spans, None) if table is not None else None
            current = parse(following) if early and following is not None else None
            if table is not None and release is not None:
                release(lo, hi)  # parsed: the table holds no reference to the text
            yield lo, table
            if table is None:
                return
            if not early and following is not None:
                current = parse(following)


def _line_spans(data: np.ndarray, lo: int, chunk_bytes: int) -> Iterator[tuple[int, int]]:
    """`(lo, hi)` of consecutive spans of whole lines of about `chunk_bytes` from byte `lo`."""
    while lo < data.size:
        hi = _line_end(data, min(lo + chunk_bytes, data.size))
        yield lo, hi
        lo = hi


def _line_end(data: np.ndarray, at: int) -> int:
    """The first byte after the line end at or after `at` (`data.size` at the end)."""
    while at < data.size:
        ends = np.flatnonzero(data[at: at + (1 << 20)] == 10)
        if ends.size:
            return at + int(ends[0]) + 1
        at += 1 << 20
    return data.size


class OutputBuffers:
    """The float matrices a file's spans are parsed into, reused once no table refers to one
    any more. A span's float columns are views of its matrix that Arrow keeps without a copy
    (each view holds a reference to the matrix), so a matrix whose only reference is this
    pool's is free. A fresh ~20 MB matrix per span costs its page faults and leaves the heap
    fragmented; a few reused ones do not. The integer matrix is always copied into the table
    (its columns are cast), so it is reused at once."""

    KEEP = 6  # matrices kept at most: the spans alive at once (parse ahead, checks, writer) and some

    def __init__(self) -> None:
        self._floats: list[np.ndarray] = []
        self._ints: np.ndarray | None = None
        self._idle = None  # a pooled matrix's reference count when nothing else refers to it

    def matrices(self, n_float: int, n_int: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(floats (n_float, m), ints (n_int, m)), m ≥ rows: free ones when there are, else new."""
        for k in range(len(self._floats)):
            if sys.getrefcount(self._floats[k]) == self._idle and \
                    self._floats[k].shape[0] == n_float and self._floats[k].shape[1] >= rows:
                floats = self._floats[k]
                break
        else:
            floats = np.empty((n_float, rows + rows // 4))
            if len(self._floats) < self.KEEP:
                self._floats.append(floats)
                if self._idle is None:
                    del floats
                    self._idle = sys.getrefcount(self._floats[-1])
                    floats = self._floats[-1]
        if self._ints is None or self._ints.shape != (n_int, floats.shape[1]):  # the kernel's one row stride
            self._ints = np.empty((n_int, floats.shape[1]), np.int64)
        return floats, self._ints


def _parse_span(data: np.ndarray, start: int, stop: int, header: list[str],
                types: dict[str, pa.DataType], threads: int,
                buffers: OutputBuffers | None = None) -> pa.Table | None:
    """The table of the whole lines `data[start:stop]`, or None where any declines; parsed into
    `buffers`' matrices when given (else new ones)."""
    spans = _spans(data, start, threads, stop)
    rows = sum(count for _, count, _ in spans)
    is_int = np.array([pa.types.is_integer(types[name]) for name in header])
    parse_rows = kernels()[1]
    n_float, n_int = int((~is_int).sum()), int(is_int.sum())
    if buffers is None:
        floats, ints = np.empty((n_float, rows)), np.empty((n_int, rows), np.int64)
    else:
        floats, ints = buffers.matrices(n_float, n_int, rows)

    def parse(span: tuple[int, int, int]) -> bool:
        start, count, first_row = span
        return parse_rows(data, start, count, first_row, is_int, floats, ints, _POW10) == count

    if len(spans) == 1:
        parsed = [parse(spans[0])]
    else:
        with ThreadPoolExecutor(len(spans), thread_name_prefix="twinlake-csv") as pool:
            parsed = list(pool.map(parse, spans))
    if not all(parsed):
        return None
    return _table(header, types, is_int, floats[:, :rows], ints[:, :rows])


def _spans(data: np.ndarray, start: int, threads: int,
           size: int | None = None) -> list[tuple[int, int, int]]:
    """(first byte, lines, first row) of up to `threads` spans of whole lines covering
    data[start:size] (`size` None: to the end), one per `_MIN_SPAN_BYTES` at least."""
    count_newlines = kernels()[0]
    size = data.size if size is None else size
    pieces = max(1, min(threads, (size - start) // _MIN_SPAN_BYTES))
    cuts = [start]
    for k in range(1, pieces):
        at = start + (size - start) * k // pieces
        ends = np.flatnonzero(data[at: min(at + (1 << 20), size)] == 10)  # the next line end
        if ends.size:  # (no line ends within 1 MiB: no cut here)
            cuts.append(at + 1 + int(ends[0]))
    cuts = sorted(set(c for c in cuts if c < size)) + [size]
    spans, first_row = [], 0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        count = int(count_newlines(data, lo, hi))
        spans.append((lo, count, first_row))
        first_row += count
    return spans


def _table(header: list[str], types: dict[str, pa.DataType], is_int: np.ndarray,
           floats: np.ndarray, ints: np.ndarray) -> pa.Table | None:
    """The parsed columns as a table of `types`; None when an integer is outside its type."""
    columns, f, i = [], 0, 0
    for name, integer in zip(header, is_int, strict=True):
        if not integer:
            columns.append(pa.array(floats[f]))
            f += 1
            continue
        dtype = np.iinfo(_INT_DTYPES[types[name]])
        values, i = ints[i], i + 1
        if values.min() < dtype.min or values.max() > dtype.max:
            return None
        columns.append(pa.array(values.astype(dtype.dtype)))
    return pa.Table.from_arrays(columns, names=header)
