"""The root `twinlake` command: every command and command group, registered in one list.

The commands live in twinlake/commands/ (one module per concern), `twinlake demo` in
twinlake/demo.py; each module imports only typer (and twinlake/options.py) at the top, and its
commands import what they run when they run, so `twinlake --help` stays fast; a command line
that names a command imports that command's module alone (`main`).

Its group (`ListOptionGroup`) gives every sub-command argparse-style value lists:
`--joints 1 2 3` is `--joints 1 --joints 2 --joints 3` (twinlake/option_lists.py).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

import typer

from .option_lists import ListOptionGroup
from .options import check_lake_env, lake_usage_errors

# (name, module under twinlake, its command function or typer group), in the order `twinlake
# --help` and docs/cli.md show them; a module is imported when its command is built
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("sql", "commands.lake", "sql_command"),
    ("catalog", "commands.lake", "catalog_app"),            # catalog runs
    ("intervals", "commands.lake", "intervals_command"),
    ("ingest", "commands.ingest", "ingest_command"),
    ("export", "commands.ingest", "export_app"),            # export bundle
    ("validate", "commands.ingest", "validate_app"),        # validate bundle
    ("import", "commands.ingest", "import_app"),            # import frankatwin
    ("sim", "commands.simulation", "sim_app"),              # sim replay, sim record
    ("record", "commands.daemon", "record_app"),            # record start | stop | status
    ("daemon", "commands.daemon", "daemon_app"),            # daemon serve
    ("excite", "commands.daemon", "excite"),
    ("fit", "commands.fit", "fit_app"),                     # fit run | list | show | export | validate | quick | report
    ("campaign", "commands.campaign", "campaign_app"),      # campaign run | list | show
    ("demo", "demo", "demo_cmd"),
)


def command_target(module: str, attribute: str) -> Callable[..., Any] | typer.Typer:
    """The command function or typer group `attribute` of twinlake's `module` (imported now)."""
    return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


def build_app(only: str | None = None) -> typer.Typer:
    """A new root app with every entry of COMMANDS, or with command `only` alone (still a
    group: `twinlake ONLY ...` parses as in the whole app)."""
    root = typer.Typer(
        name="twinlake",
        cls=ListOptionGroup,
        help="FR3 recordings into a Parquet lake, SQL over runs, and population-based MuJoCo sysid.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, module, attribute in COMMANDS:
        if only is not None and name != only:
            continue
        target = command_target(module, attribute)
        if isinstance(target, typer.Typer):
            root.add_typer(target, name=name)
        else:
            root.command(name)(target)
    if only is not None:
        root.callback()(_no_root_options)
    return root


def _no_root_options() -> None:
    """(the root of a one-command app: a group, so the command's name is parsed as in the whole app)"""


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # the whole app, built once, on first use (tests, docs/cli.md)
        globals()["app"] = whole = build_app()
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """`twinlake ...`: a command line that names a command builds that command alone (its
    start-up does not import the other commands: ~0.1 s less for `twinlake ingest`); anything
    else (`--help`, no command, an unknown one) the whole app."""
    check_lake_env()
    named = sys.argv[1] if len(sys.argv) > 1 else None
    only = named if named in {name for name, _, _ in COMMANDS} else None
    with lake_usage_errors():
        build_app(only)()


if __name__ == "__main__":
    main()
