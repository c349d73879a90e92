"""Fits, campaigns and jobs on a real two-node Ray cluster started with `ray start`
(docs/ray.md's recipe): `fit run --address` spreads its actors over both nodes and gives the
local run's fit bit for bit; `ray job submit` of a fit, stopped with `ray job stop` and resubmitted
with `--resume`, gives the uninterrupted fit, and a campaign job ends SUCCEEDED with its
results in the lake; the
second node killed mid-fit (its raylet ended by pid) costs an actor, replaced on the head, and
nothing else. Every fit here has the same settings, so one local run is the reference of all.
The node-kill test runs last: the second node is gone after it."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from campaign_inputs import make_reference
from twinlake.campaign import CampaignStore
from twinlake.catalog import Lake
from twinlake.fit.records.record import load_fit
from twinlake.fit.run import FitSettings, run_fit, work_dir
from twinlake.fit.core.space import parse_space

TWINLAKE = str(Path(sys.executable).with_name("twinlake"))
RAY = str(Path(sys.executable).with_name("ray"))
GENERATIONS = 20
FIT_ARGS = ["--train", "r1", "--train", "r2", "--holdout", "r3", "--params", "dynamic_ratio=0.6",
            "--method", "cma", "--population", "8", "--generations", str(GENERATIONS), "--seed", "5",
            "--max-seconds", "0.4", "--refine", "0"]


def _settings() -> FitSettings:
    """FIT_ARGS as the settings `fit run` makes of them."""
    return FitSettings(train=["r1", "r2"], holdout=["r3"], space=parse_space(["dynamic_ratio=0.6"]).to_json(),
                       population=8, generations=GENERATIONS, seed=5, max_duration_s=0.4, method="cma",
                       refine_iterations=0)


@pytest.fixture(scope="module")
def local_fit(cluster_lake):
    """The reference: the same fit in this process, no Ray."""
    return run_fit(cluster_lake, _settings(), fit_id="local-ref", workers=0, progress=False)


def _same_fit(a, b) -> None:
    assert np.array_equal(a.vector, b.vector)
    assert a.best_loss == b.best_loss
    assert [h["best"] for h in a.history] == [h["best"] for h in b.history]
    assert [h["mean"] for h in a.history] == [h["mean"] for h in b.history]
    assert [(u.run, u.role, u.loss) for u in a.runs] == [(u.run, u.role, u.loss) for u in b.runs]


def _fit_cmd(lake: Path, fit_id: str, address: str, workers: int = 2) -> list[str]:
    return [TWINLAKE, "fit", "run", "--lake", str(lake), *FIT_ARGS, "--workers", str(workers),
            "--address", address, "--id", fit_id, "--json"]


def _ray(cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([RAY, "job", *args], env=cluster.env, capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _submit(cluster, job: str, entrypoint: list[str], *, wait: bool = True) -> subprocess.CompletedProcess:
    return _ray(cluster, "submit", "--address", cluster.dashboard, "--submission-id", job,
                *([] if wait else ["--no-wait"]), "--", *entrypoint)


def _status(cluster, job: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(cluster.dashboard).get_job_status(job).value)


def _actors(cluster, job_id: str) -> list:
    """The fit's pool actors (alive or dead) of one Ray job, from the state API."""
    from ray.util.state import list_actors

    return [a for a in list_actors(address=cluster.dashboard, filters=[("job_id", "=", job_id)],
                                   detail=True, limit=1000, raise_on_missing_output=False)
            if a.class_name.endswith("EvalActor")]  # fit/core/pool.py's actor class, defined in a function


def _nodes(cluster) -> dict[str, bool]:
    """node id -> is the head, of every node (alive or dead), from the state API."""
    from ray.util.state import list_nodes

    return {n.node_id: n.is_head_node for n in list_nodes(address=cluster.dashboard, raise_on_missing_output=False)}


def _job_id_of(cluster, words: str) -> str:
    """The Ray job id of the driver whose command line contains `words`."""
    from ray.util.state import list_jobs

    ids = [j.job_id for j in list_jobs(address=cluster.dashboard, raise_on_missing_output=False)
           if words in (j.entrypoint or "")]
    assert len(ids) == 1, ids
    return ids[0]


