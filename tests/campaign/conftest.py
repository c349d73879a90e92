"""Fixtures of the campaign tests (inputs made by campaign_inputs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from campaign_inputs import make_fit, make_reference  # noqa: E402


@pytest.fixture()
def lake(tmp_path) -> Path:
    root = tmp_path / "lake"
    make_fit(root, delay_probs=[0.1, 0.6, 0.3, 0.0, 0.0])
    return root


@pytest.fixture()
def reference(tmp_path) -> Path:
    return make_reference(tmp_path / "excite")
