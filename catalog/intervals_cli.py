"""`twinlake intervals`: clean gap-free intervals (owned by the intervals work, issue 4)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `twinlake intervals` to the root app."""
