"""`twinlake ingest` (recordings into the lake), `twinlake export bundle` and `twinlake validate
bundle` (joint_sysid_recording/v1 bundles), and `twinlake import frankatwin` for FrankaTwin result
files (fits and validations), over twinlake.ingest.

Exit codes: 0 success; 1 refused / invalid / rejected (with every reason printed); 2 usage error.
`python -m twinlake.ingest` runs `ingest_command` alone (`main`): this module imports only
typer at the top, so that start-up stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .lake_session import bucket_sessions
from ..options import OBJECT_LAKE, check_lake_env, fail

export_app = typer.Typer(help="Export lake data to portable formats.", no_args_is_help=True)
validate_app = typer.Typer(help="Validate portable files.", no_args_is_help=True)
import_app = typer.Typer(help="Import result files of other tools.", no_args_is_help=True)


def ingest_command(
    paths: list[str] = typer.Argument(..., help="Recording files or directories to ingest, or s3://bucket/prefix (an object or every object under it)."),
    lake: Optional[Path] = OBJECT_LAKE,
    robot: Optional[str] = typer.Option(None, "--robot", help="Robot id (default: robot_id of the companion metadata)."),
    run: Optional[str] = typer.Option(None, "--run", help="Run id (default: recording id, else file stem); one input only."),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing run whose bytes differ."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="Keep the complete rows of a truncated file (complete=false)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per input."),
    raw_codec: str = typer.Option("zstd", "--raw-codec", help="Compression of the kept original files: zstd, lz4 or none."),
    target_topic: Optional[str] = typer.Option(None, "--target-topic", help="Bags: a std_msgs/Float64MultiArray topic of joint position targets J1..J7 [rad]."),
    kp: list[str] = typer.Option([], "--kp", help="Bags: joint stiffness J1..J7 [N·m/rad] when the bag has none (1 or 7 values)."),
    kd: list[str] = typer.Option([], "--kd", help="Bags: joint damping J1..J7 [N·m·s/rad] when the bag has none (1 or 7 values)."),
    robot_map: list[str] = typer.Option([], "--robot-map", help="Bags: NAMESPACE=ROBOT_ID per arm (a bag of two arms is two runs)."),
    mapping: Optional[Path] = typer.Option(
        None, "--mapping", help="A mapping TOML: read every file given as a log of your own layout (CSV, Parquet, .npz; docs/formats.md)."),
    workers: int = typer.Option(0, "--workers", min=0, help="Ingest the inputs as Ray tasks, N at a time, one CPU each (0: one after another in this process). Raw files (and a local lake) on a filesystem every node sees; an s3:// lake needs none (docs/ray.md)."),
    address: Optional[str] = typer.Option(None, "--address", help="With --workers: run the tasks on this Ray cluster (default: a local Ray)."),
) -> None:
    """Ingest fr3_stack 1 kHz recording CSVs (v2, legacy v1) and other known formats into the lake.

    Exit status: 0 all published / already ingested; 1 some input rejected (quarantined:
    broken, or a FrankaTwin sidecar whose 1 kHz log was not saved) or a directory in which
    nothing was recognised; 2 usage error (robot not named, run exists with different
    bytes, missing path).
    """
    from ..lean_start import absent

    with absent():  # this process's own start-up: skip what the path never uses (twinlake/lean_start.py)
        _ingest(paths, lake, robot, run, replace, allow_partial, as_json, raw_codec,
                target_topic=target_topic, kp=kp, kd=kd, robot_map=robot_map, mapping=mapping,
                workers=workers, address=address)


def _ingest(paths: list[Path], lake: Optional[Path], robot: Optional[str], run: Optional[str], replace: bool,
            allow_partial: bool, as_json: bool, raw_codec: str, *, target_topic: Optional[str],
            kp: list[str], kd: list[str], robot_map: list[str], mapping: Optional[Path], workers: int,
            address: Optional[str]) -> None:
    from ..catalog import open_lake

    paths = _local_inputs(paths)
    if run is not None and (len(paths) > 1 or any(p.is_dir() and not (p / "metadata.yaml").is_file()
                                                  for p in paths)):  # a rosbag2 directory is one input
        fail("--run names one run; give exactly one file with it")
    if raw_codec not in ("zstd", "lz4", "none"):
        fail(f"--raw-codec {raw_codec!r}: expected zstd, lz4 or none")
    if address is not None and not workers:
        fail("--address runs the ingest on a Ray cluster: give --workers N too")
    the_lake = open_lake(lake)
    if mapping is not None and not mapping.is_file():
        fail(f"--mapping {mapping}: no such file")
    try:
        bag_options = _bag_options(target_topic, kp, kd, robot_map)
    except ValueError as exc:
        fail(str(exc))
    if not workers and paths and paths[0].is_file():  # its hash and copy overlap our start-up
        from ..ingest.rawstore import archive_ahead

        archive_ahead(the_lake, paths[0], raw_codec)
    from ..ingest import ingest_paths
    from ..ingest.registry import ReadOptions

    options = ReadOptions(robot=robot, run=run, allow_partial=allow_partial, mapping=mapping, **bag_options)

    def results(folder: Path):
        """A directory's FrankaTwin result files become fits and validations (the fit
        folder's job, imported when a directory is ingested)."""
        from ..fit import import_results

        return import_results(the_lake, [folder], robot, replace=replace)

    worst = 0
    if workers:
        from rich.console import Console

        from .cluster import fan_out_with_progress

        err = Console(stderr=True)
        outcomes = fan_out_with_progress(the_lake, list(paths), options, err, workers=workers, address=address,
                                         replace=replace, raw_codec=raw_codec, results=results)
        for outcome in outcomes:  # lines on the bar's console, so they go above the bar
            worst = max(worst, outcome.exit_code)
            _report(outcome, as_json, lambda line: err.print(line, markup=False, highlight=False,
                                                             soft_wrap=True))
        raise typer.Exit(worst)
    from ..progress import terminal_status

    with terminal_status("ingesting...") as status:
        for outcome in ingest_paths(the_lake, list(paths), options, replace=replace,
                                    raw_codec=raw_codec, results=results):
            status(f"ingested {Path(outcome.path).name}")
            worst = max(worst, outcome.exit_code)
            _report(outcome, as_json, _stderr_line)
    raise typer.Exit(worst)


