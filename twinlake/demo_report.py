"""What `twinlake demo` prints about its fits and its campaign, all measured in that run:

- `truth_in_intervals` / `truth_table`: the truth against each *estimated* parameter's 95 %
  interval (fit/core/parameter_status.py); the parameters left out (not identified, at a bound,
  held, without an interval) are counted and named with their status;
- `coverage_cause`: under 90 % coverage, how unlikely that count is for calibrated 95 %
  intervals (the binomial tail of this run's own numbers) and the likely cause;
- `closing_campaign` / `outcome_rows` / `episode_lines`: the campaign's outcome table and, per
  episode that did not complete, the guard that fired, on which joint, the value it saw and the
  drawn parameters furthest from the fit (in the fit's own standard errors).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

GUARD_UNITS = {"tracking": "rad", "speed": "rad/s", "state_age": "s", "joint_range": "rad"}
MAX_EPISODE_LINES = 10  # non-completed episodes explained one by one; the rest counted
DRAWN_SHOWN = 3  # drawn parameters named per episode


def truth_in_intervals(truth, statuses) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """({name: {low, high, truth, inside}} over the estimated parameters with an interval,
    {status label: [names]} of the freed parameters left out, and why)."""
    from .fit import Status
    from .sim import LAYOUT

    values = dict(zip(LAYOUT.names, truth.to_vector().tolist()))
    cover: dict[str, dict] = {}
    left: dict[str, list[str]] = {}
    for st in statuses:
        if st.status is Status.FIXED:
            continue
        if st.status is Status.ESTIMATED and st.interval is not None:
            lo, hi = st.interval
            t = values[st.name]
            cover[st.name] = {"low": lo, "high": hi, "truth": t, "inside": bool(lo <= t <= hi)}
        else:  # the integer delay (a discrete search) has no interval either
            label = st.status.label if st.status is not Status.ESTIMATED else "estimated without an interval"
            left.setdefault(label, []).append(st.name)
    return cover, left


def truth_table(truth, fit, console: Console, statuses) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Print truth / fit ± 95 % half-width per joint and group (✓ truth inside, ✗ outside; the
    status instead where the parameter has no interval); returns `truth_in_intervals`."""
    from .sim import LAYOUT

    cover, left = truth_in_intervals(truth, statuses)
    by = {st.name: st for st in statuses}
    table = Table(title=escape("demo robot: truth (never shown to the fit) / fit ± 95 % half-width, ✓ truth inside"))
    groups = [g.name for g in LAYOUT.joint_groups if not g.frozen_by_default]  # FrankaTwin's per-joint groups
    table.add_column("joint")
    for g in groups:
        table.add_column(escape(g), justify="right")
    for j in range(7):
        cells = [f"J{j + 1}"]
        for g in groups:
            name = f"{g}_j{j + 1}"
            t, f = float(getattr(truth, g)[j]), float(getattr(fit, g)[j])
            c = cover.get(name)
            if c is not None:
                cells.append(f"{t:.3f} / {f:.3f} ±{(c['high'] - c['low']) / 2:.2g} {'✓' if c['inside'] else '✗'}")
            else:
                cells.append(f"{t:.3f} / {by[name].display(3)}")
        table.add_row(*(escape(c) for c in cells))
    console.print(table)
    console.print(f"motor delay: truth {truth.motor_delay_ms} ms, fit {fit.motor_delay_ms} ms")
    if cover:
        inside = sum(c["inside"] for c in cover.values())
        outside = [n for n, c in cover.items() if not c["inside"]]
        console.print(f"truth inside its 95 % interval for {inside} of {len(cover)} estimated parameters "
                      f"({100 * inside / len(cover):.0f} % coverage; a calibrated interval covers 95 %)"
                      + (f"; outside: {', '.join(outside)}" if outside else ""), highlight=False)
    else:
        console.print("no estimated parameter has a 95 % interval: coverage not measured")
    if left:
        count = sum(len(v) for v in left.values())
        console.print(f"left out of the coverage ({count}; an interval is only for an estimated parameter): "
                      + "; ".join(f"{label}: {', '.join(names)}" for label, names in left.items()), highlight=False)
    return cover, left


def coverage_cause(cover: dict[str, dict], gates: str, console: Console) -> None:
    """Under 90 % coverage: how unlikely this run's count is for calibrated 95 % intervals (the
    binomial tail, computed now) and the likely cause (docs/fitting.md, "Coverage on the demo")."""
    from scipy.stats import binom

    if not cover:
        return
    n, inside = len(cover), sum(c["inside"] for c in cover.values())
    if inside >= 0.9 * n:
        return
    tail = float(binom.cdf(inside, n, 0.95))
    console.print(f"below the nominal 95 %: {inside} or fewer of {n} calibrated 95 % intervals would cover their "
                  f"truth with probability {tail:.2g}", highlight=False)
    if "not converged" in gates:
        console.print("likely cause: the fit's LM stopped at its cap before converging (raise --refine)")
        return
    console.print("likely cause: the demo's recorder, like a real robot's controller, acts on its noisy "
                  "measurements, which dithers the friction; the error bars carry the spread this causes as far "
                  "as it is linear at the optimum (fit run --loop-noise-draws) and are widened where the loss is "
                  "flatter than they assume (fit run --profile-check), which stick-slip friction on small motions "
                  "can still defeat (docs/fitting.md, \"Coverage on the demo\")")


