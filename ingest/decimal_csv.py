"""A compiled reader for CSV files of plain decimal numbers, exact or not at all.

The fr3_stack writer prints every cell with `%.12g` or as an integer, so a recording is a
grid of short decimal numbers. `read_decimal_csv` parses such a file in one compiled pass
(about half polars' CPU seconds on the 527 MB bench file, ingest/README.md; two spans of
whole lines on two threads) and gives the table polars would give, bit for bit, or None
when the file holds anything outside the grammar below; the caller then parses it the
general way, which also names the line and field of an error. It never guesses.

A float cell is `[-][digits][.digits][(e|E)[+|-]digits]` with a digit before the exponent
and after any point, or `nan`, `-nan`, `inf`, `-inf`.
Its value is exact by Clinger's fast path: with the significant digits as an integer
m ≤ 2^53 and the decimal exponent e in [-22, 22], m and 10^|e| are both exact doubles, so
the one IEEE multiplication or division m·10^e rounds correctly, as every correctly-rounding
parser (polars', Arrow's) does. A cell outside that range (more than 15-16 significant
digits, |e| > 22, e.g. 1e-300) declines the whole file. `nan` is the quiet NaN
0x7ff8000000000000, `-nan` the same with the sign bit (as polars reads them); `-0` is -0.0.
An integer cell is `[-]digits` within its column's type. Lines end in `\\n` (no `\\r`),
every line has the header's number of fields, no cell is empty and no space is allowed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
from numba import njit

_POW10 = np.array([10.0 ** k for k in range(23)])  # exact doubles: 10^0 .. 10^22
_MAX_MANTISSA = 1 << 53
_MAX_DIGITS = 18  # < 10^18 fits int64; %.12g writes at most 17 (0.000dddddddddddd)
_MIN_SPAN_BYTES = 1 << 22  # a thread per 4 MiB at least
_BLOCK_ROWS = 512  # rows parsed into a row-major block (~300 kB, in L2) before scattering
_INT_DTYPES = {pa.int64(): np.int64, pa.int32(): np.int32, pa.int16(): np.int16, pa.int8(): np.int8}
_JIT = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")
_U64 = np.uint64


@njit(**_JIT)
def _count_newlines(data, start, stop, base_offset):
    """Number of `\n` bytes in data[start:stop], 8 at a time (an exact zero-byte count per
    word) from the first 8-byte boundary (`base_offset`: data's address modulo 8)."""
    aligned = min(start + (-(base_offset + start)) % 8, stop)
    words = data[aligned: aligned + (stop - aligned) // 8 * 8].view(np.uint64)
    count = 0
    for i in range(start, aligned):
        count += data[i] == 10
    low7, newlines = _U64(0x7F7F7F7F7F7F7F7F), _U64(0x0A0A0A0A0A0A0A0A)
    m1, m2, m4 = _U64(0x5555555555555555), _U64(0x3333333333333333), _U64(0x0F0F0F0F0F0F0F0F)
    for word in words:
        x = word ^ newlines  # a zero byte where the byte was '\n'
        y = ~(((x & low7) + low7) | x | low7)  # its high bit set exactly there
        y = y - ((y >> _U64(1)) & m1)  # popcount
        y = (y & m2) + ((y >> _U64(2)) & m2)
        y = (y + (y >> _U64(4))) & m4
        count += (y * _U64(0x0101010101010101)) >> _U64(56)
    for i in range(aligned + words.size * 8, stop):
        count += data[i] == 10
    return count


# The cell readers never test the end of `data`: the caller checks that the file's last
# byte is '\n', every loop stops at a byte that is not a digit, and a row is only started
# while a '\n' is still ahead (rows == the number of '\n' after the header).

@njit(**_JIT, inline="always")
def _digits(data, pos, value):
    """(value·10^k + the k digits at pos, position after them, the byte there − '0')."""
    digit = np.int64(data[pos]) - 48
    while 0 <= digit <= 9:
        value = value * 10 + digit
        pos += 1
        digit = np.int64(data[pos]) - 48
    return value, pos, digit


@njit(**_JIT, inline="always")
def _special(data, pos, negative):
    """(value, position after, ok) of `nan` / `inf` at pos (after any '-')."""
    first = data[pos]  # 'n' | 'i': not '\n', so pos + 1 is in the file, and so on
    if first == 110 and data[pos + 1] == 97 and data[pos + 2] == 110:  # nan
        return np.copysign(np.nan, -1.0 if negative else 1.0), pos + 3, True
    if first == 105 and data[pos + 1] == 110 and data[pos + 2] == 102:  # inf
        return (-np.inf if negative else np.inf), pos + 3, True
    return 0.0, pos, False


@njit(**_JIT, inline="always")
def _exponent(data, pos):
    """(written exponent, position after, ok) of the `[+|-]digits` at pos (1-4 digits)."""
    sign = 1
    if data[pos] == 43 or data[pos] == 45:  # '+' | '-'
        sign = 44 - np.int64(data[pos])
        pos += 1
    start = pos
    written, pos, _ = _digits(data, pos, 0)
    return sign * written, pos, 0 < pos - start <= 4


_DOT, _LOWER_E, _UPPER_E = 46 - 48, 101 - 48, 69 - 48  # as `_digits` returns them


@njit(**_JIT, inline="always")
def _float_cell(data, pos, pow10):
    """(value, position after the cell, ok) of the float cell at `pos`. (The digit loops
    are written out here, as in the fastest version measured: the version going through
    `_digits`, which also read each cell's first byte twice, took ~20% longer.)"""
    negative = data[pos] == 45  # '-'
    pos += negative
    first = data[pos]
    if first == 110 or first == 105:  # 'n' | 'i'
        return _special(data, pos, negative)
    start, mantissa, digit = pos, 0, np.int64(first) - 48
    while 0 <= digit <= 9:
        mantissa = mantissa * 10 + digit
        pos += 1
        digit = np.int64(data[pos]) - 48
    digits, exponent = pos - start, 0
    if digit == _DOT:
        pos += 1
        fraction = pos
        digit = np.int64(data[pos]) - 48
        while 0 <= digit <= 9:
            mantissa = mantissa * 10 + digit
            pos += 1
            digit = np.int64(data[pos]) - 48
        exponent = fraction - pos
        if exponent == 0:
            return 0.0, pos, False
        digits -= exponent
    if digits == 0 or digits > _MAX_DIGITS:
        return 0.0, pos, False
    if digit == _LOWER_E or digit == _UPPER_E:
        written, pos, ok = _exponent(data, pos + 1)
        if not ok:
            return 0.0, pos, False
        exponent += written
    if mantissa == 0:
        return (-0.0 if negative else 0.0), pos, True
    if mantissa > _MAX_MANTISSA or exponent > 22 or exponent < -22:
        return 0.0, pos, False  # outside the exact fast path
    value = mantissa * pow10[exponent] if exponent >= 0 else mantissa / pow10[-exponent]
    return (-value if negative else value), pos, True


@njit(**_JIT, inline="always")
def _int_cell(data, pos):
    """(value, position after the cell, ok) of the integer cell at `pos` (1-18 digits)."""
    negative = data[pos] == 45
    pos += negative
    start = pos
    value, pos, _ = _digits(data, pos, 0)
    return (-value if negative else value), pos, 0 < pos - start <= _MAX_DIGITS


@njit(**_JIT)
def _parse_rows(data, start, rows, first_row, is_int, floats, ints, pow10):
    """Fill rows first_row .. first_row + rows of floats[k, row] (k-th float column) and
    ints[k, row] from the first `rows` lines of data[start:]; the number of rows parsed
    (== `rows` when every cell is in the grammar)."""
    ncols = is_int.size
    float_block = np.empty((_BLOCK_ROWS, max(floats.shape[0], 1)))
    int_block = np.empty((_BLOCK_ROWS, max(ints.shape[0], 1)), np.int64)
    pos = start
    for first in range(0, rows, _BLOCK_ROWS):
        count = min(_BLOCK_ROWS, rows - first)
        for r in range(count):
            f = i = 0
            for col in range(ncols):
                if is_int[col]:
                    int_value, pos, ok = _int_cell(data, pos)
                    int_block[r, i] = int_value
                    i += 1
                else:
                    float_value, pos, ok = _float_cell(data, pos, pow10)
                    float_block[r, f] = float_value
                    f += 1
                if not ok or data[pos] != (10 if col == ncols - 1 else 44):  # '\n' | ','
                    return first + r
                pos += 1
        row = first_row + first
        for f in range(floats.shape[0]):
            for r in range(count):
                floats[f, row + r] = float_block[r, f]
        for i in range(ints.shape[0]):
            for r in range(count):
                ints[i, row + r] = int_block[r, i]
    return rows


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
    spans = _spans(data, start, threads)
    rows = sum(count for _, count, _ in spans)
    is_int = np.array([pa.types.is_integer(types[name]) for name in header])
    floats = np.empty((int((~is_int).sum()), rows))
    ints = np.empty((int(is_int.sum()), rows), np.int64)

    def parse(span: tuple[int, int, int]) -> bool:
        start, count, first_row = span
        return _parse_rows(data, start, count, first_row, is_int, floats, ints,
                           _POW10) == count

    if len(spans) == 1:
        parsed = [parse(spans[0])]
    else:
        with ThreadPoolExecutor(len(spans), thread_name_prefix="twinlake-csv") as pool:
            parsed = list(pool.map(parse, spans))
    if not all(parsed):
        return None
    return _table(header, types, is_int, floats, ints)


def _spans(data: np.ndarray, start: int, threads: int) -> list[tuple[int, int, int]]:
    """(first byte, lines, first row) of up to `threads` spans of whole lines covering
    data[start:], one per `_MIN_SPAN_BYTES` at least."""
    size, base = data.size, data.ctypes.data % 8
    pieces = max(1, min(threads, (size - start) // _MIN_SPAN_BYTES))
    cuts = [start]
    for k in range(1, pieces):
        at = start + (size - start) * k // pieces
        ends = np.flatnonzero(data[at: at + (1 << 20)] == 10)  # the next line end
        if ends.size:  # (no line ends within 1 MiB: no cut here)
            cuts.append(at + 1 + int(ends[0]))
    cuts = sorted(set(c for c in cuts if c < size)) + [size]
    spans, first_row = [], 0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        count = int(_count_newlines(data, lo, hi, base))
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
