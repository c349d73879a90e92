"""twinlake.campaign: randomisation campaigns — run the twin across its own uncertainty.

A campaign draws N parameter sets of a fit (its posterior, or declared ranges), runs a
reference through fr3_stack's joint impedance on each (built-in: many episodes per
`mujoco.batch` replay, fanned out over Ray; plug-in controllers: per episode), scores each
episode (tracking, torques, slew saturation, live guards, outcome) and keeps everything in the
lake under `campaigns/campaign=<id>/` with atomic episode directories, retried infrastructure
failures, append-only summaries and manifests. See docs/campaigns.md and campaign/README.md.

Public API: `CampaignRequest`, `run_campaign`, `prepare`, `CampaignStore`, `list_campaigns`.
"""

from __future__ import annotations

from .runner import CampaignReport, CampaignRequest, prepare, run_campaign
from .store import CampaignStore


def list_campaigns(lake) -> list[str]:
    """Campaign ids in the lake, sorted."""
    from pathlib import Path

    from ..catalog import Lake

    root = (lake.root if isinstance(lake, Lake) else Path(lake)) / "campaigns"
    if not root.is_dir():
        return []
    return sorted(p.name.split("=", 1)[1] for p in root.glob("campaign=*") if (p / "campaign.json").is_file())


__all__ = ["CampaignReport", "CampaignRequest", "CampaignStore", "list_campaigns", "prepare", "run_campaign"]
