"""A reader's frame table in canonical form: the one `conform_frames`, and `null_where`
(a column nulled where a mask holds, without copying its values).

The pipeline conforms every reader's `IngestUnit.frames` before validating them; readers
that assemble a table column by column (FrankaTwin, excitation, episode) may call it too.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import FRAME_SCHEMA


def conform_frames(table: pa.Table) -> pa.Table:
    """Canonical columns first, in FRAME_SCHEMA order and types (typed nulls for the ones
    the source did not record: null, never zero), then the source's extra columns in their
    order. A table already in that form is returned as it is. A canonical column that cannot
    be cast safely (a fraction into an integer column, text into a float one) is kept as it
    is, for validation to name it."""
    names = table.column_names
    head = table.schema.remove_metadata()
    if names[: len(FRAME_SCHEMA)] == FRAME_SCHEMA.names and all(
            head.field(i).type == f.type for i, f in enumerate(FRAME_SCHEMA)):
        return table
    n = table.num_rows
    cols, out = [], []
    for fld in FRAME_SCHEMA:
        cols.append(_cast(table[fld.name], fld.type) if fld.name in names else pa.nulls(n, fld.type))
        out.append(fld.name)
    canonical = set(FRAME_SCHEMA.names)
    for name in names:
        if name not in canonical:
            cols.append(table[name])
            out.append(name)
    return pa.Table.from_arrays(cols, names=out)


def _cast(column: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    try:
        return column.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return column


def null_where(mask: pa.ChunkedArray | pa.Array, column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """`pc.if_else(mask, None, column)`: null where `mask` is true or null. A column of fixed
    width values without nulls keeps its values buffer and gets the validity bitmap of "mask
    is false" (no copy of the values: the nulls' slots keep the values under them, which no
    reader sees); anything else goes through `if_else`."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if (column.null_count or column.offset or not pa.types.is_primitive(column.type)
            or pa.types.is_boolean(column.type)):
        return pc.if_else(mask, None, column)
    keep = pc.invert(pc.fill_null(mask, True))
    keep = keep.combine_chunks() if isinstance(keep, pa.ChunkedArray) else keep
    if keep.offset:
        return pc.if_else(mask, None, column)
    valid = keep.buffers()[1]
    return pa.Array.from_buffers(column.type, len(column), [valid, column.buffers()[1]],
                                 null_count=len(column) - int(pc.sum(keep).as_py() or 0))

