"""Plug-in controllers: the per-episode path agrees with the batch engine, an exception or a
non-finite target ends only its episode (outcome + traceback), a bad name fails up front."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from campaign_inputs import FIT_ID
from twinlake.campaign import CampaignRequest, CampaignStore, run_campaign


def _req(reference, controller, cid, episodes=2) -> CampaignRequest:
    return CampaignRequest(fit=FIT_ID, episodes=episodes, reference_csv=str(reference), controller=controller,
                           campaign_id=cid)


def _q(path) -> np.ndarray:
    t = pq.read_table(path)
    return np.column_stack([t.column(f"q{j}").to_numpy() for j in range(1, 8)])


def test_reference_follower_matches_the_batch_engine(lake, reference):
    run_campaign(lake, CampaignRequest(fit=FIT_ID, episodes=2, reference_csv=str(reference), campaign_id="batch"))
    run_campaign(lake, _req(reference, "twinlake.campaign.plugin:ReferenceFollower", "plug"))
    a, b = CampaignStore(lake, "batch"), CampaignStore(lake, "plug")
    for eid in ("e000000", "e000001"):
        qa, qb = _q(a.episodes_dir / eid / "samples.parquet"), _q(b.episodes_dir / eid / "samples.parquet")
        assert qa.shape == qb.shape
        assert np.abs(qa - qb).max() < 1e-9
        sa, sb = (json.loads((s.episodes_dir / eid / "summary.json").read_text()) for s in (a, b))
        assert sa["outcome"] == sb["outcome"] == "completed"
        assert sb["metrics"]["track_max_rad"] == pytest.approx(sa["metrics"]["track_max_rad"], abs=1e-9)


def test_exception_and_nonfinite_end_only_their_episode(lake, reference):
    report = run_campaign(lake, _req(reference, "plugins:Failing", "fail", episodes=4))
    assert report.outcomes == {"completed": 2, "controller_exception": 2} and report.infrastructure_errors == 0
    store = CampaignStore(lake, "fail")
    bad = json.loads((store.episodes_dir / "e000001" / "summary.json").read_text())
    assert bad["failure"]["category"] == "controller_exception" and bad["failure"]["tick"] == 50
    assert "policy blew up at tick 50" in bad["failure"]["traceback"] and "Traceback" in bad["failure"]["traceback"]
    assert pq.read_table(store.episodes_dir / "e000001" / "samples.parquet").num_rows == 50
    nan = run_campaign(lake, _req(reference, "plugins:NonFinite", "nan", episodes=1))
    assert nan.outcomes == {"controller_nonfinite_output": 1}
    s = CampaignStore(lake, "nan").summaries()[0]
    assert s["failure"]["tick"] == 20 and s["metrics"]["ticks"] == 20
    broken = run_campaign(lake, _req(reference, "plugins:broken_factory", "broken", episodes=1))
    assert broken.outcomes == {"controller_exception": 1}


@pytest.mark.parametrize("spec, message", [("plugins:Missing", "has no attribute 'Missing'"),
                                           ("no_such_module_x:make", "cannot import 'no_such_module_x'"),
                                           ("plugins", "expected MODULE:CALLABLE")])
def test_unimportable_plugin_fails_before_any_episode(lake, reference, spec, message):
    with pytest.raises(ValueError, match=message):
        run_campaign(lake, _req(reference, spec, "never"))
    assert not CampaignStore(lake, "never").root.exists()


def test_a_fit_with_links_is_refused_before_any_plugin_episode(lake, reference):
    """SimFR3 carries the model's links only: a fit freeing +links / +load-friction is refused
    with its reason before anything is written; the built-in engine runs it."""
    from campaign_inputs import make_fit

    make_fit(lake, "linked", free_links=True)
    with pytest.raises(ValueError, match="link_mass_scale_j1.*built-in joint impedance"):
        run_campaign(lake, CampaignRequest(fit="linked", episodes=1, reference_csv=str(reference),
                                           controller="twinlake.campaign.plugin:ReferenceFollower", campaign_id="l"))
    assert not CampaignStore(lake, "l").root.exists()
    report = run_campaign(lake, CampaignRequest(fit="linked", episodes=1, reference_csv=str(reference), campaign_id="b"))
    assert report.infrastructure_errors == 0
