"""CSV v2 rows as text, compiled: the same bytes as `csv_v2.format_rows`, without Python per value.

`format_rows_bytes(rows, int_mask)` writes an (n, 80) float64 frame array as ASCII lines:
integer columns (`int_mask`) as `%d` of the value truncated to an integer, the others as C's /
Python's `%.12g` (12 significant digits, correctly rounded, trailing zeros stripped, exponent
form when the decimal exponent X is < −4 or ≥ 12, at least two exponent digits; NaN → `nan`,
±inf → `inf`/`-inf`, −0.0 → `-0`).

The 12 digits of a finite non-zero double v come from one IEEE multiplication (or division)
by an exact power of ten, m = |v|·10^(11−X) in [10^11, 10^12): its rounding error is at most
half an ulp of m (< 1.3e-4), so rounding m to the nearest integer gives the correctly rounded
digits unless m's fraction lies within 1e-3 of one half. Those values, and values whose
power of ten is not exact (|v| < 1e-11 or ≥ 1e34), go to the C library's `snprintf("%.12g")`
(glibc's conversion is exact and rounds half to even, as Python's). Compiled with numba,
cached on disk; checked against Python's `%` on many values in tests/daemon. A value with
the same bits as the one above it in its column reuses that text (a recording's gains,
targets and zero columns change only with a command).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..contracts.kernel_cache import register as _register_kernel_cache

_register_kernel_cache()  # before the decorators: each cached kernel is stamped with every source it inlines

MAX_CHARS_PER_VALUE = 24  # '-' + 12 digits + '.' + 'e-308' < 24; int64 ≤ 20
_POW10 = np.array([10.0 ** i for i in range(23)])  # exact doubles up to 1e22
_NAN = np.frombuffer(b"nan", dtype=np.uint8)
_INF = np.frombuffer(b"inf", dtype=np.uint8)
_POW10_INT = np.array([10 ** i for i in range(13)], dtype=np.int64)  # 10^k as int64, k ≤ 12
_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), dtype=np.uint8)  # "00".."99"


@intrinsic
def _snprintf_g12(typingctx, out, pos, value):
    """snprintf(&out[pos], 32, "%.12g", value) → chars written (int64); out a uint8 array."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        target = builder.gep(array.data, [args[1]])
        fmt = context.insert_const_string(builder.module, "%.12g")
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(8).as_pointer(), ir.IntType(64),
                                                ir.IntType(8).as_pointer()], var_arg=True)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "snprintf")
        written = builder.call(fn, [target, ir.Constant(ir.IntType(64), 32), fmt, args[2]])
        return builder.sext(written, ir.IntType(64))
    return types.int64(out, types.int64, types.float64), codegen


@njit(cache=True, error_model="numpy")
def _put_digits(out, pos, n, width):
    """The `width` decimal digits of n ≥ 0 (zero-padded) at out[pos:pos + width]."""
    for i in range(width - 1, -1, -1):
        out[pos + i] = 48 + n % 10
        n //= 10
    return pos + width


@njit(cache=True, inline="always", error_model="numpy")
def _put_int(out, pos, value):
    """`%d` of a float64 holding an integer (truncated as Python's int())."""
    n = np.int64(value)
    if n < 0:
        out[pos] = 45
        pos += 1
        n = -n
    width = 1
    probe = n
    while probe >= 10:
        probe //= 10
        width += 1
    return _put_digits(out, pos, n, width)


@njit(cache=True, inline="always", error_model="numpy")
def _twelve_digits(a, pow10, bits):
    """(digits, X): |v| = a rounded to 12 significant digits (an int in [1e11, 1e12)) and its
    decimal exponent, or (−1, 0) when the fast path cannot be sure (snprintf then). bits: a's
    IEEE bits as int64 (its binary exponent e2 is read from them)."""
    if not (1e-11 <= a < 1e34):
        return -1, 0
    x = ((((bits >> 52) & 0x7FF) - 1023) * 78913) >> 18  # ⌊log10(2)·e2⌋: X or X − 1
    s = 11 - x
    if s > 22 or s < -21:
        return -1, 0
    m = a * pow10[s] if s >= 0 else a / pow10[-s]
    if m >= 1e12:  # the estimate was X − 1
        x += 1
        s -= 1
        m = a * pow10[s] if s >= 0 else a / pow10[-s]
    if m < 1e11 or m >= 1e12:
        return -1, 0
    r = math.floor(m)
    f = m - r
    if abs(f - 0.5) < 1e-3:
        return -1, 0
    n = np.int64(r) + (1 if f > 0.5 else 0)
    if n == 1000000000000:
        return np.int64(100000000000), x + 1
    return n, x


