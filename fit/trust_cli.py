"""`twinlake fit validate | quick | report` (owned by the trust work, issue 8)."""

from __future__ import annotations

import typer


def register(fit_app: typer.Typer) -> None:
    """Add the trust commands to the `twinlake fit` group."""