def closing_campaign(lake: Path, fit_id: str, holdout: str, cfg, *, address: str | None, console: Console,
                     statuses=()) -> dict:
    """A campaign of the held-out run's targets on `cfg.campaign_episodes` arms drawn from the
    fit's posterior (fr3_stack's default guards, no per-episode samples); prints its outcome
    table and every episode that did not complete; returns {campaign, episodes, outcomes,
    nominal, completed_share, table, not_completed}."""
    from .campaign import CampaignRequest, CampaignStore, run_campaign

    req = CampaignRequest(fit=fit_id, episodes=cfg.campaign_episodes, run=holdout, samples="none", seed=cfg.seed,
                          chunk_episodes=50)
    report = run_campaign(lake, req, workers=cfg.workers, address=address)
    summaries = CampaignStore(lake, report.campaign_id).summaries()
    rows = outcome_rows(summaries)
    table = Table(title=escape(f"campaign {report.campaign_id}: {report.total_done} arms drawn from the fit's "
                               f"posterior replay {holdout}"))
    for name in ("outcome", "episodes", "share", "worst |q − anchor| p50 / p95 (mrad)", "abort t (s)"):
        table.add_column(escape(name), justify="left" if name == "outcome" else "right")
    for r in rows:
        table.add_row(*(escape(c) for c in (r["outcome"], str(r["episodes"]), f"{100 * r['share']:.1f} %",
                                             f"{_mrad(r['anchor_p50_rad'])} / {_mrad(r['anchor_p95_rad'])}",
                                             r["abort_t_s"] or "-")))
    console.print(f"  {report.nominal['text']}")
    console.print(table)
    lines = episode_lines(summaries, statuses)
    for line in lines:
        console.print(f"  {line}", highlight=False)
    done = max(report.total_done, 1)
    return {"campaign": report.campaign_id, "episodes": report.total_done, "outcomes": report.outcomes,
            "nominal": report.nominal, "completed_share": report.outcomes.get("completed", 0) / done, "table": rows,
            "not_completed": lines}


def episode_lines(summaries: list[dict], statuses=()) -> list[str]:
    """One line per episode that did not complete (at most MAX_EPISODE_LINES, then a count):
    its outcome, the guard that fired, when, on which joint and the value it saw, and the
    drawn parameters furthest from the fit in the fit's standard errors (estimated ones)."""
    from .fit import Status

    bars = {st.name: (st.value, st.stderr) for st in statuses
            if st.status is Status.ESTIMATED and st.stderr and np.isfinite(st.stderr)}
    bad = sorted((s for s in summaries if s["outcome"] != "completed"), key=lambda s: s["episode_id"])
    out = []
    for s in bad[:MAX_EPISODE_LINES]:
        m = s["metrics"]
        guard = m.get("abort_reason")
        where = (f"{guard} guard at t = {m['abort_t_s']:.2f} s, J{m.get('abort_joint')} saw "
                 f"{m.get('abort_value'):.4g} {GUARD_UNITS.get(guard, '')}") if guard else "no guard fired"
        z = sorted(((n, v, (v - bars[n][0]) / bars[n][1]) for n, v in (s.get("parameters") or {}).items()
                    if n in bars), key=lambda t: -abs(t[2]))[:DRAWN_SHOWN]
        drawn = ", ".join(f"{n} {v:.4g} ({dz:+.1f} se)" for n, v, dz in z) or "no estimated parameter drawn"
        out.append(f"episode {s['episode_id']}: {s['outcome']}: {where}; drawn furthest from the fit: {drawn}")
    if len(bad) > MAX_EPISODE_LINES:
        out.append(f"... and {len(bad) - MAX_EPISODE_LINES} more episodes that did not complete "
                   "(`twinlake campaign show`)")
    return out


def outcome_rows(summaries: list[dict]) -> list[dict]:
    """Per outcome (most episodes first): episodes, share, p50 / p95 of the worst checked
    |q − anchor| [rad] and the range of abort times [s] (text, None when none aborted)."""
    by: dict[str, list[dict]] = {}
    for s in summaries:
        by.setdefault(s["outcome"], []).append(s)
    rows = []
    for outcome, items in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        anchor = [s["metrics"].get("track_anchor_max_rad") for s in items]
        anchor = np.array([a for a in anchor if a is not None], dtype=float)
        times = [s["metrics"]["abort_t_s"] for s in items if s["metrics"].get("abort_t_s") is not None]
        rows.append({"outcome": outcome, "episodes": len(items), "share": len(items) / len(summaries),
                     "anchor_p50_rad": float(np.percentile(anchor, 50)) if anchor.size else None,
                     "anchor_p95_rad": float(np.percentile(anchor, 95)) if anchor.size else None,
                     "abort_t_s": f"{min(times):.2f}..{max(times):.2f}" if times else None})
    return rows


def _mrad(value: float | None) -> str:
    return "-" if value is None else f"{1e3 * value:.1f}"


__all__ = ["closing_campaign", "coverage_cause", "episode_lines", "outcome_rows", "truth_in_intervals", "truth_table"]
