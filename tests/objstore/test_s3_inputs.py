"""Raw inputs in a bucket: `twinlake ingest s3://bucket/raw/ --lake …` against the test run's S3
server gives the runs a local ingest of the same files gives (same raw hashes, rows, kept raw
files), re-reads an object that changed, and refuses other URI schemes by name."""

from __future__ import annotations

import json

import boto3
from typer.testing import CliRunner

from twinlake.catalog import connect, open_lake
from twinlake.catalog.intervals import DEFAULT_RULES, stored_run_intervals
from twinlake.catalog.session import open_session
from twinlake.cli import app
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

ROWS = 900


def _twinlake(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _upload(directory, bucket: str, prefix: str) -> None:
    client = boto3.client("s3")
    for path in sorted(directory.iterdir()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes())


def _runs(lake: str) -> list[dict]:
    out = _twinlake("sql", "select run, raw_sha256, frame_count, raw_files from runs order by run",
                    "--lake", lake, "--format", "json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_ingest_from_a_bucket_prefix_is_a_local_ingest_of_the_same_files(s3_lake, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for seed, run in enumerate(("r1", "r2"), start=1):
        path = raw / f"{run}.csv"
        write_sample(path, SampleSpec(rows=ROWS, seed=seed), status=complete_status(path, ROWS))
    bucket = s3_lake.removeprefix("s3://").split("/")[0]
    _upload(raw, bucket, "fleet/raw")

    remote = _twinlake("ingest", f"s3://{bucket}/fleet/raw/", "--lake", s3_lake, "--robot", "fr3s", "--json")
    assert remote.exit_code == 0, remote.output
    assert [json.loads(line)["status"] for line in remote.stdout.splitlines()] == ["published", "published"]
    local = str(tmp_path / "lake")
    assert _twinlake("ingest", str(raw), "--lake", local, "--robot", "fr3s").exit_code == 0
    runs = _runs(s3_lake)
    assert runs == _runs(local) and len(runs) == 2  # same hashes, rows, kept raw files (names, sizes)
    assert {f["name"] for f in runs[0]["raw_files"]} >= {"r1.csv", "r1.status.json"}

    session = open_session(open_lake(s3_lake).location)  # what a fit command works on
    try:  # its runs' stored intervals are served there, not recomputed
        stored = stored_run_intervals(connect(session.root), "fr3s", "r1", DEFAULT_RULES)
        assert stored is not None and stored.num_rows >= 1
        assert not (session.root / "runs/robot=fr3s/run=r1/raw").exists()  # the archive stays in the bucket
    finally:
        session.close()

    again = _twinlake("ingest", f"s3://{bucket}/fleet/raw/r1.csv", "--lake", s3_lake, "--robot", "fr3s", "--json")
    assert json.loads(again.stdout)["status"] == "already_ingested", again.output
    write_sample(raw / "r1.csv", SampleSpec(rows=ROWS + 50, seed=7), status=complete_status(raw / "r1.csv", ROWS + 50))
    _upload(raw, bucket, "fleet/raw")  # the object changed: the mirror's copy is read again
    changed = _twinlake("ingest", f"s3://{bucket}/fleet/raw/r1.csv", "--lake", s3_lake, "--robot", "fr3s", "--json")
    assert changed.exit_code == 2 and json.loads(changed.stdout)["status"] == "refused", changed.output

    missing = _twinlake("ingest", f"s3://{bucket}/nothing/here/", "--lake", s3_lake, "--robot", "fr3s")
    assert missing.exit_code == 2 and "no object at or under this key" in missing.output
    other = _twinlake("ingest", "gs://fleet/raw/", "--lake", s3_lake, "--robot", "fr3s")
    assert other.exit_code == 2 and "'gs' scheme is not supported" in other.output
