"""The decimal CSV reader's kernels compiled by numba (`cache=True`: compiled once, then
loaded from numba's on-disk cache, ~0.5 s of CPU per process for numba's import and load).

The reader (`decimal_csv`) uses them where the C kernels of `decimal_kernel.c` cannot be
built or loaded (`decimal_native`); both give the same results, bit for bit (grammar and
exactness: decimal_csv's docstring; `tests/ingest/test_decimal_csv.py` runs both).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..contracts.kernel_cache import register as _register_kernel_cache

_register_kernel_cache()  # before the decorators: each cached kernel is stamped with every source it inlines

_MAX_MANTISSA = 1 << 53
_MAX_DIGITS = 18  # < 10^18 fits int64; %.12g writes at most 17 (0.000dddddddddddd)
_BLOCK_ROWS = 512  # rows parsed into a row-major block (~300 kB, in L2) before scattering
_JIT = dict(cache=True, nogil=True, boundscheck=False, fastmath=False, error_model="numpy")
_U64 = np.uint64


def count_newlines(data: np.ndarray, start: int, stop: int) -> int:
    """Number of `\n` bytes in data[start:stop]."""
    return int(_count_newlines(data, start, stop, data.ctypes.data % 8))


def parse_rows(data: np.ndarray, start: int, rows: int, first_row: int, is_int: np.ndarray,
               floats: np.ndarray, ints: np.ndarray, pow10: np.ndarray) -> int:
    """`_parse_rows` (the number of rows parsed; == rows when every cell is in the grammar)."""
    return int(_parse_rows(data, start, rows, first_row, is_int.astype(bool), floats, ints,
                           pow10))


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
