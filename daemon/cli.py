"""Command-line commands owned by twinlake.daemon (registered on the root app)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this folder's commands to the root `twinlake` app."""
