"""Shared fixtures for tests/sim (helpers live in sim_recording.py)."""

from __future__ import annotations

import pytest

from twinlake.sim import load_model


@pytest.fixture(scope="session")
def model():
    return load_model()
