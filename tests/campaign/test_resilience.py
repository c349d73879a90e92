"""Atomicity and retries with real processes: SIGKILL the driver mid-campaign and run the same
command again; lose a Ray worker for real and let the next invocation retry its episodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from campaign_inputs import FIT_ID
from twinlake.campaign import CampaignRequest, CampaignStore, run_campaign
from twinlake.campaign.execution import FAULT_ENV

EPISODES = 14


def _command(lake, reference) -> list[str]:
    return [sys.executable, "-m", "twinlake", "campaign", "run", "--fit", FIT_ID, "--reference", str(reference),
            "--episodes", str(EPISODES), "--workers", "0", "--chunk", "1", "--id", "k", "--lake", str(lake)]


def test_sigkill_of_the_driver_then_the_same_command_completes_exactly_once(lake, reference):
    store = CampaignStore(lake, "k")
    proc = subprocess.Popen(_command(lake, reference), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(store.done()) < 3 and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    first = store.done()
    assert 3 <= len(first) < EPISODES
    for path in store.episodes_dir.iterdir():  # nothing partial is visible
        assert (path / "summary.json").is_file() and path.name.startswith("e")
    out = subprocess.run(_command(lake, reference), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{EPISODES}/{EPISODES} episodes" in out.stdout
    assert sorted(store.done()) == [f"e{i:06d}" for i in range(EPISODES)]
    assert list(store.tmp_dir.iterdir()) == []
    lines = (store.root / "summary.csv").read_text().splitlines()
    assert len(lines) == EPISODES + 1
    jsonl = [json.loads(line)["episode_id"] for line in (store.root / "summary.jsonl").read_text().splitlines()]
    assert len(jsonl) == len(set(jsonl))  # no episode finished twice
    assert set(jsonl) >= store.done() - first  # every episode of the second invocation is logged
    manifests = list(store.root.glob("manifest_*.json"))
    assert len(manifests) == 1  # the killed invocation never got to write one
    counts = json.loads(manifests[0].read_text())["counts"]
    assert counts["already_done"] == len(first) and counts["ran"] == EPISODES - len(first)


@pytest.mark.slow
def test_a_killed_ray_worker_is_an_infrastructure_error_retried_next_time(lake, reference, tmp_path, monkeypatch):
    marker = tmp_path / "killed-once"
    monkeypatch.setenv(FAULT_ENV, f"kill_worker:e000005:{marker}")
    req = CampaignRequest(fit=FIT_ID, episodes=8, reference_csv=str(reference), campaign_id="ray", chunk_episodes=2)
    report = run_campaign(lake, req, workers=2)
    assert marker.exists()
    assert report.infrastructure_errors == 2 and report.total_done == 6  # the chunk e000004, e000005
    store = CampaignStore(lake, "ray")
    errors = store.infrastructure_errors()
    assert sorted(p.name.rsplit("_", 1)[0] for p in errors) == ["e000004", "e000005"]
    failure = json.loads((errors[0] / "summary.json").read_text())
    assert failure["status"] == "infrastructure_error" and "Worker" in failure["failure"]["category"] + failure["failure"]["traceback"]
    assert not (store.episodes_dir / "e000005").exists()
    again = run_campaign(lake, req, workers=2)  # the marker exists: no second kill
    assert (again.ran, again.infrastructure_errors, again.total_done) == (2, 0, 8)
    assert again.outcomes == {"completed": 8}
