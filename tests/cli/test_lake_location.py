"""Where a lake may be: a local directory or `s3://bucket/prefix`. A URI of any other scheme
given as `--lake` or `$TWINLAKE_LAKE` is refused by its scheme, as one line, and never becomes
a local directory named after it (`Path('gs://b/p')` is the relative directory `gs:/b/p`); a
command that needs a local directory says so of an `s3://` lake, as one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from twinlake.catalog import ObjectStorageLake, open_lake, parse_location, resolve_lake


def _run(args: list[str], cwd, env_lake: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TWINLAKE_LAKE"}
    if env_lake is not None:
        env["TWINLAKE_LAKE"] = env_lake
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("uri", ["gs://bucket/x", "file:///tmp/lake", "HTTPS://host/lake"])
def test_the_rule_refuses_other_schemes_by_name(uri):
    with pytest.raises(ValueError, match=r"scheme is not supported.*") as err:
        parse_location(uri)
    assert repr(uri.split("://")[0]) in str(err.value)


def test_s3_and_local_paths_are_locations():
    s3 = parse_location("s3://twin/fleet/lake/")
    assert (s3.bucket, s3.prefix, s3.uri, s3.key("_log/1.json")) == (
        "twin", "fleet/lake", "s3://twin/fleet/lake", "fleet/lake/_log/1.json")
    assert parse_location("s3://twin").key("runs") == "runs"
    assert parse_location("lakes/s3-copy").path.as_posix() == "lakes/s3-copy"
    for bad in ("s3://", "s3://UPPER/x", "s3://twin/a/../b"):
        with pytest.raises(ValueError, match="s3://"):
            parse_location(bad)


def test_resolve_lake_wants_a_directory_open_lake_takes_both(monkeypatch, tmp_path):
    monkeypatch.setenv("TWINLAKE_LAKE", "s3://twin/lake")
    with pytest.raises(ObjectStorageLake, match=r"s3://twin/lake.*needs a local lake directory"):
        resolve_lake(None)
    lake = open_lake(None)
    assert lake.remote and lake.location.uri == "s3://twin/lake"
    assert lake.shown("runs/robot=a/run=b") == "s3://twin/lake/runs/robot=a/run=b"
    assert resolve_lake(tmp_path / "lake") == tmp_path / "lake"


def test_commands_refuse_an_unsupported_lake_as_one_line_and_write_nothing(tmp_path):
    csv = tmp_path / "run.csv"
    csv.write_text("a,b\n1,2\n")
    cases = [
        (["twinlake", "ingest", str(csv), "--lake", "gs://twin/lake"], None, "'gs' scheme is not supported"),
        (["twinlake", "sql", "select 1", "--lake", "gs://twin/lake"], None, "'gs' scheme is not supported"),
        (["twinlake", "ingest", str(csv)], "file:///twin/lake", "'file' scheme is not supported"),
        (["twinlake.ingest", str(csv)], "gs://twin/lake", "'gs' scheme is not supported"),
        (["twinlake", "catalog", "rebuild"], "s3://twin/lake", "keeps no file index to rebuild"),
        (["twinlake", "demo", "--lake", "s3://twin/lake"], None, "the demo needs a local lake directory"),
        (["twinlake", "intervals", "--lake", "gs://twin/lake"], None, "'gs' scheme is not supported"),
    ]
    for args, env_lake, words in cases:
        out = _run(args, tmp_path, env_lake)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert words in " ".join(out.stderr.replace("│", " ").split()), (args, out.stderr)
        assert "Traceback" not in out.stderr, (args, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv"]
