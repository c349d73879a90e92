"""Integer CSV columns written as integral floats.

pandas writes an integer column as `0.0`, `17.0` once it has been a float column (it held a
NaN, or went through a float array). Such a file is read as integers: the readers parse
integer columns with Arrow's integer types first (the fast path), and only when Arrow
refuses a value that reads as a decimal number do they re-read those columns as doubles and
cast them back here, checking every value (Arrow compute over whole columns, no per-row
Python). A value with a fraction (`0.5`), NaN, ±inf, a magnitude beyond 2**53 (where a
double no longer holds every integer) or outside the target type is an `IngestError`
naming the line and the field.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .registry import IngestError

EXACT_INT_LIMIT = 2**53
"""Largest magnitude up to which a double represents every integer exactly."""

_DECIMAL = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")
_INVALID = re.compile(r"column #(\d+): (?:Row #\d+: )?CSV conversion error to u?int\d+: invalid value '(.*)'")


def float_text_in_int_column(message: str, header: list[str],
                             int_columns: set[str] | frozenset[str]) -> bool:
    """Whether an Arrow CSV error is an integer column refusing a decimal number such as
    `17.0` (then the file is worth re-reading with those columns as doubles)."""
    m = _INVALID.search(message)
    if not m or int(m.group(1)) >= len(header):
        return False
    return header[int(m.group(1))] in int_columns and bool(_DECIMAL.match(m.group(2).strip()))


def as_double(types: dict[str, pa.DataType]) -> dict[str, pa.DataType]:
    """`types` with every integer type replaced by float64 (for the re-read)."""
    return {n: (pa.float64() if pa.types.is_integer(t) else t) for n, t in types.items()}


def integral_to_int(path: Path, table: pa.Table, types: dict[str, pa.DataType],
                    first_line: int = 2) -> pa.Table:
    """Cast each column `types` names as an integer type from float64 back to that type.
    `first_line` is the file line of row 0 (2 below a header line). Nulls stay null."""
    for name, typ in types.items():
        if not pa.types.is_integer(typ) or name not in table.column_names:
            continue
        col = table.column(name)
        if pa.types.is_integer(col.type):
            continue
        ok = pc.and_(pc.is_finite(col), pc.equal(pc.floor(col), col))
        ok = pc.and_(ok, pc.less_equal(pc.abs(col), float(EXACT_INT_LIMIT)))
        ok = pc.and_(ok, _in_bounds(col, typ))
        bad = pc.index(pc.fill_null(ok, True), False).as_py()
        if bad >= 0:
            value = col[bad].as_py()
            if not _integral(value):
                what = "is not an integer (integral values such as 17.0 are read as integers)"
            elif abs(value) > EXACT_INT_LIMIT:
                what = "is too large to be an exact integer when written as a float (> 2**53)"
            else:
                what = f"is outside the range of {typ}"
            raise IngestError(path, f"value {value!r} {what}", line=first_line + bad,
                              field=name, kind="non_integer")
        table = table.set_column(table.schema.get_field_index(name), name, col.cast(typ))
    return table


def _integral(value: float) -> bool:
    return value == value and abs(value) != float("inf") and float(value).is_integer()


def _in_bounds(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    bits = typ.bit_width
    lo, hi = (0, 2**bits - 1) if pa.types.is_unsigned_integer(typ) else (
        -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    lo, hi = max(lo, -EXACT_INT_LIMIT), min(hi, EXACT_INT_LIMIT)
    return pc.and_(pc.greater_equal(col, float(lo)), pc.less_equal(col, float(hi)))
