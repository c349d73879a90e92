"""What the commands that run on Ray share: the check of an `--address` (and of the install it
needs) before Ray is touched, and `twinlake ingest --workers`'s fan-out with a progress bar.

`check_address(address)` refuses, with what to do instead, the addresses `ray.init` cannot
join: the dashboard / job-server URL (`http://HEAD:8265`, for `ray job submit`), and a
Ray Client address (`ray://HEAD:10001`) when Ray's client packages are not installed (the
`cluster` extra brings them, with the dashboard and the jobs CLI: docs/ray.md).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..options import fail

CLUSTER_INSTALL = "pip install -c constraints.txt -e '.[cluster]'"
"""The install of Ray's dashboard, job server, jobs CLI and client (ray[default], pinned)."""

CLUSTER_MODULES = ("aiohttp", "grpc", "opencensus", "prometheus_client")
"""Modules ray[default] adds to Ray's core (its dashboard, jobs and client need them)."""


def missing_cluster_modules() -> list[str]:
    """The CLUSTER_MODULES not importable here (empty: the cluster extra is installed)."""
    return [m for m in CLUSTER_MODULES if importlib.util.find_spec(m) is None]


def address_problem(address: str | None) -> str | None:
    """Why `address` cannot be given to `--address` (None: it can)."""
    if address is None:
        return None
    if address.startswith(("http://", "https://")):
        return (f"--address {address}: that is the dashboard / job-server URL; give the cluster's "
                "GCS address (HEAD:6379, or auto on a node of it), or submit the whole command as a "
                f"job: ray job submit --address {address} -- twinlake ... --address auto "
                f"(the jobs CLI needs the cluster extra: {CLUSTER_INSTALL})")
    missing = missing_cluster_modules()
    if address.startswith("ray://") and missing:
        return (f"--address {address}: a Ray Client address needs Ray's client and dashboard packages "
                f"(missing: {', '.join(missing)}): {CLUSTER_INSTALL}; or give the GCS address HEAD:6379")
    return None


def check_address(address: str | None) -> None:
    """Exit 2 with `address_problem`'s message when there is one."""
    problem = address_problem(address)
    if problem is not None:
        fail(problem)


def fan_out_with_progress(lake, paths: list[Path], options, err, **kwargs):
    """`twinlake.ingest.fanout.fan_out_paths` with a progress bar over the files on the
    stderr console `err` (kwargs: workers, address, replace, raw_codec, results); yields its
    Outcomes in order. Lines printed to stdout while the bar shows go above it when stdout is
    the terminal too, and straight to stdout when it is a file or a pipe."""
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..ingest.fanout import fan_out_paths

    check_address(kwargs.get("address"))
    bar = Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
                   TimeElapsedColumn(), console=err, transient=True,
                   redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
    task = bar.add_task("ingest", total=None)
    with bar:
        def done(finished: int, submitted: int) -> None:
            bar.update(task, completed=finished, total=submitted)

        try:
            yield from fan_out_paths(lake, paths, options, on_done=done, **kwargs)
        except ValueError as exc:
            fail(str(exc))
