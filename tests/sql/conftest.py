"""Fixtures for the interval SQL tests: a fresh lake per test and a helper that publishes
synthetic runs and returns the real catalog's answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from interval_synth import LakeBuilder  # noqa: E402


@pytest.fixture
def lake(tmp_path: Path) -> LakeBuilder:
    return LakeBuilder(tmp_path / "lake")
