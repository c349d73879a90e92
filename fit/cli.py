"""Command-line commands owned by twinlake.fit (registered on the root app).

`fit_app` is the `twinlake fit` group; the trust tools (validate, quick, report) add
their commands to it from fit/trust_cli.py.
"""

from __future__ import annotations

import typer

fit_app = typer.Typer(help="Fit dynamics parameters, inspect and export fits.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add `twinlake fit ...` and `twinlake demo` to the root app."""
    from twinlake.fit import trust_cli

    trust_cli.register(fit_app)
    app.add_typer(fit_app, name="fit")
