"""A gains grid: every gain set runs the same parameter draws, and the query of
docs/campaigns.md answers "which gains keep the p95 tracking error under X"."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from campaign_inputs import FIT_ID
from twinlake.campaign import CampaignRequest, CampaignStore, run_campaign
from twinlake.campaign.gains import base_gains, gains_grid
from twinlake.catalog import connect
from twinlake.sim import LAYOUT

DOC = Path(__file__).resolve().parents[2] / "docs" / "campaigns.md"


def _documented_query() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Which gains keep"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def test_grid_spec_and_errors(tmp_path):
    sets = gains_grid("kp_scale=0.5,2;kd_scale=1;alpha=0.05,1", base_gains(None, None, None))
    assert [g.gains_id for g in sets] == ["g00", "g01", "g02", "g03"]
    assert sets[2].kp_nm_per_rad[0] == 1200.0 and sets[1].filter_alpha == 1.0
    with pytest.raises(ValueError, match="expected kp_scale"):
        gains_grid("kp=1,2", base_gains(None, None, None))
    with pytest.raises(ValueError, match="filter_alpha: expected 0 < alpha <= 1"):
        gains_grid("alpha=0,1", base_gains(None, None, None))


def test_documented_query_answers_which_gains_keep_p95_under_x(lake, reference):
    run_campaign(lake, CampaignRequest(fit=FIT_ID, episodes=3, reference_csv=str(reference), campaign_id="gains",
                                       gains_grid="kp_scale=0.5,2", samples="none"))
    summaries = CampaignStore(lake, "gains").summaries()
    assert [s["episode_id"] for s in summaries][:4] == ["g00-e000000", "g00-e000001", "g00-e000002", "g01-e000000"]
    by = {(s["gains_id"], s["sample_index"]): s for s in summaries}
    for i in range(3):  # the same arms under every gain set
        assert by[("g00", i)]["parameters"] == by[("g01", i)]["parameters"]
    p95 = {g: np.percentile([s["metrics"]["track_max_rad"] for s in summaries if s["gains_id"] == g], 95)
           for g in ("g00", "g01")}
    assert p95["g00"] != p95["g01"]
    threshold = float(np.mean(list(p95.values())))  # one gain set passes, the other does not
    query = _documented_query()
    assert "0.03" in query and "'gains'" in query
    rows = connect(lake).execute(query.replace("0.03", repr(threshold))).fetchall()
    assert [r[0] for r in rows] == [g for g in sorted(p95, key=p95.get) if p95[g] < threshold]
    assert rows[0][-1] == pytest.approx(min(p95.values()))
    assert LAYOUT.size == len(summaries[0]["parameters"])
