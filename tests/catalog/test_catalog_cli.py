"""`twinlake sql` and `twinlake catalog runs` on a real lake (in-process on the real
commands), and the whole new-user path through the installed `twinlake` script."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from twinlake.catalog import Lake
from twinlake.cli import app
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions
from twinlake.ingest.samples import SampleSpec, write_sample


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("catcli")
    lake = Lake(root / "lake")
    paths = [write_sample(root / "r1.csv", SampleSpec(rows=300)),
             write_sample(root / "r2.csv", SampleSpec(rows=200, gap_at=(50,), seed=2))]
    outcomes = list(ingest_paths(lake, paths, ReadOptions(robot="fr3")))
    assert [o.status for o in outcomes] == ["published", "published"]
    return lake


@pytest.fixture(scope="module")
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_sql_formats(cli, lake, tmp_path):
    q = "select run, count(*) as n, max(seq) as last from frames group by run order by run"
    as_json = cli("sql", q, "--format", "json", "--lake", lake.root)
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == [{"run": "r1", "n": 300, "last": 299},
                                          {"run": "r2", "n": 200, "last": 201}]
    as_csv = cli("sql", q, "--format", "csv", "--lake", lake.root)
    assert list(csv.reader(io.StringIO(as_csv.stdout))) == [
        ["run", "n", "last"], ["r1", "300", "299"], ["r2", "200", "201"]]
    query_file = tmp_path / "q.sql"
    query_file.write_text(q + ";\n")
    table = cli("sql", "--file", query_file, "--lake", lake.root)
    assert table.exit_code == 0 and "r2" in table.stdout and "(2 rows)" in table.stdout


def test_sql_errors_are_one_line(cli, lake):
    bad = cli("sql", "select nope from frames", "--lake", lake.root)
    assert bad.exit_code == 1 and bad.stderr.startswith("error: query failed")
    assert len(bad.stderr.strip().splitlines()) == 1
    fmt = cli("sql", "select 1", "--format", "xml", "--lake", lake.root)
    assert fmt.exit_code == 2 and "--format" in fmt.stderr
    neither = cli("sql", "--lake", lake.root)
    assert neither.exit_code == 2


def test_catalog_runs(cli, lake, tmp_path):
    out = cli("catalog", "runs", "--json", "--lake", lake.root)
    runs = {r["run"]: r for r in json.loads(out.stdout)}
    assert runs["r1"]["frame_count"] == 300 and runs["r2"]["gap_count"] == 1
    assert runs["r2"]["flags"] == ["seq_gaps"] and runs["r1"]["verdict"] == "ok"
    table = cli("catalog", "runs", "--lake", lake.root)
    assert table.exit_code == 0 and "fr3_stack_csv" in table.stdout
    empty = cli("catalog", "runs", "--json", "--lake", tmp_path / "none")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []


def _installed_script() -> str | None:
    """The `twinlake` console script of the running interpreter's environment, else on PATH."""
    beside = Path(sys.executable).with_name("twinlake")
    return str(beside) if beside.exists() else shutil.which("twinlake")


@pytest.mark.skipif(_installed_script() is None, reason="console script not installed")
def test_new_user_path_through_installed_script(tmp_path):
    exe = _installed_script()
    csv_path = write_sample(tmp_path / "run7.csv", SampleSpec(rows=500, gap_at=(9,)))
    env_lake = tmp_path / "lake"
    run = subprocess.run([exe, "ingest", csv_path, "--robot", "fr3-new", "--lake", env_lake],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    sql = subprocess.run([exe, "sql", "select count(*) n, min(seq) lo, max(seq) hi from frames",
                          "--format", "json", "--lake", env_lake],
                         capture_output=True, text=True, timeout=120)
    assert sql.returncode == 0, sql.stderr
    assert json.loads(sql.stdout) == [{"n": 500, "lo": 0, "hi": 501}]
