"""tests/session: the README's own-robot session, run once per test session (readme_session.py).
Tests that judge its lake or fits (a verdict test, say) live here and take `readme_session`."""

from __future__ import annotations

import time

import pytest
from readme_session import Session, run_readme_session


@pytest.fixture(scope="session")
def readme_session(tmp_path_factory) -> Session:
    """The README's own-robot session, run once per test session (about a minute)."""
    started = time.monotonic()
    session = run_readme_session(tmp_path_factory.mktemp("readme-session"))
    session.elapsed_s = time.monotonic() - started
    return session
