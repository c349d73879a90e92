"""The local-first search (`method='local'`, the default of `run_fit`): recovery from the
nominal start, the same bits for a seed whatever the number of workers, resume after a crash
at every stage boundary, and the CMA-ES fallback when a gate fails."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest

from twinlake.catalog import Lake
from twinlake.fit.replay import local_search, stopping
from twinlake.fit.records.extras import ReplayExtras
from twinlake.fit.records.record import load_fit
from twinlake.fit.run import FitSettings, run_fit, work_dir
from twinlake.fit.core.space import parse_space
import synth
from twinlake.sim import PARAM_NAMES

FREE = ("armature_j1", "armature_j2", "mu_viscous_j1", "mu_viscous_j2")


class Crash(Exception):
    pass


def _space(free=FREE) -> dict:
    truth = synth.TRUTH.to_vector()
    specs = [f"{n}={float(truth[i])!r}" for i, n in enumerate(PARAM_NAMES) if n not in free and n != "motor_delay_ms"]
    return parse_space([",".join(specs)]).to_json()


def _settings(**kw) -> FitSettings:
    base = dict(train=["r1", "demo/r2:0"], holdout=["r3"], space=_space(), seed=4, starts=3, cheap_s=0.4,
                population=6, generations=2, refine_iterations=3)
    base.update(kw)
    return FitSettings(**base)


def _same(a, b) -> None:
    assert np.array_equal(a.vector, b.vector) and a.best_loss == b.best_loss
    for key in ("iter", "stage", "min", "mean", "best"):
        assert [h[key] for h in a.history] == [h[key] for h in b.history], key


def test_cheap_windows_spread_over_each_interval():
    from twinlake.fit.core.intervals import IntervalRef

    long, short = IntervalRef("r", "a", 0, 100, 12100), IntervalRef("r", "b", 0, 0, 1500)
    out = local_search.cheap_windows([long, short], cheap_s=2.0)
    assert [(w.run, w.seq_first, w.seq_last) for w in out] == [("a", 3600, 4600), ("a", 7600, 8600), ("b", 0, 1500)]
    pts = local_search.start_points(parse_space([]), 4, seed=1)
    assert pts.shape == (4, 28) and np.all((pts >= 0) & (pts <= 1))
    assert np.array_equal(pts, local_search.start_points(parse_space([]), 4, seed=1))
    assert not np.array_equal(pts[1:], local_search.start_points(parse_space([]), 4, seed=2)[1:])


def test_local_recovers_two_joints_and_the_delay(synth_lake, monkeypatch):
    """The first start ends at 2.17x the cheap windows' floor here: with the cheap gate at 3x it
    is taken as at the floor, the other two starts are not run, and the fit says so."""
    monkeypatch.setattr(local_search, "FLOOR_GATE", 3.0)  # the cheap stage's gate only (gates.py keeps 2x)
    rec = run_fit(synth_lake, _settings(holdout=[]), fit_id="local-recover", workers=0, progress=False)
    assert "start 1 reached the cheap windows' noise floor" in rec.extra["local_gates"]
    assert "the other 2 start(s) not run" in rec.extra["local_gates"]
    truth = synth.TRUTH.to_vector()
    for name in FREE:
        i = PARAM_NAMES.index(name)
        assert abs(rec.vector[i] - truth[i]) <= 0.02 * truth[i], (name, rec.vector[i], truth[i])
    assert rec.params.motor_delay_ms == synth.TRUTH.motor_delay_ms
    stages = [h["stage"] for h in rec.history]
    assert stages[0] == "local-cheap" and "local-full" in stages and "cma" not in stages
    assert rec.extra["method"] == "local" and rec.extra["local_gates"].startswith("accepted")
    assert load_fit(synth_lake, "local-recover").extra["local_gates"] == rec.extra["local_gates"]
    # the record's extras are the replay route's typed columns, in their order, and read back whole
    assert list(rec.extra) == [f.name for f in fields(ReplayExtras)]
    assert ReplayExtras.from_json(load_fit(synth_lake, "local-recover").extra).to_json() == rec.extra


def test_same_bits_across_workers_and_resume_at_each_stage(synth_lake, ray_cluster):
    # in-process against two Ray actors slicing every batch (one actor: tests/fit/test_fit_run.py)
    local = run_fit(synth_lake, _settings(), fit_id="loc-0w", workers=0, progress=False)
    two = run_fit(synth_lake, _settings(), fit_id="loc-2w", workers=2, progress=False)
    _same(local, two)
    assert local.extra["identifiability_json"] == two.extra["identifiability_json"]  # the reused Jacobian too
    for stage in (1, 2):
        def crash(k, pool, stage=stage):
            if k == stage:
                raise Crash

        fid = f"loc-crash-{stage}"
        with pytest.raises(Crash):
            run_fit(synth_lake, _settings(), fit_id=fid, workers=0, progress=False, on_generation=crash)
        assert (work_dir(Lake(synth_lake), fid) / "local-4.pkl").is_file()
        resumed = run_fit(synth_lake, fit_id=fid, resume=True, workers=0, progress=False)
        _same(resumed, local)
        assert resumed.extra["identifiability_json"] == local.extra["identifiability_json"]


def test_a_failed_gate_falls_back_to_cma_from_the_local_point(synth_lake, monkeypatch):
    from twinlake.fit.replay import gates

    monkeypatch.setattr(gates, "FLOOR_GATE", 1e-6)  # no loss passes: the fallback must run
    monkeypatch.setattr(local_search, "FLOOR_GATE", 1e-6)  # nor the cheap stage's floor: every start runs
    rec = run_fit(synth_lake, _settings(holdout=[], generations=6), fit_id="loc-fallback", workers=0, progress=False)
    stages = [h["stage"] for h in rec.history]
    # the local point is the truth's optimum: CMA-ES cannot lower it and stops once that does not pay
    assert stages.index("cma") > stages.index("local-full") and stages.count("cma") == 2
    verdict = rec.extra["local_gates"]
    assert verdict.startswith("fallback to cma: loss")
    assert "stopped after 2 generation(s): the last 2 lowered the loss by 0.00% (< 0.5%)" in verdict
    assert "the local result stands" in verdict and "a model question, not a search question" in verdict
    assert "refine" not in stages  # no polish of a CMA-ES point worse than the local result
    full_best = min(h["best"] for h in rec.history if h["stage"] == "local-full")
    assert rec.best_loss <= full_best
    assert [h["iter"] for h in rec.history] == list(range(1, len(rec.history) + 1))


def test_one_pool_holds_the_cheap_windows_beside_the_full_data(synth_lake, ray_cluster):
    from twinlake.fit.core.objective import build_data
    from twinlake.fit.core.pool import LocalPool, RayPool

    full = build_data(synth_lake, ["r1", "demo/r2:0"])
    cheap = build_data(synth_lake, local_search.cheap_windows(full.refs, 0.4))
    params = np.repeat(synth.TRUTH.to_vector()[None], 5, axis=0)
    params[:, PARAM_NAMES.index("armature_j1")] *= np.linspace(0.8, 1.2, 5)
    pool = RayPool(full, 2, chunk=None, address=ray_cluster, extra={"cheap": cheap})
    try:
        pids = pool.pids()
        view = pool.view("cheap")
        # the same bits as a pool of their own (a 5-row batch is cut into one chunk per worker)
        assert np.array_equal(view.evaluate(params), LocalPool(cheap).evaluate(params))
        assert np.array_equal(view.residuals(params[:2]), LocalPool(cheap).residuals(params[:2]))
        assert np.array_equal(pool.evaluate(params), LocalPool(full).evaluate(params))
        assert view.residuals(params[:1]).shape[1] < pool.residuals(params[:1]).shape[1]  # shorter windows
        assert pool.pids() == pids and view.workers == 2  # no actor was restarted
        with pytest.raises(ValueError, match="no such data set"):
            pool.view("holdout")
    finally:
        pool.close()


def test_local_error_bars_reuse_the_last_full_lm_jacobian(synth_lake):
    from twinlake.fit.trust.identifiability import identifiability_for_fit
    from twinlake.fit.core.objective import build_data
    from twinlake.fit.core.pool import LocalPool

    rec = run_fit(synth_lake, _settings(holdout=[]), fit_id="loc-bars", workers=0, progress=False)
    ident = json.loads(rec.extra["identifiability_json"])
    assert ident["jacobian"].startswith("forward differences of the last full-data LM iteration")
    central = identifiability_for_fit(synth_lake, rec).to_dict()
    assert central["jacobian"] == "central differences at the optimum"
    # the stored error bars add the closed loop's noise (fit/core/loop_noise.py); the
    # measurement-noise part, from the reused Jacobian, is what central differences recompute
    cov = ident["covariance"]
    alone = dict(zip(cov["names"], cov["alternatives"]["hac_without_loop_noise"]["stderr"]))
    loop = dict(zip(cov["names"], ident["loop_noise"]["stderr_loop"]))
    # then each interval is checked against the loss (fit/core/profile_check.py) and widened
    # where the loss rises less than it assumes; the default before that is kept beside it
    check, before = ident["profile_check"], dict(zip(cov["names"], cov["alternatives"]["hac_before_profile_check"]["stderr"]))
    assert check["checked"] == len(FREE) and check["replays"] >= 2 * len(FREE) + 1
    for mine, theirs in zip(ident["parameters"], central["parameters"]):
        assert mine["name"] == theirs["name"] and mine["free"] == theirs["free"]
        if mine["free"] and mine["name"] in FREE:
            name, scale = mine["name"], check["widened"].get(mine["name"], 1.0)
            assert 0.9 < alone[name] / theirs["stderr"] < 1.1, (mine, theirs)
            assert abs(before[name] ** 2 - alone[name] ** 2 - loop[name] ** 2) <= 1e-9 * before[name] ** 2
            assert mine["stderr"] == pytest.approx(scale * before[name], rel=1e-9)
    # the train losses stored per interval are those of the fit, not re-evaluated yet the same bits
    losses = LocalPool(build_data(synth_lake, ["r1", "demo/r2:0"])).evaluate(rec.vector[None])[0]
    assert [u.loss for u in rec.runs if u.role == "train"] == losses.tolist()
    # the full-data LM stopped at the first step gaining less than the tolerance
    full = [h["best"] for h in rec.history if h["stage"] == "local-full"]
    tol = stopping.full_stop(build_data(synth_lake, ["r1", "demo/r2:0"]), len(FREE), None).tight
    assert 1 <= len(full) <= 3
    assert all(b1 <= b0 * (1 - tol) for b0, b1 in zip(full[:-2], full[1:-1]))


def test_start_from_makes_the_given_parameters_the_first_start():
    from twinlake.fit.replay.local_search import start_points
    from twinlake.fit.core.space import ParameterSpace
    from twinlake.sim import DynamicsParams

    space = ParameterSpace()
    given = DynamicsParams.nominal().to_vector()
    given[:7] = [0.3, 0.25, 0.2, 0.18, 0.1, 0.09, 0.05]  # armature
    first = start_points(space, 1, seed=0, first=given)
    assert first.shape == (1, len(space.free_indices))
    assert np.allclose(first[0], space.encode(given[None])[0])
    assert not np.allclose(first[0], start_points(space, 1, seed=0)[0])  # not the nominal start
