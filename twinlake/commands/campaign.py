"""`twinlake campaign run | list | show` (docs/campaigns.md), over twinlake.campaign."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .lake_session import bucket_sessions
from ..options import OBJECT_LAKE, error_text, fail

campaign_app = typer.Typer(help="Randomisation campaigns: run the twin across its own uncertainty.",
                           no_args_is_help=True)


def _floats(values: list[str], name: str) -> list[float] | None:
    if not values:
        return None
    try:
        out = [float(x) for v in values for x in v.replace(",", " ").split()]
    except ValueError:
        fail(f"{name}: expected numbers, got {' '.join(values)!r}")
    if len(out) != 7:
        fail(f"{name}: expected 7 values (J1..J7), got {len(out)}")
    return out


@campaign_app.command("run")
@bucket_sessions
def run_cmd(
    fit: str = typer.Option(..., "--fit", help="Fit whose distribution the episodes draw from."),
    episodes: int = typer.Option(..., "--episodes", min=1, help="Episodes (per gain set with --gains-grid)."),
    reference: Optional[Path] = typer.Option(None, "--reference", help="Excitation reference.csv to send."),
    run: Optional[str] = typer.Option(None, "--run", help="Or a recorded run's targets: [ROBOT/]RUN[:INTERVAL]."),
    sample: str = typer.Option("posterior", "--sample", help="posterior (the fit's error bars) | ranges (--ranges)."),
    ranges: Optional[str] = typer.Option(None, "--ranges", help="Uniform ranges: 'mu_static=0.5:1.5;delay=0:2' (LAYOUT selectors)."),
    kp: list[str] = typer.Option([], "--kp", help="Joint stiffness J1..J7 [N·m/rad] (default fr3_stack's)."),
    kd: list[str] = typer.Option([], "--kd", help="Joint damping J1..J7 [N·m·s/rad] (default fr3_stack's)."),
    filter_alpha: Optional[float] = typer.Option(None, "--filter-alpha", help="Target EMA coefficient (default 0.05)."),
    gains_grid: Optional[str] = typer.Option(None, "--gains-grid", help="'kp_scale=0.5,1,2;kd_scale=0.8,1' or a JSON list of gain sets."),
    controller: Optional[str] = typer.Option(None, "--controller", help="Plug-in MODULE:CALLABLE (per-episode path)."),
    seed: int = typer.Option(0, "--seed", help="Campaign seed: episode i draws from (seed, i)."),
    workers: int = typer.Option(2, "--workers", min=0, help="Ray workers (0: run in this process, no Ray)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join this Ray cluster (default: a local one)."),
    campaign_id: Optional[str] = typer.Option(None, "--id", help="Campaign id (default c-<config hash>); the same id resumes."),
    samples: str = typer.Option("parquet", "--samples", help="Per-episode 1 kHz samples: parquet | none."),
    tail_s: float = typer.Option(1.0, "--tail-s", help="Run on after the last reference row [s]."),
    tracking_limit: float = typer.Option(0.05, "--tracking-limit", help="Live guard: tracking error bound [rad] (under --tracking-rule)."),
    tracking_rule: str = typer.Option("anchor", "--tracking-rule", help="anchor: |q − first target| (fr3_stack's code; the project's rule) | target: |q − last sent target| (its docs)."),
    allow_aborting_reference: bool = typer.Option(False, "--allow-aborting-reference", help="Run even if the reference aborts on the fit's own parameters (the summary says so first)."),
    speed_limit: Optional[float] = typer.Option(None, "--speed-limit", help="Live guard: joint speed [rad/s] (default: the plan's max_velocity, else 0.1)."),
    chunk: int = typer.Option(32, "--chunk", min=1, help="Episodes per batch / Ray task."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    lake: Optional[Path] = OBJECT_LAKE,
) -> None:
    """Run (or resume) a campaign: N episodes of the reference on arms drawn from the fit."""
    from ..campaign import CampaignRequest, run_campaign
    from .lake_session import lake_root

    req = CampaignRequest(fit=fit, episodes=episodes, reference_csv=str(reference) if reference else None, run=run,
                          sample=sample, ranges=ranges, kp=_floats(kp, "--kp"), kd=_floats(kd, "--kd"),
                          filter_alpha=filter_alpha, gains_grid=gains_grid, controller=controller, seed=seed,
                          campaign_id=campaign_id, samples=samples, tail_s=tail_s, tracking_limit_rad=tracking_limit,
                          speed_limit_rad_s=speed_limit, chunk_episodes=chunk, tracking_rule=tracking_rule,
                          allow_aborting_reference=allow_aborting_reference)
    from .cluster import check_address

    from ..progress import Stages

    check_address(address)
    verdict = _fit_verdict(lake_root(lake), fit)
    if verdict is not None and verdict["level"] != "trusted":  # said first, before any episode runs
        typer.echo(f"NOTE: fit {fit} is {verdict['level']}: {'; '.join(verdict['reasons'])}", err=as_json)
    try:
        with Stages("campaign run", enabled=not as_json) as stages:  # stderr; quiet with --json
            stages.stage(f"running {episodes} episode(s) of {fit}" + (f" on {workers} Ray workers" if workers else ""))
            report = run_campaign(lake_root(lake), req, workers=workers, address=address,
                                  progress=lambda done, total: stages.fraction(done / max(total, 1)))
    except ValueError as exc:
        fail(error_text(exc))
    if as_json:
        typer.echo(json.dumps({"fit_verdict": verdict,
                               **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(report).items()}}, indent=2))
        return
    if report.nominal and report.nominal["outcome"] != "completed":
        typer.echo(f"WARNING: the reference aborts even on the fit's own parameters: {report.nominal['text']}")
    typer.echo(f"campaign {report.campaign_id}: {report.total_done}/{report.planned} episodes "
               f"({report.ran} run now, {report.already_done} before, {report.infrastructure_errors} infrastructure "
               f"errors) in {report.wall_s:.1f} s")
    typer.echo("outcomes: " + ", ".join(f"{k} {v}" for k, v in report.outcomes.items()))
    if report.total_done < report.planned:
        typer.echo("incomplete: run the same command again to retry the missing episodes")
    typer.echo(str(report.path))


def _fit_verdict(root: Path, fit: str) -> dict | None:
    """The fit's current verdict (fit/reports/verdict_record.py) as JSON, None when the fit is not
    in the lake (run_campaign then says so)."""
    from ..fit import load_fit
    from ..fit import verdict_json
    from ..fit import current_verdict

    try:
        return verdict_json(current_verdict(root, load_fit(root, fit)))
    except ValueError:
        return None


@campaign_app.command("list")
@bucket_sessions
def list_cmd(lake: Optional[Path] = OBJECT_LAKE,
             as_json: bool = typer.Option(False, "--json", help="Print a JSON array.")) -> None:
    """List the campaigns in the lake with their episode counts."""
    from ..campaign import CampaignStore, list_campaigns
    from .lake_session import lake_root

    root = lake_root(lake)
    rows = []
    for cid in list_campaigns(root):
        store = CampaignStore(root, cid)
        cfg = store.read_config()
        planned = cfg["episodes_per_gain_set"] * len(cfg["gain_sets"])
        rows.append({"campaign": cid, "fit": cfg["fit"], "sample": cfg["sample"], "controller": cfg["controller"],
                     "episodes": planned, "done": len(store.done()),
                     "infrastructure_errors": len(store.infrastructure_errors())})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['campaign']}  fit={r['fit']}  {r['sample']}  {r['controller']}  "
                   f"{r['done']}/{r['episodes']} episodes  {r['infrastructure_errors']} infrastructure errors")


@campaign_app.command("show")
@bucket_sessions
def show_cmd(campaign_id: str = typer.Argument(..., help="Campaign id."), lake: Optional[Path] = OBJECT_LAKE,
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Outcome counts and tracking-error percentiles of a campaign (per gain set)."""
    from ..campaign import CampaignStore
    from ..campaign.report import campaign_summary
    from .lake_session import lake_root

    store = CampaignStore(lake_root(lake), campaign_id)
    if not store.exists():
        fail(f"campaign {campaign_id!r}: not found under {store.root.parent} (see `twinlake campaign list`)")
    info = campaign_summary(store)
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    for line in info["warnings"]:
        typer.echo(f"NOTE: {line}")
    typer.echo(f"campaign {campaign_id}: fit {info['fit']}, {info['sample']}, {info['controller']}, "
               f"{info['done']}/{info['planned']} episodes, {info['infrastructure_errors']} infrastructure errors")
    for g in info["gain_sets"]:
        typer.echo(f"  {g['gains_id']}: " + ", ".join(f"{k} {v}" for k, v in g["outcomes"].items())
                   + f"; track_max_rad p50 {g['track_max_rad_p50']}, p95 {g['track_max_rad_p95']}; "
                   f"tau_peak_ratio max {g['tau_peak_ratio_max']}")
