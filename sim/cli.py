"""Command-line commands owned by twinlake.sim (registered on the root app).

`sim_app` is the `twinlake sim` group; the daemon folder adds `sim record` to it.
"""

from __future__ import annotations

import typer

sim_app = typer.Typer(help="Simulate the FR3: replay recorded runs.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add `twinlake sim ...` to the root app."""
    app.add_typer(sim_app, name="sim")
