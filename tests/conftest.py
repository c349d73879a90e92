"""Fixtures every test folder shares: the one local S3 server of the test run (tests/s3_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import s3_server  # noqa: E402


@pytest.fixture(scope="session")
def s3_server_session():
    """One moto S3 server for the whole test run, started on first use, ended by its pid."""
    server = s3_server.start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_lake(s3_server_session, monkeypatch) -> str:
    """`s3://<fresh bucket>/lake` on the test run's S3 server, with the standard AWS
    environment variables of this process pointing at it (subprocesses inherit them)."""
    for key, value in s3_server_session.env().items():
        monkeypatch.setenv(key, value)
    return f"s3://{s3_server_session.new_bucket()}/lake"
