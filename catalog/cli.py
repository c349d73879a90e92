"""Command-line commands owned by twinlake.catalog (registered on the root app)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this folder's commands to the root `twinlake` app (`sql`, `catalog ...`, `intervals`)."""
    from twinlake.catalog import intervals_cli

    intervals_cli.register(app)
