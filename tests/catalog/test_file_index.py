"""The lake's file index (`_catalog/files.json`): publish keeps it current, readers tolerate
it stale, absent or corrupt, `twinlake catalog rebuild` restores it from the files alone,
concurrent writers lose nothing, and a query naming one run opens only that run's files."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake, connect, publish_partition
from twinlake.catalog.file_index import current_files, index_path, load_index, rebuild_index
from twinlake.catalog.intervals import clean_intervals
from twinlake.cli import app


def _frames(n: int, **extra) -> pa.Table:
    cols = {f.name: pa.nulls(n, f.type) for f in FRAME_SCHEMA}
    cols["seq"] = pa.array(range(n), pa.int64())
    cols["t_s"] = pa.array([i * 1e-3 for i in range(n)])
    cols.update({k: pa.array(v) for k, v in extra.items()})
    return pa.table(cols)


def _writer(n: int, **extra):
    def write(path):
        pq.write_table(_frames(n, **extra), path / "frames.parquet")
        row = {name: None for name in RUN_SCHEMA.names} | {"frame_count": n}
        pq.write_table(pa.Table.from_pylist([row], schema=RUN_SCHEMA), path / "run.parquet")
    return write


def _publish(lake: Lake, robot: str, run: str, n: int, replace: bool = False, **extra) -> None:
    publish_partition(lake, lake.run_relative(robot, run), _writer(n, **extra), replace=replace)


def _runs(con) -> list[tuple[str, str, int]]:
    return con.execute("select robot, run, frame_count from runs order by all").fetchall()


def test_publish_records_files_and_schemas(tmp_path):
    lake = Lake(tmp_path)
    _publish(lake, "a", "r1", 3)
    _publish(lake, "a", "r2", 2, target_idx=[5, 6])
    index = load_index(tmp_path)
    assert sorted(index.partitions) == ["runs/robot=a/run=r1", "runs/robot=a/run=r2"]
    groups = index.schema_groups("runs/*/*/frames.parquet")
    assert groups == [["runs/robot=a/run=r1/frames.parquet"], ["runs/robot=a/run=r2/frames.parquet"]]
    extra = index.partitions["runs/robot=a/run=r2"].files["frames.parquet"]
    assert ["target_idx", "int64"] in index.schemas[extra]
    con = connect(lake)
    assert con.execute("select run, count(*), count(target_idx) from frames group by run "
                       "order by run").fetchall() == [("r1", 3, 0), ("r2", 2, 2)]
    cols = [r[0] for r in con.execute("describe frames").fetchall()]
    assert cols[-2:] == ["robot", "run"] and "target_idx" in cols


def test_stale_index_sees_new_replaced_and_removed_partitions(tmp_path):
    lake = Lake(tmp_path)
    _publish(lake, "a", "r1", 3)
    _publish(lake, "a", "r2", 4)
    stored = index_path(tmp_path).read_bytes()
    # behind the index's back: a partition written in place, one replaced, one removed
    d = lake.run_dir("b", "r9")
    d.mkdir(parents=True)
    _writer(5)(d)
    _publish(lake, "a", "r1", 7, replace=True, target_idx=list(range(7)))
    index_path(tmp_path).write_bytes(stored)  # as if the index update had not happened
    shutil.rmtree(lake.run_dir("a", "r2"))
    con = connect(lake)
    assert _runs(con) == [("a", "r1", 7), ("b", "r9", 5)]
    assert con.execute("select count(target_idx) from frames").fetchone() == (7,)
    assert load_index(tmp_path).partitions.keys() == {"runs/robot=a/run=r1", "runs/robot=a/run=r2"}
    _publish(lake, "c", "r1", 1)  # the next writer reconciles the index with the disk
    assert sorted(load_index(tmp_path).partitions) == [
        "runs/robot=a/run=r1", "runs/robot=b/run=r9", "runs/robot=c/run=r1"]


@pytest.mark.parametrize("damage", ["delete", "corrupt", "wrong_format"])
def test_rebuild_restores_a_deleted_or_corrupt_index(tmp_path, damage):
    lake = Lake(tmp_path / "lake")
    for i in range(3):
        _publish(lake, "a", f"r{i}", i + 1)
    good = json.loads(index_path(lake.root).read_text())
    if damage == "delete":
        index_path(lake.root).unlink()
    elif damage == "corrupt":
        index_path(lake.root).write_text('{"format": 1, "partitions": {"runs/x": ')
    else:
        index_path(lake.root).write_text(json.dumps(good | {"format": 99}))
    if damage == "delete":
        assert load_index(lake.root) is None
    else:
        with pytest.warns(UserWarning, match="files.json: not a usable file index"):
            assert load_index(lake.root) is None
    with pytest.warns(UserWarning) if damage != "delete" else contextlib.nullcontext():
        assert _runs(connect(lake)) == [("a", "r0", 1), ("a", "r1", 2), ("a", "r2", 3)]
    result = CliRunner().invoke(app, ["catalog", "rebuild", "--lake", str(lake.root)])
    assert result.exit_code == 0, result.output
    assert "3 partitions, 6 files, 2 schemas" in result.output
    assert json.loads(index_path(lake.root).read_text()) == good


def test_rebuild_names_an_unreadable_parquet_file(tmp_path):
    lake = Lake(tmp_path)
    _publish(lake, "a", "r1", 3)
    bad = lake.run_dir("a", "r1") / "frames.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"r1/frames.parquet: not a readable Parquet file"):
        rebuild_index(tmp_path)
    result = CliRunner().invoke(app, ["catalog", "rebuild", "--lake", str(tmp_path)])
    assert result.exit_code == 1 and "frames.parquet" in result.output


def test_one_named_run_opens_only_its_own_files(tmp_path):
    lake = Lake(tmp_path)
    for i in range(4):
        _publish(lake, "a", f"r{i}", 50 + i)
    con = connect(lake)
    whole = clean_intervals(con).to_pylist()
    (lake.run_dir("a", "r0") / "frames.parquet").unlink()  # listed first: bind reads it
    with pytest.raises(Exception, match="r0"):
        con.execute("select count(*) from frames").fetchall()
    one = clean_intervals(con, robot="a", run="r1")
    assert one.to_pylist() == [r for r in whole if r["run"] == "r1"]
    # the narrowing lasts for the query only
    assert con.execute("select count(*) from runs").fetchone() == (4,)


_WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa, pyarrow.parquet as pq
    from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake, publish_partition
    lake, robot, count = Lake(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(count):
        def write(path, n=i + 1):
            cols = {f.name: pa.nulls(n, f.type) for f in FRAME_SCHEMA}
            cols["seq"] = pa.array(range(n), pa.int64())
            pq.write_table(pa.table(cols), path / "frames.parquet")
            row = {name: None for name in RUN_SCHEMA.names} | {"frame_count": n}
            pq.write_table(pa.Table.from_pylist([row], schema=RUN_SCHEMA), path / "run.parquet")
        publish_partition(lake, lake.run_relative(robot, f"r{i:03d}"), write)
""")

