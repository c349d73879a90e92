"""Shared fixtures of the fit tests: one local Ray cluster per session (num_cpus=2) and one
small lake of synthetic joint-impedance runs of a known truth (tests/fit/synth.py)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth  # noqa: E402

TICKS = 1200  # 1.2 s per run at 1 kHz


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster for the whole session; yields its GCS address."""
    import os

    # as fit/run.py does for a new local cluster: choose Ray's default token auth explicitly
    # (before Ray's first import) so it does not warn on every start
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="session")
def synth_lake(tmp_path_factory) -> Path:
    """A lake with runs demo/r1, demo/r2 (train) and demo/r3 (holdout) of synth.TRUTH."""
    return synth.publish_demo_runs(tmp_path_factory.mktemp("fitlake"), TICKS)
