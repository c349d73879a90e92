"""The root `twinlake` command: composes the sub-commands each folder owns in its cli.py.

Its group (`ListOptionGroup`) gives every sub-command argparse-style value lists:
`--joints 1 2 3` is `--joints 1 --joints 2 --joints 3` (twinlake/option_lists.py).
"""

from __future__ import annotations

import importlib

import typer

from twinlake.option_lists import ListOptionGroup

app = typer.Typer(
    name="twinlake",
    cls=ListOptionGroup,
    help="FR3 recordings into a Parquet lake, SQL over runs, and population-based MuJoCo sysid.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each folder's cli.py exposes `register(app)`, which adds its commands to the root app.
_FOLDERS = ("catalog", "ingest", "sim", "daemon", "fit")


def _compose() -> None:
    for folder in _FOLDERS:
        module = importlib.import_module(f"twinlake.{folder}.cli")
        module.register(app)


_compose()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
