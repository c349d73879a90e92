"""`twinlake demo`, reduced (short runs, small population, few generations) end to end: the
offline recorder, ingest, interval selection, a fit on the session's Ray cluster, the truth
table with the stored 95 % intervals and the held-out RMSE against the noise floor."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.cli import app
from twinlake.fit.record import list_fits, load_fit
from twinlake.sim import DEMO_PROFILE_PATH, PARAM_NAMES, load_params


@pytest.mark.slow
def test_reduced_demo_end_to_end(tmp_path, ray_cluster):
    lake, out = tmp_path / "lake", tmp_path / "out"
    args = ["demo", "--lake", str(lake), "--out", str(out), "--population", "6", "--generations", "2",
            "--seconds", "1.5", "--refine", "1", "--workers", "2", "--address", ray_cluster, "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output[-3000:]
    summary = json.loads(res.output[res.output.index("{\n"):])
    fit_id = summary["fit"]
    assert list_fits(lake) == [fit_id]
    rec = load_fit(lake, fit_id)
    assert [u.role for u in rec.runs] == ["train", "train", "holdout"]
    # the default (local) method: LM on cheap windows, then on the full data (then CMA-ES and LM
    # if a gate failed); the fit is the best full-data loss seen
    stages = [h["stage"] for h in rec.history]
    assert stages[0] == "local-cheap" and stages[-1] in ("local-full", "refine") and rec.extra["method"] == "local"
    assert rec.best_loss <= min(h["min"] for h in rec.history if h["stage"] != "local-cheap")
    assert summary["truth"] == load_params(DEMO_PROFILE_PATH).to_vector().tolist()  # shown, not fitted on
    rmse = {k: np.array(v) for k, v in summary["holdout_q_rmse_rad"].items()}
    floor = rmse["truth (noise floor)"]
    assert np.all(floor < 1e-4)  # the truth replays its own recording to the noise level
    assert np.all(rmse["fit"] >= floor * 0.9)
    assert summary["holdout_rmse_ratio_to_floor"] == np.sqrt(np.mean(rmse["fit"] ** 2)) / np.sqrt(np.mean(floor ** 2))
    # the fit carries its error bars; the table says whether each truth lies inside its interval
    truth = dict(zip(PARAM_NAMES, load_params(DEMO_PROFILE_PATH).to_vector().tolist()))
    ident = rec.identifiability
    assert ident is not None and rec.extra["error_bars_s"] > 0
    cover = summary["truth_in_ci95"]
    free = [p for p in ident["parameters"] if p["free"] and p["ci95_low"] is not None]
    assert sorted(cover) == sorted(p["name"] for p in free) and len(cover) == 28
    for p in free:
        c = cover[p["name"]]
        assert (c["low"], c["high"], c["truth"]) == (p["ci95_low"], p["ci95_high"], truth[p["name"]])
        assert c["inside"] == (p["ci95_low"] <= truth[p["name"]] <= p["ci95_high"])
    inside = sum(c["inside"] for c in cover.values())
    assert f"truth inside its 95 % interval for {inside} of 28 parameters" in res.output
    assert res.output.count("±") >= 28 and ("✓" in res.output or "✗" in res.output)
    con = connect(lake)
    runs = con.execute("select run, verdict from runs order by run").fetchall()
    assert [r[0] for r in runs] == ["demo-holdout", "demo-train-1", "demo-train-2"]
    # a second demo on the same lake reuses the (deterministic) recordings and adds a fit
    again = CliRunner().invoke(app, ["demo", "--lake", str(lake), "--out", str(out), "--population", "6",
                                     "--generations", "1", "--seconds", "1.5", "--refine", "0",
                                     "--workers", "2", "--address", ray_cluster])
    assert again.exit_code == 0, again.output[-3000:]
    assert "reusing" in again.output and len(list_fits(lake)) == 2
