"""Command-line commands owned by twinlake.ingest (registered on the root app)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `twinlake ingest`, `export bundle`, `validate bundle` to the root app."""
    from twinlake.ingest import formats_cli

    formats_cli.register(app)