@njit(cache=True, inline="always", error_model="numpy")
def _put_g12(out, pos, v, pow10, nan_text, inf_text, pairs, bits):
    """`%.12g` of v at out[pos:], → the next position; bits: v's IEEE bits as int64."""
    if v != v:
        out[pos:pos + 3] = nan_text
        return pos + 3
    if v == 0.0:
        if math.copysign(1.0, v) < 0:
            out[pos] = 45
            pos += 1
        out[pos] = 48
        return pos + 1
    a = abs(v)
    if a == math.inf:
        if v < 0:
            out[pos] = 45
            pos += 1
        out[pos:pos + 3] = inf_text
        return pos + 3
    n, x = _twelve_digits(a, pow10, bits)
    if n < 0:
        return pos + _snprintf_g12(out, pos, v)
    if v < 0:
        out[pos] = 45
        pos += 1
    digits = 12
    while n % 10 == 0:
        n //= 10
        digits -= 1
    if -4 <= x < 12:
        if x < 0:
            out[pos] = 48
            out[pos + 1] = 46
            pos += 2
            for _ in range(-x - 1):
                out[pos] = 48
                pos += 1
            _put_number(out, pos, n, digits, pairs)
            return pos + digits
        if digits <= x + 1:
            _put_number(out, pos, n, digits, pairs)
            for i in range(digits, x + 1):
                out[pos + i] = 48
            return pos + x + 1
        frac = digits - x - 1
        hi = n // _POW10_INT[frac]
        _put_number(out, pos, hi, x + 1, pairs)
        pos += x + 1
        out[pos] = 46
        _put_number(out, pos + 1, n - hi * _POW10_INT[frac], frac, pairs)
        return pos + 1 + frac
    hi = n // _POW10_INT[digits - 1]
    out[pos] = 48 + hi
    pos += 1
    if digits > 1:
        out[pos] = 46
        _put_number(out, pos + 1, n - hi * _POW10_INT[digits - 1], digits - 1, pairs)
        pos += digits
    out[pos] = 101
    out[pos + 1] = 45 if x < 0 else 43
    e = -x if x < 0 else x
    if e >= 100:
        out[pos + 2] = 48 + e // 100
        pos += 1
        e = e % 100
    out[pos + 2] = pairs[2 * e]
    out[pos + 3] = pairs[2 * e + 1]
    return pos + 4


@njit(cache=True, inline="always", error_model="numpy")
def _put_number(out, pos, n, width, pairs):
    """The `width` digits of 0 <= n < 10^width (zero-padded) at out[pos:pos + width]."""
    p = pos + width
    while p - pos >= 2:
        q = n // 100
        r = 2 * (n - q * 100)
        out[p - 2] = pairs[r]
        out[p - 1] = pairs[r + 1]
        n = q
        p -= 2
    if p > pos:
        out[pos] = 48 + n


@njit(cache=True, nogil=True, error_model="numpy")
def _format_into(rows, bits, int_mask, out, pow10, nan_text, inf_text, pairs):
    """All rows into out → bytes written. A value with the bits of the one above it in its
    column (gains, targets, zeros, ...) reuses that value's text."""
    width = rows.shape[1]
    start = np.full(width, -1, dtype=np.int64)  # where column c's previous text starts in out
    length = np.zeros(width, dtype=np.int64)
    pos = 0
    for i in range(rows.shape[0]):
        for c in range(width):
            if c:
                out[pos] = 44
                pos += 1
            if i and bits[i, c] == bits[i - 1, c]:
                first, n = start[c], length[c]
                for b in range(n):
                    out[pos + b] = out[first + b]
                start[c] = pos
                pos += n
                continue
            begin = pos
            if int_mask[c]:
                pos = _put_int(out, pos, rows[i, c])
            else:
                pos = _put_g12(out, pos, rows[i, c], pow10, nan_text, inf_text, pairs, bits[i, c])
            start[c], length[c] = begin, pos - begin
        out[pos] = 10
        pos += 1
    return pos


def text_bytes_needed(rows: np.ndarray) -> int:
    """An upper bound of the bytes the lines of rows (n, w) take."""
    return rows.shape[0] * (rows.shape[1] * (MAX_CHARS_PER_VALUE + 1) + 1)


def format_rows_into(rows: np.ndarray, int_mask: np.ndarray, out: np.ndarray) -> int:
    """(n, w) float64 rows → their CSV lines into out (uint8, ≥ text_bytes_needed(rows)) → the
    bytes written; int_mask as format_rows_bytes'. Runs without the GIL."""
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if out.dtype != np.uint8 or out.ndim != 1 or out.size < text_bytes_needed(rows):
        raise ValueError(f"format_rows_into: out must be uint8 of at least {text_bytes_needed(rows)} bytes")
    return _format_into(rows, rows.view(np.int64), np.ascontiguousarray(int_mask, dtype=np.bool_), out, _POW10, _NAN,
                        _INF, _PAIRS)


def format_rows_bytes(rows: np.ndarray, int_mask: np.ndarray) -> bytes:
    """(n, w) float64 rows → their CSV lines as bytes; int_mask (w,) bool marks `%d` columns,
    whose values must be finite and below 2^63 in magnitude (the caller checks)."""
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    out = np.empty(text_bytes_needed(rows), dtype=np.uint8)
    return out[:format_rows_into(rows, int_mask, out)].tobytes()
