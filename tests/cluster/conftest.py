"""Fixtures of the cluster tests: one real two-node Ray cluster started with `ray start`
(tests/cluster/ray_nodes.py) shared by the module, and the small synthetic lake of the fit
tests (tests/fit/synth.py) plus a campaign reference (tests/campaign/campaign_inputs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "fit", HERE.parent / "campaign"):
    sys.path.insert(0, str(folder))

import ray_nodes  # noqa: E402
import synth  # noqa: E402

TICKS = 1200  # 1.2 s per run at 1 kHz, as tests/fit


@pytest.fixture(scope="module")
def two_nodes(s3_server_session):
    """A head (2 CPUs, dashboard, job server) and a second node (1 CPU), each in a working and
    temporary directory of its own, with the AWS environment of the test run's S3 server (the
    only thing the nodes share for a bucket lake), ended by pid after the module's tests."""
    cluster = ray_nodes.start_two_nodes(head_cpus=2, worker_cpus=1, extra_env=s3_server_session.env())
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster_lake(tmp_path_factory) -> Path:
    """Runs demo/r1, demo/r2 (train) and demo/r3 (holdout) of synth.TRUTH."""
    return synth.publish_demo_runs(tmp_path_factory.mktemp("clusterlake"), TICKS)
