"""Fixtures of the command-line tests: the installed `twinlake` script and the root app in a
CliRunner, so a command line can be run both ways (they share the root group's parsing)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from twinlake.cli import app

SCRIPT = Path(sys.executable).parent / "twinlake"


@pytest.fixture
def twinlake_path() -> Path:
    """The installed `twinlake` console script (the test is skipped without one)."""
    if not SCRIPT.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    return SCRIPT


@pytest.fixture
def twinlake_script(twinlake_path):
    """A function: (command line, cwd) -> CompletedProcess of the installed console script."""

    def run(line: str | list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        args = shlex.split(line) if isinstance(line, str) else list(line)
        assert args[0] == "twinlake", args
        return subprocess.run([str(twinlake_path), *args[1:]], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)

    return run


@pytest.fixture
def invoke():
    """A function: argv after `twinlake` -> CliRunner result of the root app."""
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])
