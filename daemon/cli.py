"""Command-line commands owned by twinlake.daemon (registered on the root app).

`twinlake record ...`, `twinlake daemon serve`, `twinlake excite`, and `twinlake sim record`
(added to the sim helper's `sim` group).
"""

from __future__ import annotations

import typer

from .record_cli import record_app


def register(app: typer.Typer) -> None:
    """Add this folder's commands to the root `twinlake` app."""
    app.add_typer(record_app, name="record")