def _local_inputs(paths: list[str]) -> list[Path]:
    """The inputs as local paths: an `s3://` input mirrored on this host first
    (ingest/remote_inputs.py); any other URI scheme refused by name (exit 2)."""
    from ..ingest.remote_inputs import fetch_inputs, is_remote

    try:
        return [fetch_inputs(p) if is_remote(p) else Path(p) for p in paths]
    except (ValueError, OSError) as exc:
        fail(str(exc))


def _bag_options(target_topic: Optional[str], kp: list[str], kd: list[str],
                 robot_map: list[str]) -> dict:
    """The bag reader's ReadOptions fields from the command line (ValueError: usage)."""
    pairs = []
    for item in " ".join(robot_map).replace(",", " ").split():
        ns, sep, robot_id = item.partition("=")
        if not sep or not robot_id:
            raise ValueError(f"--robot-map {item!r}: expected NAMESPACE=ROBOT_ID")
        if any(have == ns.strip("/") for have, _ in pairs):
            raise ValueError(f"--robot-map {ns.strip('/')!r} is given more than once: expected one "
                             "NAMESPACE=ROBOT_ID per arm")
        pairs.append((ns.strip("/"), robot_id))
    return {"target_topic": target_topic, "kp": _seven(kp, "--kp"), "kd": _seven(kd, "--kd"),
            "robot_map": tuple(pairs)}


