"""Fixtures for the ingest tests: a fresh lake, small synthetic CSVs, the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from twinlake.catalog import Lake
from twinlake.commands.ingest import ingest_command
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake")


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    path = tmp_path / "inbox"
    path.mkdir()
    return path


@pytest.fixture
def make_csv(inbox: Path):
    """make_csv(name, rows=..., status=True/False/dict, meta=dict|None, **SampleSpec kw)."""

    def make(name: str = "run001.csv", *, status=True, meta=None, **spec) -> Path:
        spec.setdefault("rows", 400)
        path = inbox / name
        st = complete_status(path, spec["rows"]) if status is True else (status or None)
        return write_sample(path, SampleSpec(**spec), status=st, meta=meta)

    return make


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("ingest")(ingest_command)
    app.command("noop", hidden=True)(lambda: None)  # keep `ingest` a named sub-command
    return app


@pytest.fixture
def ingest(lake: Lake):
    """Run `twinlake ingest` in-process on the real command; returns the click Result."""
    runner = CliRunner()
    app = _app()

    def run(*args: str | Path, lake_dir: Path | None = None):
        argv = ["ingest", *map(str, args), "--lake", str(lake_dir or lake.root)]
        return runner.invoke(app, argv, catch_exceptions=False)

    return run
