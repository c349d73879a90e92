"""A read-only catalog connection (`connect(lake)`, `twinlake sql`) reads the lake and the paths
its caller names, nothing else, and never installs or loads a DuckDB extension (a real DuckDB
over a real lake; each statement is one a user could type)."""

from __future__ import annotations

import duckdb
import pytest
from typer.testing import CliRunner

from null_run import null_run_lake

from twinlake.catalog import Lake, connect


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh $HOME: DuckDB would put installed extensions and stored secrets under it."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def lake(tmp_path) -> Lake:
    return null_run_lake(tmp_path / "lake", 3)


@pytest.fixture
def outside(tmp_path):
    """A directory beside the lake (whose name starts with the lake's) holding a secret."""
    d = tmp_path / "lake2"
    d.mkdir()
    (d / "secret.csv").write_text("token\nhunter2\n")
    return d


OUTSIDE = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/shadow')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_csv('{outside}/secret.csv')",
    "SELECT * FROM read_text('{lake}/../lake2/secret.csv')",
    "SELECT * FROM glob('{outside}/*')",
]
NETWORK = [
    "SELECT * FROM read_csv('https://example.com/data.csv')",
    "FROM 's3://bucket/frames.parquet'",
    "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')",
    "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
    "CREATE PERSISTENT SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
]


SETTINGS = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false",
            "enable_external_access": "false", "lock_configuration": "true"}


@pytest.mark.parametrize("statement", OUTSIDE + NETWORK)
def test_nothing_outside_the_lake_is_read_and_no_extension_is_fetched(lake, outside, home, statement):
    con = connect(lake)
    sql = statement.format(lake=lake.root, outside=outside)
    with pytest.raises(duckdb.Error) as err:
        con.execute(sql).fetchall()
    assert "hunter2" not in str(err.value)
    assert isinstance(err.value, (duckdb.PermissionException, duckdb.InvalidInputException,
                                  duckdb.CatalogException)), err.value
    assert "extension" not in str(err.value).lower()  # refused before any extension is sought
    assert not (home / ".duckdb").exists()
    # the lake itself stays readable, through the views and by path
    assert con.execute("SELECT count(*) FROM frames").fetchone() == (3,)
    assert con.execute("SELECT count(*) FROM read_parquet(getvariable('lake_root') || "
                       "'/runs/*/*/frames.parquet')").fetchone() == (3,)


def test_the_settings_that_confine_it_cannot_be_undone(lake, outside):
    con = connect(lake)
    settings = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                                "(SELECT unnest(?))", [list(SETTINGS)]).fetchall())
    assert settings == SETTINGS
    for statement in ("SET enable_external_access = true", "SET allowed_directories = ['/']",
                      "SET allowed_paths = ['/etc/passwd']", "SET autoload_known_extensions = true",
                      "SET autoinstall_known_extensions = true", "RESET allowed_directories"):
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute(statement)
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"SELECT * FROM read_csv('{outside}/secret.csv')")


def test_paths_the_caller_names_are_readable_and_only_those(lake, outside, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("x\n1\n")
    con = connect(lake, readable=[outside])
    assert con.execute(f"SELECT * FROM read_csv('{outside}/secret.csv')").fetchall() == [("hunter2",)]
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"SELECT * FROM read_csv('{other}')")
    con = connect(lake, readable=[other])
    assert con.execute(f"SELECT * FROM read_csv('{other}')").fetchall() == [(1,)]
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"SELECT * FROM read_csv('{outside}/secret.csv')")


def test_twinlake_sql_reads_outside_the_lake_only_what_read_names(lake, outside, home):
    from twinlake.cli import app

    query = f"SELECT * FROM read_csv('{outside}/secret.csv')"
    res = CliRunner().invoke(app, ["sql", query, "--lake", str(lake.root)])
    assert res.exit_code == 1 and "hunter2" not in res.output
    assert "query failed" in res.output and "secret.csv" in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = CliRunner().invoke(app, ["sql", "SELECT * FROM read_text('/etc/passwd')", "--lake", str(lake.root)])
    assert res.exit_code == 1 and "root:" not in res.output
    res = CliRunner().invoke(app, ["sql", query, "--lake", str(lake.root), "--read",
                                   str(outside / "secret.csv"), "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.splitlines() == ["token", "hunter2"]
    assert not (home / ".duckdb").exists()
