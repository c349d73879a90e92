"""Fixtures for the interval SQL tests: a fresh lake per test and a helper that publishes
synthetic runs and returns the real catalog's answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from interval_synth import Recording, publish_run  # noqa: E402

from twinlake.catalog import connect  # noqa: E402
from twinlake.catalog.intervals import clean_intervals  # noqa: E402


class LakeBuilder:
    """Publish runs into one lake, then query intervals through `connect` (real DuckDB)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, rec: Recording, run: str = "r1", robot: str = "fr3") -> None:
        publish_run(self.root, robot, run, rec)

    def intervals(self, **kwargs) -> list[dict]:
        con = connect(self.root)
        try:
            return clean_intervals(con, **kwargs).to_pylist()
        finally:
            con.close()


@pytest.fixture
def lake(tmp_path: Path) -> LakeBuilder:
    return LakeBuilder(tmp_path / "lake")
