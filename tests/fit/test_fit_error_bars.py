"""Error bars and seeds wired into `fit run` / `fit show`: error bars stored with every fit,
`--seeds N` (best seed is the fit, the others give the spread, resumable per seed), `fit show`
with intervals, flags, condition number, seeds and the held-out runs the fit passed; and the
CLI start-up not importing the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from twinlake.catalog import Lake, connect
from twinlake.cli import app
from twinlake.fit.trust.identifiability import identifiability_for_fit
from twinlake.fit.records.record import load_fit
from twinlake.fit.run import FitSettings, run_fit, work_dir
from twinlake.fit.core.space import parse_space
from twinlake.sim import PARAM_NAMES


class Crash(Exception):
    pass


def _settings(**kw) -> FitSettings:
    base = dict(train=["r1", "demo/r2:0"], holdout=["r3"], space=parse_space(["dynamic_ratio=0.6"]).to_json(),
                population=6, generations=2, seed=21, max_duration_s=0.3, seeds=2, method="cma")
    base.update(kw)
    return FitSettings(**base)


def test_seeds_error_bars_and_resume_between_seeds(synth_lake, ray_cluster):
    calls = []

    def crash_in_second_seed(gen, pool):
        calls.append(gen)
        if len(calls) == 3:  # generation 1 of seed 22, after seed 21 finished
            raise Crash

    with pytest.raises(Crash):
        run_fit(synth_lake, _settings(), fit_id="seeds-crash", workers=0, progress=False,
                on_generation=crash_in_second_seed)
    wd = work_dir(Lake(synth_lake), "seeds-crash")
    assert (wd / "seed-21.pkl").is_file() and not Lake(synth_lake).fit_dir("seeds-crash").exists()
    resumed = run_fit(synth_lake, fit_id="seeds-crash", resume=True, workers=2, address=ray_cluster, progress=False)
    straight = run_fit(synth_lake, _settings(), fit_id="seeds-straight", workers=0, progress=False)
    single = run_fit(synth_lake, _settings(seed=22, seeds=1), fit_id="seed-22-alone", workers=0, progress=False)

    # the resumed fit (Ray) is the uninterrupted one (in-process), error bars included
    assert np.array_equal(resumed.vector, straight.vector) and resumed.best_loss == straight.best_loss
    assert resumed.extra["identifiability_json"] == straight.extra["identifiability_json"]
    # seeds s, s+1 on the same data: seed 22's result is a plain fit with seed 22
    rec = load_fit(synth_lake, "seeds-crash")
    assert [s.seed for s in rec.seeds] == [21, 22] and sum(s.chosen for s in rec.seeds) == 1
    s22 = rec.seeds[1]
    assert np.array_equal(s22.vector, single.vector) and s22.best_loss == single.best_loss
    chosen = next(s for s in rec.seeds if s.chosen)
    assert chosen.best_loss == min(s.best_loss for s in rec.seeds) == rec.best_loss
    assert rec.seed == chosen.seed and np.array_equal(rec.vector, chosen.vector)
    assert rec.extra["seed_count"] == 2

    # stored error bars == identifiability_for_fit on the stored record, bit for bit
    again = identifiability_for_fit(synth_lake, rec, rec.other_seeds)
    assert rec.extra["identifiability_json"] == again.to_json()
    ident = rec.identifiability
    assert ident["seeds"] == 2 and ident["condition_number"] > 1
    cov = ident["covariance"]  # the HAC sandwich over the training intervals, full matrix stored
    assert cov["method"] == "hac_bartlett_andrews" and cov["bandwidth_ticks"] >= 1 and len(cov["names"]) == 21
    se = {p["name"]: p["stderr"] for p in ident["parameters"]}
    assert np.allclose(np.sqrt(np.diag(np.array(cov["matrix"]))), [se[n] for n in cov["names"]])
    free = [p for p in ident["parameters"] if p["free"]]
    assert len(free) == 21  # 29 minus 7 frozen dynamic ratios minus the discrete delay
    for p in free:
        i = PARAM_NAMES.index(p["name"])
        vals = [s.vector[i] for s in rec.seeds]
        assert p["seed_min"] == min(vals) and p["seed_max"] == max(vals)
        assert p["ci95_low"] < p["value"] < p["ci95_high"]
        spread = max(vals) - min(vals) > 0.1 * (p["upper_bound"] - p["lower_bound"])
        assert ("seed_spread" in p["flags"]) == spread
    # a single-seed fit has error bars but no spread
    assert single.identifiability["seeds"] == 0 and len(single.seeds) == 1

    con = connect(synth_lake)
    rows = con.execute("select seed, chosen, best_loss from fit_seeds where fit = 'seeds-crash' order by seed").fetchall()
    assert rows == [(s.seed, s.chosen, s.best_loss) for s in rec.seeds]
    stored = con.execute("select identifiability_json, seed_count from fits where fit = 'seeds-crash'").fetchone()
    assert stored == (rec.extra["identifiability_json"], 2)


def test_fit_run_seeds_then_show_with_error_bars_and_validations(synth_lake, ray_cluster):
    runner = CliRunner()
    lake = str(synth_lake)
    res = runner.invoke(app, ["fit", "run", "--lake", lake, "--train", "r1", "--holdout", "r3", "--params",
                              "dynamic_ratio=0.6,armature=0.2", "--population", "4", "--generations", "1",
                              "--seeds", "2", "--seed", "3", "--max-seconds", "0.3", "--refine", "0",
                              "--workers", "2", "--address", ray_cluster, "--id", "cli-seeds", "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    ran = json.loads(res.output[res.output.index("{\n"):])
    assert [s["seed"] for s in ran["seeds"]] == [3, 4] and ran["identifiability"]["seeds"] == 2

    def show() -> dict:
        out = runner.invoke(app, ["fit", "show", "cli-seeds", "--lake", lake, "--json"])
        assert out.exit_code == 0, out.output[-2000:]
        return json.loads(out.output)

    assert show()["validations"] == []
    # this 1-generation fit is far from its noise floor: only the declared q RMSE limit is checked here
    ok = runner.invoke(app, ["fit", "validate", "cli-seeds", "--runs", "r3", "--max-q-rmse-rad", "1.0",
                             "--max-floor-ratio", "0", "--lake", lake])
    assert ok.exit_code == 0, ok.output[-2000:]
    shown = show()
    assert [(v["run"], v["passed"], v["fitted_verdict"]) for v in shown["validations"]] == [("r3", True, "pass")]
    params = {p["name"]: p for p in shown["identifiability"]["parameters"]}
    assert not params["armature_j1"]["free"] and params["mu_viscous_j1"]["free"]
    assert shown["identifiability"] == ran["identifiability"]

    text = runner.invoke(app, ["fit", "show", "cli-seeds", "--lake", lake])
    assert text.exit_code == 0, text.output[-2000:]
    for words in ("95 % interval", "condition number", "parameter status: ", "2 seeds", "range over seeds",
                  "covariance: sandwich", "strongly correlated pairs (|ρ| ≥ 0.9)", "weakest direction",
                  "q RMSE fitted [mrad]", "motor_delay_ms",
                  "passed 1 of 1 held-out run(s): demo/r3"):
        assert words in text.output, words
    # a later, stricter validation of the same run supersedes: the fit no longer passes it
    strict = runner.invoke(app, ["fit", "validate", "cli-seeds", "--runs", "r3", "--max-q-rmse-rad", "1e-9",
                                 "--lake", lake])
    assert strict.exit_code == 1, strict.output[-2000:]  # the fitted parameters failed: non-zero exit
    assert "q RMSE (all joints)" in strict.output and "× the noise floor > 3×" in strict.output
    assert [(v["passed"], v["fitted_verdict"]) for v in show()["validations"]] == [(False, "fail")]
    assert "passed 0 of 1" in runner.invoke(app, ["fit", "show", "cli-seeds", "--lake", lake]).output


def test_cli_start_up_does_not_import_heavy_libraries():
    code = ("import sys, twinlake.cli; heavy = [m for m in ('cma', 'scipy', 'ray', 'matplotlib', 'pandera') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    import twinlake.fit as fit  # the public face still resolves, on first use

    assert fit.run_fit is run_fit and "FitSettings" in dir(fit)
