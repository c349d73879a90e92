"""The DuckDB catalog: views over the lake, VARCHAR partition columns, union by name,
empty-lake fallbacks, the lake root as a bound variable, and partition pruning."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, SQL_FILES, Lake, connect, load_sql
from twinlake.catalog.sql import sql_blocks


def _frames(n: int, start: int = 0, **extra) -> pa.Table:
    cols = {f.name: pa.nulls(n, f.type) for f in FRAME_SCHEMA}
    cols["seq"] = pa.array(range(start, start + n), pa.int64())
    cols["t_s"] = pa.array([i * 1e-3 for i in range(n)])
    cols.update({k: pa.array(v) for k, v in extra.items()})
    return pa.table(cols)


def _put(lake: Lake, robot: str, run: str, table: pa.Table) -> None:
    d = lake.run_dir(robot, run)
    d.mkdir(parents=True)
    pq.write_table(table, d / "frames.parquet")
    row = {name: None for name in RUN_SCHEMA.names} | {"frame_count": table.num_rows}
    pq.write_table(pa.Table.from_pylist([row], schema=RUN_SCHEMA), d / "run.parquet")


def test_empty_lake_has_empty_views_with_canonical_columns(tmp_path):
    con = connect(tmp_path / "nothing-here")
    assert con.execute("select count(*) from frames").fetchone() == (0,)
    cols = [r[0] for r in con.execute("describe frames").fetchall()]
    assert cols == FRAME_SCHEMA.names + ["robot", "run"]
    runs_cols = [r[0] for r in con.execute("describe runs").fetchall()]
    assert runs_cols[: len(RUN_SCHEMA)] == RUN_SCHEMA.names
    names = {r[0] for r in con.execute("select view_name from duckdb_views() "
                                       "where not internal").fetchall()}
    assert {"runs", "frames"} <= names and "targets" not in names


def test_partition_columns_are_varchar_and_union_by_name(tmp_path):
    lake = Lake(tmp_path)
    _put(lake, "007", "0001", _frames(3))
    _put(lake, "007", "0002", _frames(2, target_idx=[5, 6]))
    con = connect(lake)
    rows = con.execute("select robot, run, count(*), count(target_idx) from frames "
                       "group by all order by run").fetchall()
    assert rows == [("007", "0001", 3, 0), ("007", "0002", 2, 2)]
    types = dict(con.execute("select column_name, column_type from "
                             "(describe frames)").fetchall())
    assert types["robot"] == "VARCHAR" and types["run"] == "VARCHAR"
    assert con.execute("select sum(frame_count) from runs").fetchone() == (5,)


def test_lake_root_with_quotes_is_bound_not_concatenated(tmp_path):
    lake = Lake(tmp_path / "it's a lake'; drop view frames; --")
    _put(lake, "a", "r", _frames(4))
    con = connect(lake)
    assert con.execute("select count(*) from frames").fetchone() == (4,)
    assert "getvariable('lake_root')" in load_sql("views")


def _bytes_read(con, query: str, profile) -> int:
    con.execute("SET enable_profiling = 'json'")
    con.execute("SET profiling_output = ?", [str(profile)])
    con.execute(query).fetchall()
    con.execute("SET enable_profiling = 'no_output'")
    return json.loads(profile.read_text())["io"]["total_bytes_read"]


def test_query_for_one_run_reads_only_that_run(tmp_path):
    """Hive pruning: a query for one run reads that run's data and not the other's (only
    the other files' footers are touched, for union_by_name)."""
    lake = Lake(tmp_path / "lake")
    big = _frames(200_000)
    big = big.set_column(1, "t_s", pa.array(np.random.default_rng(0).random(200_000)))
    _put(lake, "a", "small", _frames(1000))
    _put(lake, "a", "big", big)
    small_size = (lake.run_dir("a", "small") / "frames.parquet").stat().st_size
    big_size = (lake.run_dir("a", "big") / "frames.parquet").stat().st_size
    con = connect(lake, read_only=False)  # the profile is a file: a read-only catalog refuses that
    query = "select count(*), sum(t_s) from frames where run = '{}'"
    pruned = _bytes_read(con, query.format("small"), tmp_path / "p1.json")
    full = _bytes_read(con, "select count(*), sum(t_s) from frames", tmp_path / "p2.json")
    assert con.execute(query.format("small")).fetchone()[0] == 1000
    assert pruned < small_size + 64 * 1024 < big_size // 4
    assert full > big_size // 2


def test_sql_blocks_markers():
    text = ("-- header\nCREATE VIEW a AS SELECT 1;\n-- requires: runs/*/x.parquet y/*\n"
            "CREATE VIEW b AS SELECT 2;\n-- unless: runs/*/x.parquet\nCREATE VIEW b AS SELECT 3;\n"
            "-- always\nCREATE VIEW c AS SELECT 4;\n")
    blocks = sql_blocks(text)
    assert [(k, g) for k, g, _ in blocks] == [
        ("always", []), ("requires", ["runs/*/x.parquet", "y/*"]),
        ("unless", ["runs/*/x.parquet"]), ("always", [])]
    assert SQL_FILES[0] == "views"
