"""The root `twinlake` command: every command and command group, registered in one list.

The commands live in twinlake/commands/ (one module per concern), `twinlake demo` in
twinlake/demo.py; each module imports only typer (and twinlake/options.py) at the top, and its
commands import what they run when they run, so `twinlake --help` stays fast.

Its group (`ListOptionGroup`) gives every sub-command argparse-style value lists:
`--joints 1 2 3` is `--joints 1 --joints 2 --joints 3` (twinlake/option_lists.py).
"""

from __future__ import annotations

from typing import Any, Callable

import typer

from . import demo
from .commands import campaign, daemon, fit, ingest, lake, simulation
from .option_lists import ListOptionGroup
from .options import check_lake_env, lake_usage_errors

# (name, a command function or a typer group), in the order `twinlake --help` and docs/cli.md show them
COMMANDS: tuple[tuple[str, Callable[..., Any] | typer.Typer], ...] = (
    ("sql", lake.sql_command),
    ("catalog", lake.catalog_app),            # catalog runs
    ("intervals", lake.intervals_command),
    ("ingest", ingest.ingest_command),
    ("export", ingest.export_app),            # export bundle
    ("validate", ingest.validate_app),        # validate bundle
    ("import", ingest.import_app),            # import frankatwin
    ("sim", simulation.sim_app),              # sim replay, sim record
    ("record", daemon.record_app),            # record start | stop | status
    ("daemon", daemon.daemon_app),            # daemon serve
    ("excite", daemon.excite),
    ("fit", fit.fit_app),                     # fit run | list | show | export | validate | quick | report
    ("campaign", campaign.campaign_app),      # campaign run | list | show
    ("demo", demo.demo_cmd),
)


def build_app() -> typer.Typer:
    """A new root app with every entry of COMMANDS."""
    root = typer.Typer(
        name="twinlake",
        cls=ListOptionGroup,
        help="FR3 recordings into a Parquet lake, SQL over runs, and population-based MuJoCo sysid.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, target in COMMANDS:
        if isinstance(target, typer.Typer):
            root.add_typer(target, name=name)
        else:
            root.command(name)(target)
    return root


app = build_app()


def main() -> None:
    check_lake_env()
    with lake_usage_errors():
        app()


if __name__ == "__main__":
    main()
