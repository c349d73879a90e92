"""What `twinlake campaign show` prints: counts and percentiles from the campaign's episodes."""

from __future__ import annotations

import numpy as np

from .store import CampaignStore


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
            "infrastructure_errors": len(store.infrastructure_errors()), "gain_sets": out}


__all__ = ["campaign_summary"]
