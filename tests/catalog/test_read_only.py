"""`connect(lake)` is read-only by default: SQL through it reads the lake and never writes a
file (a real DuckDB over a real lake; `read_only=False` shows each refused statement works)."""

from __future__ import annotations

import duckdb
import pytest
from typer.testing import CliRunner

from null_run import null_run_lake

from twinlake.catalog import RUN_SCHEMA, Lake, ReadOnlyRefused, connect


@pytest.fixture
def lake(tmp_path) -> Lake:
    return null_run_lake(tmp_path / "lake", 5)


def _files(lake: Lake) -> dict[str, bytes | None]:
    """Every path under the lake with its bytes (None for a directory)."""
    return {str(p.relative_to(lake.root)): p.read_bytes() if p.is_file() else None
            for p in lake.root.rglob("*")}


WRITES = [
    "COPY (SELECT * FROM frames) TO '{root}/x.parquet' (FORMAT parquet)",
    "COPY (SELECT 1 AS a) TO '{root}/runs/robot=fr3/run=r1/frames.parquet' (USE_TMP_FILE false)",
    "ATTACH '{root}/x.duckdb' AS x; CREATE TABLE x.t AS SELECT * FROM frames",
    "EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{root}/x.parquet'",
    "PREPARE p AS COPY (SELECT 1 AS a) TO '{root}/x.parquet'; EXECUTE p",
    "EXPORT DATABASE '{root}/dump'",
]


@pytest.mark.parametrize("statement", WRITES)
def test_statements_that_write_are_refused_and_leave_the_lake_untouched(lake, statement):
    before = _files(lake)
    sql = statement.format(root=lake.root)
    con = connect(lake)
    with pytest.raises(ReadOnlyRefused, match="read-only catalog"):
        con.execute(sql)
    with pytest.raises(ReadOnlyRefused):
        con.cursor().execute(sql)
    with pytest.raises(ReadOnlyRefused):
        con.sql(sql)
    assert _files(lake) == before
    assert con.execute("SELECT count(*) FROM frames").fetchone() == (5,)  # still usable
    # the same statement on a writable connection does write: the refusal is the guard's
    writable = connect(lake, read_only=False)
    writable.execute(sql)
    assert _files(lake) != before


def test_settings_are_locked_except_harmless_ones(lake):
    con = connect(lake)
    for setting in ("profiling_output", "log_query_path", "temp_directory", "secret_directory"):
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
            con.execute(f"SET {setting} = ?", [str(lake.root / "x")])
    with pytest.raises(duckdb.InvalidInputException, match="locked"):
        con.execute("SET lock_configuration = false")
    con.execute("SET threads = 1")
    assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    assert not (lake.root / "x").exists()


def test_reads_and_in_memory_objects_work(lake, tmp_path):
    con = connect(lake)
    assert con.execute("SELECT robot, run, count(*) FROM frames GROUP BY ALL").fetchall() == [("fr3", "r1", 5)]
    assert con.sql("SELECT frame_count FROM runs").fetchall() == [(5,)]
    con.execute("CREATE TEMP TABLE t AS SELECT seq FROM frames WHERE seq > $s", {"s": 2})
    con.execute("CREATE MACRO twice(x) AS 2 * x")
    assert con.execute("SELECT twice(sum(seq)) FROM t").fetchone() == (14,)
    assert con.execute("EXPLAIN SELECT * FROM frames").fetchall()
    assert [r[0] for r in con.execute("DESCRIBE runs").fetchall()][:1] == [RUN_SCHEMA.names[0]]
    with connect(lake) as other:
        assert other.execute("SELECT 1").fetchone() == (1,)


def test_twinlake_sql_refuses_a_copy_into_the_lake(lake):
    from twinlake.cli import app

    target = lake.root / "x.parquet"
    res = CliRunner().invoke(app, ["sql", f"COPY (SELECT * FROM frames) TO '{target}'",
                                   "--lake", str(lake.root)])
    assert res.exit_code == 1 and "read-only catalog: COPY statements are refused" in res.output
    assert not target.exists()
    res = CliRunner().invoke(app, ["sql", "SELECT count(*) AS n FROM frames", "--lake",
                                   str(lake.root), "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.splitlines() == ["n", "5"]
