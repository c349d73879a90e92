"""What every twinlake command shares: the `--lake` option and the one-line error exit.

    lake: Optional[Path] = LAKE      # in a command's signature; resolve with catalog's resolve_lake
    fail("--format 'xml': expected table, csv or json")   # "error: ..." on stderr, exit 2

Imports typer only, so a command module importing it stays cheap at `twinlake --help`.
"""

from __future__ import annotations

from typing import NoReturn

import typer

LAKE_HELP = "Lake directory (default $TWINLAKE_LAKE, else ./lake)."

LAKE = typer.Option(None, "--lake", help=LAKE_HELP)
"""The `--lake DIR` option of every command that reads or writes the lake (default None: the
command resolves `$TWINLAKE_LAKE`, else `./lake`, with `twinlake.catalog.resolve_lake`)."""

USAGE_ERROR = 2
"""Exit status of a usage error (a bad option value, an unknown run or fit), as click's own."""


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    """Print `error: <message>` as one line on stderr and exit with `code` (default 2)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


__all__ = ["LAKE", "LAKE_HELP", "USAGE_ERROR", "fail"]