def _seven(values: list[str], name: str) -> tuple[float, ...] | None:
    """1 or 7 numbers (comma- or space-separated) → 7; None when none were given."""
    items = " ".join(values).replace(",", " ").split()
    if not items:
        return None
    try:
        numbers = [float(x) for x in items]
    except ValueError:
        raise ValueError(f"{name}: expected numbers, got {' '.join(items)!r}") from None
    if len(numbers) not in (1, 7):
        raise ValueError(f"{name}: expected 1 or 7 values (J1..J7), got {len(numbers)}")
    return tuple(numbers * 7 if len(numbers) == 1 else numbers)


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _report(outcome, as_json: bool, stderr_line) -> None:
    """One outcome: its message on stdout (or one JSON object), a note or an error through
    `stderr_line(text)`."""
    if outcome.status == "skipped":  # a note, not an ingest result: stderr in both modes
        stderr_line(f"note: {outcome.message}")
    elif as_json:
        print(json.dumps(outcome.as_dict(), sort_keys=True), flush=True)
    elif outcome.exit_code == 0:
        print(outcome.message, flush=True)
    else:
        stderr_line(f"error: {outcome.message}")


@export_app.command("bundle")
@bucket_sessions
def export_bundle(
    run: str = typer.Argument(..., help="Run id, or ROBOT/RUN when the id is not unique."),
    out: Path = typer.Option(..., "--out", help="New (or empty) output directory."),
    interval: Optional[int] = typer.Option(None, "--interval", help="Export only this clean "
                                           "interval (interval_index of `twinlake intervals`)."),
    lake: Optional[Path] = OBJECT_LAKE,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON result."),
) -> None:
    """Write RUN as a joint_sysid_recording/v1 bundle (metadata.json, samples.csv, report.md).

    Refuses, with reasons, runs that are gapped, aborted, incomplete or not joint impedance,
    unless --interval selects a clean interval. The output always passes `validate bundle`.
    """
    from ..catalog import Lake
    from .lake_session import lake_root
    from ..ingest.bundles.export import ExportRefused
    from ..ingest.bundles.export import export_bundle as do_export

    try:
        path, lines = do_export(Lake(lake_root(lake)), run, out, interval=interval)
    except ExportRefused as exc:
        if as_json:
            print(json.dumps({"ok": False, "reasons": exc.reasons}))
        else:
            typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    meta = json.loads((path / "metadata.json").read_text())
    if as_json:
        print(json.dumps({"ok": True, "out": str(path), "rows": meta["samples"]["rows"],
                          "selection": meta["selection"], "validation": lines}))
    else:
        sel = meta["selection"]
        typer.echo(f"wrote {path}: {meta['samples']['rows']} ticks, seq {sel['seq_first']}.."
                   f"{sel['seq_last']} ({sel['kind']}); validation passed")


@validate_app.command("bundle")
def validate_bundle(
    directory: Path = typer.Argument(..., help="Bundle directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Check a joint_sysid_recording/v1 bundle (hashes, columns, units, monotonic seq).
    Exit 0 if valid, 1 otherwise."""
    from ..ingest.bundles.bundle_validate import validate_bundle as check

    rep = check(directory)
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2))
    else:
        typer.echo("\n".join(rep.lines()))
        typer.echo(f"{'VALID' if rep.ok else 'INVALID'}: {directory}")
    raise typer.Exit(0 if rep.ok else 1)


@import_app.command("frankatwin")
@bucket_sessions
def import_frankatwin(
    paths: list[Path] = typer.Argument(..., help="sysid_best_params.json / metrics.json files "
                                       "or directories holding them."),
    robot: Optional[str] = typer.Option(None, "--robot", help="Robot the results belong to."),
    lake: Optional[Path] = OBJECT_LAKE,
    replace: bool = typer.Option(False, "--replace", help="Rewrite an existing import."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file."),
) -> None:
    """Import FrankaTwin sysid_best_params.json (→ a fit) and metrics.json (→ a validation).
    Fits are imported before validations so a validation links to its fit."""
    from ..catalog import Lake
    from .lake_session import lake_root
    from ..fit import import_results

    worst = 0
    for item in import_results(Lake(lake_root(lake)), paths, robot, replace=replace):
        worst = max(worst, 0 if item["ok"] else 1)
        if as_json:
            print(json.dumps(item, sort_keys=True))
        else:
            typer.echo(item["message"], err=not item["ok"])
    raise typer.Exit(worst)


def main() -> None:
    """`python -m twinlake.ingest PATH...`: `twinlake ingest` on its own."""
    check_lake_env()
    typer.run(ingest_command)
