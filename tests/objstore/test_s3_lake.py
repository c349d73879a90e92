"""`twinlake ingest FILE --lake s3://…` and `twinlake sql --lake s3://…` end to end against the
test run's local S3 server (moto over HTTP on 127.0.0.1; endpoint and credentials from the AWS
environment variables, as with AWS itself): the run lands in the bucket, nothing on local disk
is named after the URI, the catalog reads it back through Arrow datasets with the read lock
in place, and the lake's guarantees hold (same bytes: no-op; other bytes: refused; bad input:
quarantined in the bucket, raw kept)."""

from __future__ import annotations

import json
import os

import boto3
import pytest
from typer.testing import CliRunner

from twinlake.catalog import connect, open_lake
from twinlake.catalog.commit_log import CommitLog
from twinlake.catalog.intervals import DEFAULT_RULES, _query, run_query_params, stored_run_intervals
from twinlake.catalog.object_store import store_for
from twinlake.cli import app
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

ROWS = 1500


def _twinlake(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _recording(directory, name="run001.csv", seed=1):
    path = directory / name
    return write_sample(path, SampleSpec(rows=ROWS, seed=seed), status=complete_status(path, ROWS))


def _keys(s3_lake: str) -> list[str]:
    bucket = s3_lake.removeprefix("s3://").split("/")[0]
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_round_trip_through_the_bucket(s3_lake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    csv = _recording(tmp_path)
    first = _twinlake("ingest", str(csv), "--lake", s3_lake, "--robot", "fr3a", "--json")
    assert first.exit_code == 0, first.output
    outcome = json.loads(first.stdout)
    assert outcome["status"] == "published"
    assert outcome["partition"] == f"{s3_lake}/runs/robot=fr3a/run=run001"
    keys = _keys(s3_lake)
    data = [k for k in keys if k.startswith("lake/runs/robot=fr3a/run=run001/c-")]
    assert {k.rsplit("/", 1)[1] for k in data} >= {"frames.parquet", "run.parquet", "intervals.parquet",
                                                  "run001.csv.zst"}
    assert "lake/_log/00000000000000000001.json" in keys
    assert not any(k.startswith("lake/_staging/") for k in keys)  # the lease went with the commit
    assert sorted(os.listdir(tmp_path)) == ["run001.csv", "run001.status.json"]  # no local "s3:" dir

    again = _twinlake("ingest", str(csv), "--lake", s3_lake, "--robot", "fr3a", "--json")
    assert json.loads(again.stdout)["status"] == "already_ingested", again.output
    (tmp_path / "other").mkdir()
    other = _recording(tmp_path / "other", seed=2)  # same run id, other bytes
    refused = _twinlake("ingest", str(other), "--lake", s3_lake, "--robot", "fr3a", "--json")
    assert refused.exit_code == 2 and json.loads(refused.stdout)["status"] == "refused"
    assert CommitLog(store_for(open_lake(s3_lake).location)).versions() == [1]

    out = _twinlake("sql", "select robot, run, count(*) n, min(seq), max(seq) from frames group by all",
                    "--lake", s3_lake, "--format", "json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"robot": "fr3a", "run": "run001", "n": ROWS,
                                       "min(seq)": 0, "max(seq)": ROWS - 1}]
    runs = _twinlake("catalog", "runs", "--lake", s3_lake, "--json")
    assert [(r["run"], r["frame_count"]) for r in json.loads(runs.stdout)] == [("run001", ROWS)]
    # `twinlake intervals` reads the bucket as `sql` does: the rows a local lake of the same file gives
    local = str(tmp_path / "local-lake")
    assert _twinlake("ingest", str(csv), "--lake", local, "--robot", "fr3a").exit_code == 0
    for extra in ([], ["--run", "run001"]):
        in_bucket = _twinlake("intervals", "--lake", s3_lake, "--json", *extra)
        assert in_bucket.exit_code == 0, in_bucket.output
        rows = json.loads(in_bucket.stdout)
        assert rows == json.loads(_twinlake("intervals", "--lake", local, "--json", *extra).stdout)
        assert [(r["run"], r["frame_count"]) for r in rows] == [("run001", ROWS)]
    unknown = _twinlake("intervals", "--lake", s3_lake, "--run", "nope")
    assert unknown.exit_code == 1 and f"lake {s3_lake}: no run with run 'nope'" in unknown.output


def test_the_catalog_of_a_bucket_stays_locked(s3_lake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _twinlake("ingest", str(_recording(tmp_path)), "--lake", s3_lake, "--robot", "fr3a").exit_code == 0
    con = connect(open_lake(s3_lake))
    rows = con.execute("select count(*) from clean_intervals('fr3a', 'run001')").fetchall()
    assert rows[0][0] >= 1
    # the run's intervals.parquet, stored at publish, is served from the bucket: the same rows
    # as the rules' query over the Arrow datasets
    stored = stored_run_intervals(con, "fr3a", "run001", DEFAULT_RULES)
    queried = _query(con, "fr3a", "run001", run_query_params("fr3a", "run001", DEFAULT_RULES))
    assert stored is not None and stored.num_rows == rows[0][0]
    assert stored.to_pylist() == queried.to_pylist()
    for query in (f"select * from read_parquet('{s3_lake}/runs/*/*/*/frames.parquet')",
                  "select * from read_csv('/etc/passwd')", "INSTALL httpfs"):
        with pytest.raises(Exception, match="(?i)permission|refused|disabled|not allowed"):
            con.execute(query).fetchall()
    assert not (tmp_path / ".duckdb").exists()


def test_bad_input_is_quarantined_in_the_bucket(s3_lake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "broken.csv"
    bad.write_text("seq,t_s\n0,0.0\n1,not-a-number\n")
    out = _twinlake("ingest", str(bad), "--lake", s3_lake, "--robot", "fr3a", "--json")
    assert out.exit_code == 1, out.output
    outcome = json.loads(out.stdout)
    assert outcome["status"] == "rejected" and outcome["quarantine"].startswith(f"{s3_lake}/_quarantine/")
    keys = _keys(s3_lake)
    assert any(k.startswith("lake/_quarantine/") and k.endswith("/broken.csv") for k in keys)
    assert any(k.endswith("/reason.json") for k in keys)
    assert not any(k.startswith("lake/runs/") or k.startswith("lake/_log/") for k in keys)
    assert bad.read_text().startswith("seq,t_s")  # the input kept


def test_quick_fit_replay_and_the_refusals_on_a_bucket(s3_lake, tmp_path, monkeypatch):
    """`fit quick` and `sim replay` read a bucket lake (a session copy) as they read a local lake
    of the same file (same refusal, same replay errors), and commit nothing; `catalog rebuild` and `demo` refuse a bucket, saying why."""
    monkeypatch.chdir(tmp_path)
    csv = _recording(tmp_path)
    local = str(tmp_path / "local-lake")
    for lake in (s3_lake, local):
        assert _twinlake("ingest", str(csv), "--lake", lake, "--robot", "fr3a").exit_code == 0
    # the synthetic sample is no arm's physics: the quick fit refuses it, in the same words (the
    # same -1/I from the same rows) from the bucket as from the local lake
    quick = [_twinlake("fit", "quick", "run001", "--joint", "2", "--json", "--lake", lake)
             for lake in (s3_lake, local)]
    assert [q.exit_code for q in quick] == [2, 2] and quick[0].output == quick[1].output
    assert "quick fit of run001 J2 refused: the torque term 1/I came out" in quick[0].output
    replayed = {}
    for lake, out_dir in ((s3_lake, "from-bucket"), (local, "from-local")):
        out = _twinlake("sim", "replay", "run001", "--out", str(tmp_path / out_dir), "--json", "--lake", lake)
        assert out.exit_code == 0, out.output
        replayed[lake] = json.loads(out.stdout)["q_rmse_vs_recording_rad"]
    assert replayed[s3_lake] == replayed[local]
    assert CommitLog(store_for(open_lake(s3_lake).location)).versions() == [1]  # read, nothing committed
    rebuild = _twinlake("catalog", "rebuild", "--lake", s3_lake)
    assert rebuild.exit_code == 2 and "keeps no file index to rebuild" in rebuild.output
    demo = _twinlake("demo", "--lake", s3_lake)
    assert demo.exit_code == 2 and "the demo needs a local lake directory" in demo.output
