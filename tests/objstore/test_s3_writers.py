"""Writers of an `s3://` lake as separate processes against the test run's local S3 server:
two ingests of one run (exactly one publishes), and writers SIGKILLed during a publish (nothing
partial visible, nothing that blocks the next ingest, the orphan reclaimed once its lease
expires).

moto checks `If-None-Match: *` without a lock: two truly simultaneous PUTs of one key could
both succeed there, as they cannot on S3. So the race test proves that the loser handles the
server's refusal and that nothing partial is visible, not the server's atomicity."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from twinlake.catalog import connect, open_lake
from twinlake.catalog.commit_log import CommitLog
from twinlake.catalog.object_publish import reclaim_staging
from twinlake.catalog.object_store import store_for
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

ROWS = 10_000


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("writers") / "race.csv"
    return write_sample(path, SampleSpec(rows=ROWS, seed=7), status=complete_status(path, ROWS))


def _cmd(recording, s3_lake: str) -> list[str]:
    return [sys.executable, "-m", "twinlake.ingest", str(recording), "--lake", s3_lake, "--robot", "fr3r", "--json"]


def _visible(s3_lake: str) -> list[tuple]:
    con = connect(open_lake(s3_lake))
    return con.execute("select run, count(*), min(seq), max(seq) from frames group by run").fetchall()


def _keys(s3_lake: str, under: str) -> list[str]:
    bucket = s3_lake.removeprefix("s3://").split("/")[0]
    listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"lake/{under}")
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_two_processes_ingesting_one_run_publish_it_once(recording, s3_lake, tmp_path):
    procs = [subprocess.Popen(_cmd(recording, s3_lake), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=180) + (p.returncode,) for p in procs]
    assert [rc for _, _, rc in results] == [0, 0], results
    assert sorted(json.loads(out)["status"] for out, _, _ in results) == ["already_ingested", "published"]
    assert CommitLog(store_for(open_lake(s3_lake).location)).versions() == [1]
    assert _visible(s3_lake) == [("race", ROWS, 0, ROWS - 1)]
    # the loser (if it got as far as uploading) deleted its prefix: one commit prefix is left
    prefixes = {k.split("/")[4] for k in _keys(s3_lake, "runs/")}
    assert len(prefixes) == 1 and _keys(s3_lake, "_staging/") == []


def _kill_when(recording, s3_lake, cwd, ready) -> str:
    """Start an ingest, SIGKILL it once `ready()` holds (polled); returns what was seen."""
    proc = subprocess.Popen(_cmd(recording, s3_lake), cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.005)
    exited = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    return "exited before the kill" if exited else "killed"


def test_sigkill_during_a_publish_leaves_nothing_visible_and_blocks_nothing(recording, s3_lake, tmp_path):
    points = {
        "while parsing (lease not written yet)": lambda: time.sleep(0.8) or True,
        "lease written, upload starting": lambda: bool(_keys(s3_lake, "_staging/")),
        "some data uploaded, not committed": lambda: bool(_keys(s3_lake, "runs/")),
    }
    seen = {}
    for point, ready in points.items():
        seen[point] = _kill_when(recording, s3_lake, tmp_path, ready)
        assert _visible(s3_lake) in ([], [("race", ROWS, 0, ROWS - 1)]), point
    assert list(seen.values()).count("killed") >= 2, seen
    committed_before = CommitLog(store_for(open_lake(s3_lake).location)).versions()
    final = subprocess.run(_cmd(recording, s3_lake), cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr
    status = json.loads(final.stdout)["status"]
    assert status == ("already_ingested" if committed_before else "published")
    assert _visible(s3_lake) == [("race", ROWS, 0, ROWS - 1)]
    # once the killed writers' leases expire, their uncommitted prefixes go, the committed stays
    lake = open_lake(s3_lake)
    reclaim_staging(lake, now=datetime.now(timezone.utc) + timedelta(hours=2))
    assert _keys(s3_lake, "_staging/") == []
    assert len({k.split("/")[4] for k in _keys(s3_lake, "runs/")}) == 1
    assert _visible(s3_lake) == [("race", ROWS, 0, ROWS - 1)]
