"""`twinlake export bundle` and `twinlake validate bundle` (the formats work, issue 3), and
`twinlake import frankatwin` for FrankaTwin result files (fits and validations).

Exit codes: 0 success; 1 refused / invalid (with every reason printed); 2 usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def _group(app: typer.Typer, name: str, help_text: str) -> typer.Typer:
    """The root app's sub-group `name`, created once and shared by every folder using it."""
    for info in app.registered_groups:
        if info.name == name and info.typer_instance is not None:
            return info.typer_instance
    group = typer.Typer(help=help_text, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


def register(app: typer.Typer) -> None:
    """Add `export bundle`, `validate bundle` and `import frankatwin` to the root app."""
    _group(app, "export", "Export lake data to portable formats.").command("bundle")(export_bundle)
    _group(app, "validate", "Validate portable files.").command("bundle")(validate_bundle)
    _group(app, "import", "Import result files of other tools.").command("frankatwin")(
        import_frankatwin)


def export_bundle(
    run: str = typer.Argument(..., help="Run id, or ROBOT/RUN when the id is not unique."),
    out: Path = typer.Option(..., "--out", help="New (or empty) output directory."),
    interval: Optional[int] = typer.Option(None, "--interval", help="Export only this clean "
                                           "interval (interval_index of `twinlake intervals`)."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Lake root (default $TWINLAKE_LAKE, else ./lake)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON result."),
) -> None:
    """Write RUN as a joint_sysid_recording/v1 bundle (metadata.json, samples.csv, report.md).

    Refuses, with reasons, runs that are gapped, aborted, incomplete or not joint impedance,
    unless --interval selects a clean interval. The output always passes `validate bundle`.
    """
    from twinlake.catalog import Lake, resolve_lake
    from twinlake.ingest.bundle_export import ExportRefused
    from twinlake.ingest.bundle_export import export_bundle as do_export

    try:
        path, lines = do_export(Lake(resolve_lake(lake)), run, out, interval=interval)
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


def validate_bundle(
    directory: Path = typer.Argument(..., help="Bundle directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Check a joint_sysid_recording/v1 bundle (hashes, columns, units, monotonic seq).
    Exit 0 if valid, 1 otherwise."""
    from twinlake.ingest.bundle_validate import validate_bundle as check

    rep = check(directory)
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2))
    else:
        typer.echo("\n".join(rep.lines()))
        typer.echo(f"{'VALID' if rep.ok else 'INVALID'}: {directory}")
    raise typer.Exit(0 if rep.ok else 1)


def import_frankatwin(
    paths: list[Path] = typer.Argument(..., help="sysid_best_params.json / metrics.json files "
                                       "or directories holding them."),
    robot: Optional[str] = typer.Option(None, "--robot", help="Robot the results belong to."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Lake root (default $TWINLAKE_LAKE, else ./lake)."),
    replace: bool = typer.Option(False, "--replace", help="Rewrite an existing import."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file."),
) -> None:
    """Import FrankaTwin sysid_best_params.json (→ a fit) and metrics.json (→ a validation).
    Fits are imported before validations so a validation links to its fit."""
    from twinlake.catalog import Lake, resolve_lake
    from twinlake.ingest.frankatwin_results import import_results

    worst = 0
    for item in import_results(Lake(resolve_lake(lake)), paths, robot, replace=replace):
        worst = max(worst, 0 if item["ok"] else 1)
        if as_json:
            print(json.dumps(item, sort_keys=True))
        else:
            typer.echo(item["message"], err=not item["ok"])
    raise typer.Exit(worst)
