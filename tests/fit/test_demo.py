"""`twinlake demo`, reduced (short runs, small population, few generations) end to end: the
offline recorder, ingest, interval selection, a fit on the session's Ray cluster, the truth
table and the held-out RMSE against the noise floor."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.cli import app
from twinlake.fit.record import list_fits, load_fit
from twinlake.sim import DEMO_PROFILE_PATH, load_params


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
    assert rec.history[-1]["stage"] == "refine" and rec.best_loss < rec.history[0]["min"]
    assert summary["truth"] == load_params(DEMO_PROFILE_PATH).to_vector().tolist()  # shown, not fitted on
    rmse = {k: np.array(v) for k, v in summary["holdout_q_rmse_rad"].items()}
    floor = rmse["truth (noise floor)"]
    assert np.all(floor < 1e-4)  # the truth replays its own recording to the noise level
    assert np.all(rmse["fit"] >= floor * 0.9)
    assert summary["holdout_rmse_ratio_to_floor"] == np.sqrt(np.mean(rmse["fit"] ** 2)) / np.sqrt(np.mean(floor ** 2))
    con = connect(lake)
    runs = con.execute("select run, verdict from runs order by run").fetchall()
    assert [r[0] for r in runs] == ["demo-holdout", "demo-train-1", "demo-train-2"]
    # a second demo on the same lake reuses the (deterministic) recordings and adds a fit
    again = CliRunner().invoke(app, ["demo", "--lake", str(lake), "--out", str(out), "--population", "6",
                                     "--generations", "1", "--seconds", "1.5", "--refine", "0",
                                     "--workers", "2", "--address", ray_cluster])
    assert again.exit_code == 0, again.output[-3000:]
    assert "reusing" in again.output and len(list_fits(lake)) == 2
