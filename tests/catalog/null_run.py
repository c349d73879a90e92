"""A lake holding one run, fr3/r1, of `rows` frames whose every value is null but `seq`: the
smallest lake the catalog's views open (tests/catalog's read-only and confinement tests)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake


def null_run_lake(root: Path, rows: int) -> Lake:
    lake = Lake(root)
    d = lake.run_dir("fr3", "r1")
    d.mkdir(parents=True)
    cols = {f.name: pa.nulls(rows, f.type) for f in FRAME_SCHEMA}
    cols["seq"] = pa.array(range(rows), pa.int64())
    pq.write_table(pa.table(cols), d / "frames.parquet")
    row = {name: None for name in RUN_SCHEMA.names} | {"frame_count": rows}
    pq.write_table(pa.Table.from_pylist([row], schema=RUN_SCHEMA), d / "run.parquet")
    return lake