def test_fit_with_address_puts_an_actor_on_each_node_and_gives_the_local_fit(two_nodes, cluster_lake, local_fit):
    out = subprocess.run(_fit_cmd(cluster_lake, "on-two-nodes", two_nodes.address), env=two_nodes.env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["workers"] == 2 and summary["actor_replacements"] == 0
    actors = _actors(two_nodes, _job_id_of(two_nodes, "on-two-nodes"))
    nodes = _nodes(two_nodes)
    assert len(actors) == 2
    assert sorted(nodes[a.node_id] for a in actors) == [False, True]  # one on the head, one on the other node
    _same_fit(load_fit(cluster_lake, "on-two-nodes"), local_fit)


def _wait_checkpoint(lake: Path, fit_id: str, timeout_s: float = 240) -> int:
    """The generation of the fit's first checkpoint, as soon as one is written."""
    path = work_dir(Lake(lake), fit_id) / "checkpoint.pkl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file():
            try:
                return len(pickle.loads(path.read_bytes())["history"])  # a row per generation
            except (EOFError, pickle.UnpicklingError, KeyError):
                pass
        time.sleep(0.02)
    raise TimeoutError(f"no checkpoint of {fit_id} after {timeout_s} s")


def test_a_fit_job_stopped_then_resumed_and_a_campaign_job_succeed_with_results_in_the_lake(
        two_nodes, cluster_lake, local_fit, tmp_path):
    """`ray job submit` of a fit, `ray job stop` after its first checkpoint, a resubmitted
    `--resume` job ending SUCCEEDED with the uninterrupted fit (its --json summary through
    `ray job logs`), then a campaign job on that fit."""
    _submit(two_nodes, "stopped-fit", _fit_cmd(cluster_lake, "stopped", "auto"), wait=False)
    assert _wait_checkpoint(cluster_lake, "stopped") >= 1
    _ray(two_nodes, "stop", "--address", two_nodes.dashboard, "stopped-fit")
    assert _status(two_nodes, "stopped-fit") == "STOPPED"
    lake = Lake(cluster_lake)
    assert not lake.fit_dir("stopped").exists() and work_dir(lake, "stopped").is_dir()
    _submit(two_nodes, "resumed-fit", [TWINLAKE, "fit", "run", "--lake", str(cluster_lake), "--resume", "stopped",
                                       "--workers", "2", "--address", "auto", "--json"])
    assert _status(two_nodes, "resumed-fit") == "SUCCEEDED"
    logs = _ray(two_nodes, "logs", "--address", two_nodes.dashboard, "resumed-fit").stdout
    assert '"fit": "stopped"' in logs  # the job's --json summary, through `ray job logs`
    _same_fit(load_fit(cluster_lake, "stopped"), local_fit)
    reference = make_reference(tmp_path / "excite", seconds=0.6)
    _submit(two_nodes, "campaign-job", [TWINLAKE, "campaign", "run", "--lake", str(cluster_lake),
                                        "--fit", "stopped", "--reference", str(reference), "--episodes", "2",
                                        "--chunk", "1", "--workers", "2", "--address", "auto", "--id", "on-cluster",
                                        "--samples", "none"])
    assert _status(two_nodes, "campaign-job") == "SUCCEEDED"
    store = CampaignStore(cluster_lake, "on-cluster")
    assert store.read_config()["fit"] == "stopped" and len(store.summaries()) == 2


BUCKET_FIT = ["--train", "r1", "r2", "--holdout", "r3", "--params", "dynamic_ratio=0.6", "--method", "cma",
              "--population", "8", "--generations", "2", "--seed", "5", "--max-seconds", "0.4", "--refine", "0",
              "--loop-noise-draws", "0", "--id", "fb", "--json"]


def _driver(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """A `twinlake` driver process on the cluster."""
    out = subprocess.run([TWINLAKE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (args, out.stdout[-3000:], out.stderr[-3000:])
    return out


def _here(*args: str) -> str:
    """A `twinlake` command in this process (no Ray); its stdout."""
    from typer.testing import CliRunner

    from twinlake.cli import app

    out = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert out.exit_code == 0, (args, out.output[-3000:])
    return out.stdout


def test_a_bucket_lake_needs_no_common_path(two_nodes, s3_lake, tmp_path):
    """Recordings in a bucket, the lake in the bucket, the nodes and the driver each in a working
    and temporary directory of their own: ingest fanned out over both nodes, a fit with an actor
    on each, a campaign whose tasks ship their episodes back; the runs, the fit and the
    outcomes are those of a local lake of the same files (run here, without Ray)."""
    import boto3

    from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

    raw, driver = tmp_path / "raw", tmp_path / "driver"
    raw.mkdir(), driver.mkdir(), (driver / "tmp").mkdir()
    bucket = s3_lake.removeprefix("s3://").split("/")[0]
    env = {**two_nodes.env, "TMPDIR": str(driver / "tmp")}
    for seed, run in enumerate(("r1", "r2", "r3"), start=1):
        path = write_sample(raw / f"{run}.csv", SampleSpec(rows=1500, seed=seed), status=complete_status(raw / f"{run}.csv", 1500))
        for f in (path, raw / f"{run}.status.json"):
            boto3.client("s3").put_object(Bucket=bucket, Key=f"raw/{f.name}", Body=f.read_bytes())
    local = str(tmp_path / "local")
    where = ["--workers", "2", "--address", two_nodes.address]
    fanned = _driver(["ingest", f"s3://{bucket}/raw/", "--lake", s3_lake, "--robot", "fr3s", "--json", *where], env, driver)
    assert [json.loads(line)["status"] for line in fanned.stdout.splitlines()] == ["published"] * 3
    _here("ingest", str(raw), "--lake", local, "--robot", "fr3s")
    runs = ["sql", "select run, raw_sha256, frame_count, verdict from runs order by run", "--format", "json"]
    assert _here(*runs, "--lake", s3_lake) == _here(*runs, "--lake", local)

    fit = json.loads(_driver(["fit", "run", *BUCKET_FIT, "--lake", s3_lake, *where], env, driver).stdout)
    same = json.loads(_here("fit", "run", *BUCKET_FIT, "--lake", local, "--workers", "0"))
    assert fit["params"] == same["params"] and fit["best_loss"] == same["best_loss"]
    actors = _actors(two_nodes, _job_id_of(two_nodes, "--id fb"))
    assert sorted(_nodes(two_nodes)[a.node_id] for a in actors) == [False, True]

    reference = make_reference(tmp_path / "excite", seconds=0.6)
    campaign = ["campaign", "run", "--fit", "fb", "--reference", str(reference), "--episodes", "2", "--chunk", "1",
                "--sample", "ranges", "--ranges", "delay=0:1", "--id", "cb", "--samples", "none"]
    _driver([*campaign, "--lake", s3_lake, *where], env, driver)
    _here(*campaign, "--lake", local, "--workers", "0")
    shown = [json.loads(_here("campaign", "show", "cb", "--json", "--lake", at)) for at in (s3_lake, local)]
    assert shown[0]["done"] == shown[1]["done"] == 2
    assert [g["outcomes"] for g in shown[0]["gain_sets"]] == [g["outcomes"] for g in shown[1]["gain_sets"]]
    committed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="lake/campaigns/campaign=cb/")
    assert sum(k["Key"].endswith("/summary.json") for k in committed.get("Contents", [])) == 2


def test_second_node_killed_mid_fit_its_actor_is_replaced_on_the_head(two_nodes, cluster_lake, local_fit):
    """Last: the second node does not come back."""
    proc = subprocess.Popen(_fit_cmd(cluster_lake, "node-lost", two_nodes.address), env=two_nodes.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_checkpoint(cluster_lake, "node-lost") >= 1
        os.kill(two_nodes.worker.child_pid("raylet"), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    # Ray's driver may print its notice of the lost node on stdout before the summary
    assert "\n{\n" in "\n" + stdout, (stdout[-3000:], stderr[-3000:])
    # ... and after it: read the one JSON object where it starts, whatever follows
    summary, _ = json.JSONDecoder().raw_decode(stdout[("\n" + stdout).index("\n{\n"):])
    assert summary["actor_replacements"] >= 1
    actors, nodes = _actors(two_nodes, _job_id_of(two_nodes, "node-lost")), _nodes(two_nodes)
    # a replacement Ray had not placed when the fit ended (the other actor took the retried chunk,
    # the pool's close killed it) has no node; seen once in CI (2026-12-05)
    placed = [a for a in actors if a.node_id]
    on_head = [a for a in placed if nodes[a.node_id]]
    # the two first actors, one per node, and each replacement: on the head, never placed, or
    # (a replacement Ray placed before it knew the node was gone) on the lost node
    assert len(actors) == 2 + summary["actor_replacements"]
    assert len(on_head) >= 1 and len(placed) - len(on_head) >= 1
    _same_fit(load_fit(cluster_lake, "node-lost"), local_fit)
