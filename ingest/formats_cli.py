"""`twinlake export bundle` and `twinlake validate bundle` (owned by the formats work, issue 3)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the bundle commands to the root app."""
