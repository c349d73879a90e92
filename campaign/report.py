"""What `twinlake campaign show` prints: counts and percentiles from the campaign's episodes."""

from __future__ import annotations

import numpy as np

from .store import CampaignStore

DOMINANT_SHARE = 0.9  # `campaign show` says first when this share of episodes ended in one outcome


def _pct(values: list, q: float) -> float | None:
    arr = np.array([v for v in values if v is not None], dtype=np.float64)
    return round(float(np.percentile(arr, q)), 6) if arr.size else None


def campaign_summary(store: CampaignStore) -> dict:
    """Config essentials, counts, and per gain set the outcome counts and the p50 / p95 of
    track_max_rad [rad] and the largest tau_peak_ratio (linear-interpolated percentiles)."""
    cfg = store.read_config()
    summaries = store.summaries()
    groups: dict[str, list[dict]] = {}
    for s in summaries:
        groups.setdefault(s["gains_id"], []).append(s)
    out = []
    for gid in sorted(groups):
        rows = groups[gid]
        outcomes: dict[str, int] = {}
        for s in rows:
            outcomes[s["outcome"]] = outcomes.get(s["outcome"], 0) + 1
        track = [s["metrics"].get("track_max_rad") for s in rows]
        ratio = [s["metrics"].get("tau_peak_ratio") for s in rows if s["metrics"].get("tau_peak_ratio") is not None]
        out.append({"gains_id": gid, "episodes": len(rows), "outcomes": dict(sorted(outcomes.items())),
                    "track_max_rad_p50": _pct(track, 50), "track_max_rad_p95": _pct(track, 95),
                    "tau_peak_ratio_max": round(max(ratio), 6) if ratio else None})
    return {"campaign": store.campaign_id, "fit": cfg["fit"], "sample": cfg["sample"], "controller": cfg["controller"],
            "planned": cfg["episodes_per_gain_set"] * len(cfg["gain_sets"]), "done": len(summaries),
            "infrastructure_errors": len(store.infrastructure_errors()), "gain_sets": out,
            "nominal_reference": cfg.get("nominal_reference"), "dominant_outcome": dominant_outcome(summaries),
            "warnings": warnings(cfg, summaries)}


def dominant_outcome(summaries: list[dict], share: float = DOMINANT_SHARE) -> dict | None:
    """{outcome, episodes, share} when at least `share` of the episodes ended in one outcome."""
    counts: dict[str, int] = {}
    for s in summaries:
        counts[s["outcome"]] = counts.get(s["outcome"], 0) + 1
    if not counts:
        return None
    outcome, n = max(sorted(counts.items()), key=lambda kv: kv[1])
    return {"outcome": outcome, "episodes": n, "share": n / len(summaries)} if n >= share * len(summaries) else None


def warnings(cfg: dict, summaries: list[dict]) -> list[str]:
    """The lines `campaign show` prints first: an aborting reference run anyway, one outcome
    for >= 90 % of the episodes (with the guard that fired most, when it is an abort)."""
    lines = []
    nominal = cfg.get("nominal_reference")
    if nominal and nominal.get("outcome") != "completed":
        lines.append(f"the reference aborts even on the fit's own parameters (run with --allow-aborting-reference): "
                     f"{nominal['text']}")
    dom = dominant_outcome(summaries)
    if dom is not None:
        line = f"{dom['episodes']} of {len(summaries)} episodes ({100 * dom['share']:.1f} %) ended {dom['outcome']}"
        times = [s["metrics"].get("abort_t_s") for s in summaries if s["outcome"] == dom["outcome"]]
        times = [t for t in times if t is not None]
        if times:
            line += f" (guard fired at t = {min(times):.3f}..{max(times):.3f} s)"
        lines.append(line)
    return lines


__all__ = ["DOMINANT_SHARE", "campaign_summary", "dominant_outcome", "warnings"]
