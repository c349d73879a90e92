"""Fits, validations, verdicts and campaigns on a bucket lake (`--lake s3://…`), end to end
against the test run's S3 server: each command works on a local copy of the bucket's snapshot
and commits what it published to the bucket's log; the fit is the one a local lake with the
same runs gives; `fit run --as-of V` reads version V while the lake moves on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from typer.testing import CliRunner

from twinlake.catalog import open_lake, publish_partition
from twinlake.catalog.commit_log import CommitLog
from twinlake.catalog.object_store import store_for
from twinlake.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "campaign"))

import synth  # noqa: E402
from campaign_inputs import FIT_ID, make_fit, make_reference  # noqa: E402

FIT = ["--train", "r1", "--holdout", "r3", "--params", "dynamic_ratio=0.6", "--population", "6",
       "--generations", "2", "--seed", "3", "--max-seconds", "0.3", "--method", "cma", "--refine", "0",
       "--loop-noise-draws", "0", "--workers", "0"]


def _twinlake(*args: str):
    out = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return out


def _partitions(s3_lake: str) -> dict[str, int]:
    snap = CommitLog(store_for(open_lake(s3_lake).location)).snapshot()
    return {p: c.version for p, c in snap.partitions.items()}


def _vector(lake: str, fit: str) -> list[float]:
    shown = _twinlake("fit", "show", fit, "--lake", lake, "--json")
    assert shown.exit_code == 0, shown.output
    params = json.loads(shown.stdout)["params"]
    return [params[k] for k in sorted(params)]


def test_fit_validate_show_export_report_and_a_rerun_at_its_version_on_a_bucket(s3_lake, tmp_path):
    synth.publish_demo_runs(open_lake(s3_lake), 1200)
    local = synth.publish_demo_runs(tmp_path / "local", 1200)
    made = _twinlake("fit", "run", *FIT, "--id", "f1", "--lake", s3_lake, "--json")
    assert made.exit_code == 0, made.output
    assert f"committed {s3_lake}/fits/fit=f1/c-" in made.stderr
    parts = _partitions(s3_lake)
    assert parts["fits/fit=f1"] == 4 and any(p.startswith("verdicts/fit=f1/") for p in parts)
    shown = _twinlake("fit", "show", "f1", "--lake", s3_lake)
    assert "lake version read: 3" in " ".join(shown.output.split()), shown.output
    same = _twinlake("fit", "run", *FIT, "--id", "f1", "--lake", str(local), "--json")
    assert same.exit_code == 0, same.output
    assert _vector(s3_lake, "f1") == _vector(str(local), "f1")  # the bucket's fit is the local lake's

    checked = _twinlake("fit", "validate", "f1", "--runs", "r3", "--max-q-rmse-rad", "1.0", "--lake", s3_lake)
    assert checked.exit_code in (0, 1), checked.output
    assert any(p.startswith("validations/") for p in _partitions(s3_lake))
    out = tmp_path / "f1.json"
    exported = _twinlake("fit", "export", "f1", "--out", str(out), "--force", "--lake", s3_lake)
    assert exported.exit_code == 0, exported.output
    assert "f1" in out.read_text()
    report = _twinlake("fit", "report", "f1", "--out", str(tmp_path / "report"), "--lake", s3_lake)
    assert report.exit_code == 0 and (tmp_path / "report" / "index.html").is_file(), report.output
    again = _twinlake("fit", "run", *FIT, "--id", "f1", "--lake", s3_lake)
    assert again.exit_code == 2 and "already" in again.output  # the bucket's fit is refused locally too
    sessions = open_lake(s3_lake).root / "sessions"
    assert not any(sessions.iterdir())  # every command's local copy is gone

    # the lake moves on: a new run, and r1 itself replaced by another recording
    bucket = open_lake(s3_lake)
    synth.publish_run(bucket, "demo", "r4", synth.record(synth.TRUTH, 1200, seed=4))
    synth.publish_run(tmp_path / "scratch", "demo", "r1", synth.record(synth.TRUTH, 1200, seed=9))
    src = tmp_path / "scratch/runs/robot=demo/run=r1"
    publish_partition(bucket, "runs/robot=demo/run=r1",
                      lambda d: [(d / f.name).write_bytes(f.read_bytes()) for f in src.glob("*.parquet")], replace=True)
    at = _twinlake("fit", "run", *FIT, "--id", "f1-again", "--as-of", "3", "--lake", s3_lake)
    assert at.exit_code == 0, at.output
    now = _twinlake("fit", "run", *FIT, "--id", "latest", "--lake", s3_lake)
    assert now.exit_code == 0, now.output
    assert _vector(s3_lake, "f1-again") == _vector(s3_lake, "f1")  # version 3 re-read: bit for bit
    assert _vector(s3_lake, "latest") != _vector(s3_lake, "f1")    # the replaced r1 is read now
    _resume_reads_the_version_it_started_from(s3_lake)
    refused = _twinlake("fit", "run", *FIT, "--as-of", "3", "--lake", str(local))
    assert refused.exit_code == 2 and "needs a lake on object storage" in refused.output


class _Stop(Exception):
    pass


def _resume_reads_the_version_it_started_from(s3_lake: str) -> None:
    """f1's settings, started at version 3 and stopped after its first generation (its driver
    gone: nothing pushed), then `--resume` once r1 was replaced: the version it started from is
    read again, and the fit is f1 bit for bit."""
    from twinlake.catalog.session import open_session
    from twinlake.fit.run import FitSettings, run_fit

    shown = json.loads(_twinlake("fit", "show", "f1", "--lake", s3_lake, "--json").stdout)
    at3 = open_session(open_lake(s3_lake).location, as_of=3)
    try:
        with pytest.raises(_Stop):
            run_fit(at3.root, FitSettings(**shown["settings"]), fit_id="stopped", workers=0, progress=False,
                    on_generation=lambda gen, pool: (_ for _ in ()).throw(_Stop()))
    finally:
        at3.close()
    resumed = _twinlake("fit", "run", "--resume", "stopped", "--workers", "0", "--lake", s3_lake)
    assert resumed.exit_code == 0, resumed.output
    assert _vector(s3_lake, "stopped") == _vector(s3_lake, "f1")


def test_a_campaign_on_a_bucket_resumes_from_its_commit(s3_lake, tmp_path):
    make_fit(open_lake(s3_lake))
    reference = make_reference(tmp_path / "excite")
    args = ["campaign", "run", "--fit", FIT_ID, "--reference", str(reference), "--workers", "0", "--id", "cb",
            "--episodes", "2", "--lake", s3_lake]
    first = _twinlake(*args)
    assert first.exit_code == 0, first.output
    assert "campaign cb: 2/2 episodes (2 run now, 0 before" in first.output
    v1 = _partitions(s3_lake)["campaigns/campaign=cb"]
    shown = json.loads(_twinlake("campaign", "show", "cb", "--lake", s3_lake, "--json").stdout)
    listed = json.loads(_twinlake("campaign", "list", "--lake", s3_lake, "--json").stdout)
    assert listed[0]["campaign"] == "cb" and listed[0]["done"] == shown["done"] == 2
    rerun = _twinlake(*args)  # resumed from the bucket's commit: nothing left to run
    assert rerun.exit_code == 0 and "(0 run now, 2 before" in rerun.output, rerun.output
    assert _partitions(s3_lake)["campaigns/campaign=cb"] > v1  # the invocation's manifest, committed
