"""A lake is a local directory: a URI given as `--lake` or `$TWINLAKE_LAKE` is refused by its
scheme, as one line, and never becomes a local directory named after it (`Path('s3://b/p')` is
the relative directory `s3:/b/p`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from twinlake.catalog import resolve_lake
from twinlake.catalog.lake import local_lake_path


def _run(args: list[str], cwd, env_lake: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TWINLAKE_LAKE"}
    if env_lake is not None:
        env["TWINLAKE_LAKE"] = env_lake
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("uri", ["s3://twin/lake", "gs://bucket/x", "file:///tmp/lake"])
def test_the_rule_refuses_a_uri_by_its_scheme(uri):
    with pytest.raises(ValueError, match=r"scheme is not supported.*") as err:
        local_lake_path(uri)
    assert repr(uri.split("://")[0]) in str(err.value)
    assert local_lake_path("lakes/s3-copy").as_posix() == "lakes/s3-copy"


def test_resolve_lake_refuses_a_uri_in_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TWINLAKE_LAKE", "s3://twin/lake")
    with pytest.raises(ValueError, match=r"\$TWINLAKE_LAKE 's3://twin/lake'"):
        resolve_lake(None)
    assert resolve_lake(tmp_path / "lake") == tmp_path / "lake"


def test_ingest_and_sql_refuse_an_s3_lake_and_write_nothing(tmp_path):
    csv = tmp_path / "run.csv"
    csv.write_text("a,b\n1,2\n")
    cases = [
        (["twinlake", "ingest", str(csv), "--lake", "s3://twin/lake"], None),
        (["twinlake", "sql", "select 1", "--lake", "s3://twin/lake"], None),
        (["twinlake", "ingest", str(csv)], "s3://twin/lake"),
        (["twinlake.ingest", str(csv)], "s3://twin/lake"),
        (["twinlake", "fit", "list"], "s3://twin/lake"),
    ]
    for args, env_lake in cases:
        out = _run(args, tmp_path, env_lake)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "'s3' scheme is not supported" in " ".join(out.stderr.replace("│", " ").split()), (args, out.stderr)
        assert "Traceback" not in out.stderr, (args, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv"]
