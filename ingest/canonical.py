"""A reader's frame table in canonical form: the one `conform_frames`.

The pipeline conforms every reader's `IngestUnit.frames` before validating them; readers
that assemble a table column by column (FrankaTwin, excitation, episode) may call it too.
"""

from __future__ import annotations

import pyarrow as pa

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
