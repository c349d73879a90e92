"""What twinlake commands share: the `--lake` option, the one-line error exit, and the truth
options of a simulated robot (`sim record` and `daemon serve` alike).

    lake: Optional[Path] = LAKE      # in a command's signature; resolve with catalog's resolve_lake
    payload: str | None = TRUE_PAYLOAD; friction_law: str = TRUE_FRICTION_LAW
    fail("--format 'xml': expected table, csv or json")   # "error: ..." on stderr, exit 2

Imports typer only, so a command module importing it stays cheap at `twinlake --help`.
"""

from __future__ import annotations

from typing import NoReturn

import typer

LAKE_HELP = "Lake directory (default $TWINLAKE_LAKE, else ./lake)."


def _lake_option(text: str):
    """The `--lake` value: a local directory (Path), or an `s3://` lake (catalog's
    LakeLocation); another URI scheme is refused by name (catalog's rule)."""
    from .catalog.location import parse_location

    try:
        location = parse_location(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix(f"--lake {text!r}: ")) from None
    return location.path if location.is_local else location


LAKE = typer.Option(None, "--lake", help=LAKE_HELP, parser=_lake_option, metavar="LAKE")
"""The `--lake DIR` option of every command that reads or writes the lake (default None: the
command resolves `$TWINLAKE_LAKE`, else `./lake`, with `twinlake.catalog.resolve_lake`)."""

OBJECT_LAKE = typer.Option(None, "--lake", parser=_lake_option, metavar="LAKE",
                           help="Lake directory or s3://bucket/prefix (default $TWINLAKE_LAKE, else ./lake).")
"""`--lake` of the commands that also work on an object-storage lake (ingest, sql, catalog runs):
resolve with `twinlake.catalog.open_lake`."""

DESIGN_LAKE = typer.Option(None, "--lake", parser=_lake_option, metavar="LAKE",
                           help="--design --for FIT: the lake holding the fit, a directory or s3://bucket/prefix "
                                "(default $TWINLAKE_LAKE, else ./lake).")
"""`excite --lake`: where `--design --for FIT` finds the fit (resolve with lake_session.lake_root)."""

TRUE_PAYLOAD = typer.Option(None, "--payload", help="True payload at the flange MASS[,X,Y,Z] (kg; CoM m in the flange frame; default: the truth profile's).")
"""`--payload`: the simulated robot's true payload (parse with twinlake.sim.arm_model.load.parse_load)."""

TRUE_FRICTION_LAW = typer.Option("stribeck", "--friction-law", help="The true plant's friction law: stribeck (FrankaTwin's, default), tanh (smooth Coulomb) or sigmoid (Gaz et al. 2019).")
"""`--friction-law`: the simulated robot's true friction law (twinlake.sim.arm_model.plant.FRICTION_LAWS)."""

USAGE_ERROR = 2
"""Exit status of a usage error (a bad option value, an unknown run or fit), as click's own."""


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    """Print `error: <message>` as one line on stderr and exit with `code` (default 2)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def error_text(exc: Exception) -> str:
    """An exception's one-line message as the command line says it: a fit's error with each
    setting it names as the option that sets it (`--torque 'x': expected ...`, `try --method
    torque: ...`; a setting is its option's name with '_' for '-'), a missing fit with where to
    look; any other exception as it reads."""
    from .fit import FitError, FitNotFound

    if isinstance(exc, FitNotFound):
        return f"{exc} (see `twinlake fit list`)"
    if isinstance(exc, FitError):
        return exc.text(lambda setting: f"--{setting.replace('_', '-')}")
    return str(exc)


def check_lake_env() -> None:
    """Refuse, as one line (exit 2), a `$TWINLAKE_LAKE` that is a URI of a scheme a lake cannot
    have: every command resolves the lake from it when `--lake` is absent, so an entry point
    checks it once before parsing."""
    import os

    value = os.environ.get("TWINLAKE_LAKE", "")
    if "://" not in value:  # the common case: `twinlake --help` stays free of the catalog's import
        return
    from .catalog.lake import LAKE_ENV
    from .catalog.location import parse_location

    try:
        parse_location(value, f"${LAKE_ENV}")
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(USAGE_ERROR) from None


def lake_usage_errors():
    """Context manager of an entry point: a command given an s3:// lake it cannot use yet
    (catalog's ObjectStorageLake) ends as one line (exit 2), not a traceback."""
    from contextlib import contextmanager

    @contextmanager
    def guard():
        try:
            yield
        except Exception as exc:
            if type(exc).__name__ != "ObjectStorageLake":
                raise
            typer.echo(f"error: {exc}", err=True)
            raise SystemExit(USAGE_ERROR) from None

    return guard()


__all__ = ["DESIGN_LAKE", "LAKE", "LAKE_HELP", "OBJECT_LAKE", "TRUE_FRICTION_LAW", "TRUE_PAYLOAD", "USAGE_ERROR", "check_lake_env", "fail",
           "lake_usage_errors"]
