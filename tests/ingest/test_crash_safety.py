"""Crash safety of `twinlake ingest`, with real processes: SIGKILL at random moments never
leaves a partial partition visible to the views, and a re-run completes the ingest; two
processes racing on the same file publish it exactly once and both exit 0.

Manual 20-kill check (documented in docs/lake.md):
    TWINLAKE_CRASH_KILLS=20 TWINLAKE_INGEST_CMD="twinlake ingest" \\
        pytest tests/ingest/test_crash_safety.py -q
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from twinlake.catalog import Lake, connect

KILLS = int(os.environ.get("TWINLAKE_CRASH_KILLS", "5"))
CMD = shlex.split(os.environ.get("TWINLAKE_INGEST_CMD", "")) or [
    sys.executable, "-m", "twinlake.ingest"]
ROWS = 20_000


def _cmd(path: Path, lake: Lake) -> list[str]:
    return [*CMD, str(path), "--lake", str(lake.root), "--robot", "fr3-crash", "--json"]


def _visible(lake: Lake) -> list[tuple]:
    con = connect(lake)
    return con.execute("select run, count(*), min(seq), max(seq) from frames "
                       "group by run").fetchall()


def _assert_whole_or_nothing(lake: Lake) -> None:
    rows = _visible(lake)
    assert rows in ([], [("crash", ROWS, 0, ROWS - 1)]), rows
    for part in lake.runs_dir.glob("*/*") if lake.runs_dir.exists() else []:
        assert {"frames.parquet", "run.parquet", "raw"} <= {p.name for p in part.iterdir()}


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

    path = tmp_path_factory.mktemp("crash") / "crash.csv"
    return write_sample(path, SampleSpec(rows=ROWS, seed=4),
                        status=complete_status(path, ROWS))


def test_sigkill_at_random_moments_then_rerun(recording, tmp_path):
    lake = Lake(tmp_path / "lake")
    started = time.monotonic()
    probe = subprocess.run(_cmd(recording, Lake(tmp_path / "probe")), capture_output=True,
                           text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    full_s = time.monotonic() - started
    rng = random.Random(20261129)
    killed_before_exit = 0
    for _ in range(KILLS):
        proc = subprocess.Popen(_cmd(recording, lake), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, full_s))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed_before_exit += 1
        proc.wait(60)
        _assert_whole_or_nothing(lake)
    assert killed_before_exit >= 1
    final = subprocess.run(_cmd(recording, lake), capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["status"] in ("published", "already_ingested")
    assert _visible(lake) == [("crash", ROWS, 0, ROWS - 1)]
    assert connect(lake).execute("select count(*) from runs").fetchone() == (1,)
    assert list(lake.staging_dir.iterdir()) == []  # orphans of killed runs were cleaned


def test_two_processes_racing_on_one_file(recording, tmp_path):
    lake = Lake(tmp_path / "lake")
    procs = [subprocess.Popen(_cmd(recording, lake), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert [rc for _, _, rc in results] == [0, 0], results
    statuses = sorted(json.loads(out)["status"] for out, _, _ in results)
    assert statuses == ["already_ingested", "published"]
    assert _visible(lake) == [("crash", ROWS, 0, ROWS - 1)]
    assert connect(lake).execute("select count(*) from runs").fetchone() == (1,)