_READER = textwrap.dedent("""
    import sys, os
    from twinlake.catalog import connect
    seen, done = 0, sys.argv[2]
    while True:
        last = os.path.exists(done)
        con = connect(sys.argv[1])
        n, bad = con.execute("select count(*), count(*) filter (where frame_count is null) "
                             "from runs").fetchall()[0]
        con.execute("select count(*) from frames").fetchall()
        con.close()
        assert bad == 0 and n >= seen, (n, seen, bad)
        seen = n
        if last:
            break
    print(seen)
""")


def test_two_writers_and_a_reader_at_once(tmp_path):
    lake = tmp_path / "lake"
    lake.mkdir()
    done = tmp_path / "writers-done"
    count = 15
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(lake), str(done)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(lake), robot, str(count)],
                                stderr=subprocess.PIPE, text=True) for robot in ("left", "right")]
    for w in writers:
        _, err = w.communicate(timeout=240)
        assert w.returncode == 0, err
    done.touch()
    out, err = reader.communicate(timeout=240)
    assert reader.returncode == 0, err
    assert int(out.strip()) == 2 * count  # the reader's last pass saw every run
    index = load_index(lake)
    expected = {f"runs/robot={r}/run=r{i:03d}" for r in ("left", "right") for i in range(count)}
    assert set(index.partitions) == expected  # no writer lost the other's update
    assert index.partitions == current_files(lake).partitions
    con = connect(lake)
    assert con.execute("select count(*), sum(frame_count) from runs").fetchone() == (
        2 * count, 2 * sum(range(1, count + 1)))
