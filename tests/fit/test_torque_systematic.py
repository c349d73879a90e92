"""The torque route's systematic (rest-rule) error bar (fit/torque/estimation/systematic.py): on planted
equations it is large when the rows a variant drops carry a bias and small when they carry only
noise; end to end it is non-zero under the Stribeck law, zero under tanh, and the stated
covariance stays symmetric positive semi-definite and no narrower than the HAC one."""

from __future__ import annotations

import json

import numpy as np
import pytest

import torque_runs
from twinlake.fit.torque import TorqueFitSettings, fit_torque
from twinlake.fit.torque.model.equations import SegmentEquations
from twinlake.fit.torque.model.soft_friction import REST_VARIANTS
from twinlake.fit.torque.estimation.systematic import rest_systematic
from twinlake.sim import PARAM_NAMES


def _planted(bias: float, seed: int = 0, ticks: int = 4000):
    """One segment, one armature-like column per joint (true β = 1), the variant dropping the
    rows whose 'speed' is below 0.3; those rows' slope is 1 + bias. Returns (eqs, targets)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(ticks, 7))
    speed = np.abs(rng.normal(size=(ticks, 7)))
    slow = speed < 0.3
    y = x * (1.0 + bias * slow) + 0.1 * rng.normal(size=(ticks, 7))
    rows = np.ones((ticks, 7), dtype=bool)
    eq = SegmentEquations(R=np.zeros((ticks, 7, 0)), L=x[:, :, None], known=np.zeros((ticks, 7)),
                          tau=np.zeros((ticks, 7)), tau_raw=np.zeros((ticks, 7)), rows=rows,
                          seq=np.arange(ticks), index=np.arange(ticks), variant_rows=(~slow,))
    return [eq], [y]


def _systematic(eqs, y):
    weights = np.ones(7)
    x, t = eqs[0].L[:, :, 0], y[0]
    normal = np.diag((x * x).sum(0))
    beta_hat = (x * t).sum(0) / (x * x).sum(0)
    return rest_systematic(eqs, weights, y, np.zeros((7, 7)), np.zeros(7), beta_hat, normal, lag=1), normal


def test_a_bias_in_the_dropped_rows_is_systematic_and_noise_alone_is_not():
    eqs, y = _planted(bias=0.3)
    biased, normal = _systematic(eqs, y)
    hac_se = 0.1 / np.sqrt(np.diag(normal))  # the noise's own standard error of β̂
    assert biased.names == ["creep margin x2/3"]  # the first of soft_friction.REST_VARIANTS
    assert np.all(biased.shift[0] < 0)  # dropping the steeper rows lowers the slope
    assert np.all(biased.stderr > 10 * hac_se)  # the shift is far beyond its sampling noise
    assert np.all(np.abs(biased.excess) <= np.abs(biased.shift))
    noise_only = [_systematic(*_planted(bias=0.0, seed=s))[0] for s in range(5)]
    share = np.mean([np.mean(n.stderr == 0.0) for n in noise_only])
    assert share > 0.5  # most noise-only shifts lie within their own sampling spread: no systematic
    assert max(np.max(n.stderr / hac_se) for n in noise_only) < 3.0
    for s in [biased, *noise_only]:
        assert np.allclose(s.cov, s.cov.T) and np.linalg.eigvalsh(s.cov).min() >= -1e-12 * max(1.0, s.cov.max())


@pytest.fixture(scope="module")
def stribeck_lake(tmp_path_factory):
    """Two 6 s runs of the twin under torque_runs.DEFAULT_TRUTH (Stribeck, delay 2 ms)."""
    lake, _, _ = torque_runs.twin_runs(tmp_path_factory.mktemp("sy"), "def", ("a", "b"), family="default", seconds=6.0)
    return lake


def _bars(rec) -> tuple[dict, dict]:
    torque = json.loads(rec.extra["torque_json"])
    return torque, {b["name"]: b for b in torque["beta"]}


def test_stribeck_bars_carry_a_systematic_part_and_tanh_bars_none(stribeck_lake):
    rec = fit_torque(stribeck_lake, TorqueFitSettings(train=["def/a", "def/b"]), fit_id="sy-s", publish=False)
    torque, beta = _bars(rec)
    assert [v["name"] for v in torque["systematic"]["variants"]] == [v.name for v in REST_VARIANTS]
    assert len(REST_VARIANTS) == 3
    assert any(b["stderr_systematic"] > 0 for b in beta.values())
    for b in beta.values():  # stated² = HAC² + systematic²: never narrower than the HAC bar
        assert b["stderr"] == pytest.approx(np.hypot(b["stderr_hac"], b["stderr_systematic"]), rel=1e-9)
    assert "systematic component" in rec.identifiability["error_bar_note"]
    names, cov = rec.covariance  # the stated covariance of the twin's parameters, stored whole
    stated = {e["name"]: e["stderr"] for e in rec.identifiability["parameters"] if e["free"]}
    assert names == list(stated) and np.allclose(np.sqrt(np.diag(cov)), [stated[n] for n in names], rtol=1e-9)
    assert np.allclose(cov, cov.T) and np.linalg.eigvalsh(cov).min() >= -1e-9 * np.abs(cov).max()
    wide = [e["name"] for e in rec.identifiability["parameters"]  # the replay fit's rule: 95 % half-width > half the box
            if e["free"] and 1.96 * e["stderr"] > 0.5 * (e["upper_bound"] - e["lower_bound"])]
    flagged = [e["name"] for e in rec.identifiability["parameters"] if "unidentifiable" in e["flags"]]
    assert wide == flagged == []  # the rest rule keeps the slow sliding after each breakaway: every level is determined
    levels = [e for e in rec.identifiability["parameters"] if e["name"].startswith(("mu_static", "dynamic_ratio"))]
    assert len(levels) == 14 and all(e["stderr"] < 0.1 * abs(rec.vector[PARAM_NAMES.index(e["name"])]) for e in levels)
    assert torque["rest_rule"]["margin"] == 1.5 and 1 <= torque["rest_rule"]["passes"] <= 4
    tanh = fit_torque(stribeck_lake, TorqueFitSettings(train=["def/a", "def/b"], friction_law="tanh"), fit_id="sy-t",
                      publish=False)
    torque_t, beta_t = _bars(tanh)
    assert torque_t["systematic"]["variants"] == [] and all(b["stderr_systematic"] == 0 for b in beta_t.values())
    assert all(b["stderr"] == b["stderr_hac"] for b in beta_t.values())
    assert "no systematic component" in tanh.identifiability["error_bar_note"]


def test_velocity_noise_matches_the_filtered_noise_it_models():
    """σ from the recorded-minus-filtered dq, and q̈'s noise variance v = σ² f_s² Σ(Δh)², against
    white noise pushed through the route's own filter and forward difference."""
    from twinlake.fit.torque.inputs.derivatives import lowpass
    from twinlake.fit.torque.estimation.noise_bias import filter_autocorrelation, velocity_noise

    rng = np.random.default_rng(3)
    sigma = np.array([1e-3, 2e-3, 5e-4, 1e-3, 1e-3, 3e-3, 1e-3])
    noise = rng.normal(size=(60000, 7)) * sigma
    cutoff = 40.0
    filtered = lowpass(noise, cutoff)
    eq = SegmentEquations(R=np.zeros((1, 7, 0)), L=np.zeros((1, 7, 1)), known=np.zeros((1, 7)), tau=np.zeros((1, 7)),
                          tau_raw=np.zeros((1, 7)), rows=np.ones((1, 7), bool), seq=np.zeros(1), index=np.zeros(1, int),
                          dq_residual=noise - filtered, cutoff_hz=cutoff)
    found = velocity_noise([eq], np.full(7, 20.0), delay_ticks=2)
    assert found.sigma_rad_s == pytest.approx(sigma, rel=0.03)
    ddq = np.diff(filtered, axis=0)[1000:-1000] * 1000.0
    assert found.ddq_var == pytest.approx(ddq.var(axis=0), rel=0.06)
    lagged = (ddq[2:] * filtered[1000:-1001][:-2]).mean(axis=0)  # E[ν(k)·n_f(k − 2)]
    assert -found.feedback == pytest.approx(lagged, rel=0.15)
    corr, _ = filter_autocorrelation(cutoff, 3)
    assert np.all(np.diff(corr) < 0)  # a low-pass: R falls with the lag


def test_the_armature_correction_is_recorded_and_raises_the_armature(stribeck_lake):
    rec = fit_torque(stribeck_lake, TorqueFitSettings(train=["def/a", "def/b"]), fit_id="sy-n", publish=False)
    noise = json.loads(rec.extra["torque_json"])["noise_bias"]
    assert noise["damping_nms_rad"] == [50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0]  # the recorder's D_joint
    assert np.allclose(noise["dq_noise_sd_rad_s"], 5e-4, rtol=0.25)  # the recorder's dq noise
    shifts = [noise["shift"][f"armature_j{j}"] for j in range(1, 8)]
    assert all(0 < s < 0.01 for s in shifts)  # dilution pulls the armature down; the correction lifts it
    assert all(noise["shift"][n] == pytest.approx(0.0, abs=1e-3) for n in noise["shift"] if n.startswith("mu_viscous"))
