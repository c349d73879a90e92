"""`twinlake campaign run | list | show` and `fit export --format randomization` as a user runs them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from campaign_inputs import FIT_ID, make_fit
from twinlake.campaign import CampaignStore
from twinlake.cli import app


@pytest.fixture()
def runner():
    return CliRunner()


def test_run_list_show_and_export(runner, lake, reference, tmp_path):
    args = ["campaign", "run", "--fit", FIT_ID, "--reference", str(reference), "--episodes", "3", "--workers", "0",
            "--id", "cli", "--lake", str(lake), "--kp", "500", "500", "500", "500", "200", "100", "40"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "campaign cli: 3/3 episodes (3 run now, 0 before, 0 infrastructure errors)" in out.output
    # the fit was never validated on a held-out run: its verdict is said before anything else
    assert out.stdout.startswith(f"NOTE: fit {FIT_ID} is ") and "not validated on held-out runs" in out.stdout
    s = CampaignStore(lake, "cli").summaries()[0]
    assert s["gains_columns"]["kp_j5"] == 200.0 and s["gains_columns"]["kd_j1"] == 50.0
    listed = json.loads(runner.invoke(app, ["campaign", "list", "--lake", str(lake), "--json"]).output)
    assert listed == [{"campaign": "cli", "fit": FIT_ID, "sample": "posterior", "controller": "builtin", "episodes": 3,
                       "done": 3, "infrastructure_errors": 0}]
    shown = json.loads(runner.invoke(app, ["campaign", "show", "cli", "--lake", str(lake), "--json"]).output)
    assert shown["done"] == 3 and shown["gain_sets"][0]["episodes"] == 3
    assert sum(shown["gain_sets"][0]["outcomes"].values()) == 3
    assert shown["dominant_outcome"]["share"] >= 0.9 or shown["dominant_outcome"] is None
    text = runner.invoke(app, ["campaign", "show", "cli", "--lake", str(lake)]).output
    assert shown["nominal_reference"]["outcome"] == "completed" and "NOTE: the reference aborts" not in text
    if shown["dominant_outcome"] is not None:  # 3 of 3 in one outcome: said first
        assert text.startswith(f"NOTE: 3 of 3 episodes (100.0 %) ended {shown['dominant_outcome']['outcome']}")
    target = tmp_path / "r.json"
    exp = runner.invoke(app, ["fit", "export", FIT_ID, "--format", "randomization", "--out", str(target), "--lake", str(lake)])
    assert exp.exit_code == 0 and json.loads(target.read_text())["fit"] == FIT_ID


def test_an_aborting_reference_is_refused_or_run_and_said_first(runner, lake, reference):
    base = ["campaign", "run", "--fit", FIT_ID, "--reference", str(reference), "--episodes", "2", "--workers", "0",
            "--lake", str(lake), "--tracking-limit", "0.002", "--id", "abort"]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 2 and "aborts: tracking guard (anchor rule) at t = " in refused.output
    assert not (lake / "campaigns").exists()
    ran = runner.invoke(app, base + ["--allow-aborting-reference"])
    assert ran.exit_code == 0, ran.output
    first, second = ran.stdout.splitlines()[:2]  # the fit's verdict first, then the reference's abort
    assert first.startswith(f"NOTE: fit {FIT_ID} is ")
    assert second.startswith("WARNING: the reference aborts even on the fit's own parameters")
    text = runner.invoke(app, ["campaign", "show", "abort", "--lake", str(lake)]).output.splitlines()
    assert text[0].startswith("NOTE: the reference aborts even on the fit's own parameters (run with "
                              "--allow-aborting-reference): the nominal episode")
    assert text[1].startswith("NOTE: 2 of 2 episodes (100.0 %) ended aborted_tracking (guard fired at t = ")


def test_bad_input_is_one_line_error_before_anything_runs(runner, tmp_path, reference):
    lake = tmp_path / "lake"
    make_fit(lake, "bare", with_errors=False)
    base = ["campaign", "run", "--reference", str(reference), "--episodes", "2", "--workers", "0", "--lake", str(lake)]
    cases = [(["--fit", "bare"], "fit bare: no stored error bars"),
             (["--fit", "nope"], "fit 'nope': no "),
             (["--fit", "bare", "--sample", "ranges", "--ranges", "mu_viscous=0:9"], "outside the parameter's bounds"),
             (["--fit", "bare", "--sample", "ranges"], "--sample ranges needs --ranges"),
             (["--fit", "bare", "--sample", "ranges", "--ranges", "delay=0:1", "--kp", "1", "2"], "--kp: expected 7 values"),
             (["--fit", "bare", "--sample", "ranges", "--ranges", "delay=0:1", "--controller", "nosuch:thing"],
              "cannot import 'nosuch'")]
    for extra, message in cases:
        out = runner.invoke(app, base + extra)
        assert out.exit_code == 2, (extra, out.output)
        assert message in out.output, (extra, out.output)
    assert not (lake / "campaigns").exists()
    shown = runner.invoke(app, ["campaign", "show", "zzz", "--lake", str(lake)])
    assert shown.exit_code == 2 and "campaign 'zzz': not found" in shown.output


def test_a_second_invocation_of_the_same_campaign_is_refused_while_one_runs(lake, reference):
    from twinlake.campaign import CampaignRequest, run_campaign

    holder = CampaignStore(lake, "busy")
    holder.lock()
    try:
        with pytest.raises(ValueError, match="being run by another process"):
            run_campaign(lake, CampaignRequest(fit=FIT_ID, episodes=1, reference_csv=str(reference), campaign_id="busy"))
    finally:
        holder.unlock()
