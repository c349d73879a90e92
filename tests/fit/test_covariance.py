"""The correlation-robust covariance (fit/core/covariance.py): the Bartlett window-sum identity, the
residual layout of the replay, calibration on a least-squares problem with AR(1) errors where
the iid Gauss–Newton intervals are too narrow, and the stored full covariance."""

from __future__ import annotations

import json

import numpy as np
from scipy import stats

from twinlake.fit.core import covariance as cv
from twinlake.fit.trust.identifiability import analyse
from twinlake.sim import LAYOUT


def _ar1(rng, shape, rho):
    e = rng.standard_normal(shape)
    for t in range(1, shape[0]):
        e[t] += rho * e[t - 1]
    return e


def test_window_sums_are_the_bartlett_lag_sum():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((50, 3))
    for L in (1, 4, 17):
        direct = sum((1 - abs(l) / L) * (g[max(l, 0):50 + min(l, 0)].T @ g[max(-l, 0):50 - max(l, 0)])
                     for l in range(-L + 1, L))
        assert np.allclose(cv.bartlett_long_run([g], L), direct)


def test_replay_layout_adds_the_position_and_velocity_rows_of_one_tick():
    rng = np.random.default_rng(2)
    ticks = [5, 3]
    segs = cv.replay_segments(ticks)
    m = sum(2 * 7 * t for t in ticks)
    jac, r = rng.standard_normal((m, 2)), rng.standard_normal(m)
    scores = cv.tick_scores(jac, r, segs)
    assert [s.shape for s in scores] == [(5, 2), (3, 2)]
    q_rows = slice(7 * 1, 7 * 2)  # tick 1 of interval 0: its positions, then its velocities
    dq_rows = slice(35 + 7, 35 + 14)
    expect = (jac[q_rows] * r[q_rows, None]).sum(0) + (jac[dq_rows] * r[dq_rows, None]).sum(0)
    assert np.allclose(scores[0][1], expect)


def test_hac_intervals_cover_under_ar1_errors_where_iid_ones_do_not():
    """y = Xθ + e, smooth regressors and AR(1) errors (ρ 0.9), 300 replicates: the HAC 95 %
    intervals cover about 95 %, the iid Gauss–Newton ones far less."""
    rng = np.random.default_rng(3)
    t, k, reps = 1500, 2, 300
    cover = {cv.HAC: 0, cv.IID: 0, cv.BLOCK_BOOTSTRAP: 0}
    for _ in range(reps):
        x = _ar1(rng, (t, k), 0.9)
        e = _ar1(rng, (t,), 0.9)
        theta = np.linalg.lstsq(x, e, rcond=None)[0]  # truth 0
        resid = e - x @ theta
        for method in cover:
            est = cv.estimate(x, resid, [cv.Segment(0, t, 1)], method)
            cover[method] += int(np.all(np.abs(theta) <= est.t95 * est.stderr))
    per_param = {m: (c / reps) for m, c in cover.items()}  # both parameters inside (nominal 90 %)
    assert per_param[cv.HAC] >= 0.80 and per_param[cv.BLOCK_BOOTSTRAP] >= 0.80, per_param
    assert per_param[cv.IID] < 0.6, per_param


def test_a_fit_stores_its_full_covariance_in_units_and_names_a_coupled_pair():
    rng = np.random.default_rng(4)
    free = [LAYOUT.index(n) for n in ("armature_j1", "mu_viscous_j1", "mu_viscous_j2")]
    ticks = 400
    jac = rng.standard_normal((2 * 7 * ticks, 3))
    ranges = LAYOUT.bounds[free, 1] - LAYOUT.bounds[free, 0]
    jac[:, 1] = (jac[:, 0] + 0.1 * jac[:, 1]) * ranges[0] / ranges[1]  # range-scaled: nearly equal
    r0 = 0.01 * rng.standard_normal(2 * 7 * ticks)
    x = np.array(LAYOUT.nominal, dtype=float)
    ident = analyse(LAYOUT.names, x, jac, r0, free, LAYOUT.bounds[:, 0], LAYOUT.bounds[:, 1],
                    segments=cv.replay_segments([ticks])).to_dict()
    cov = json.loads(json.dumps(ident))["covariance"]
    assert cov["method"] == cv.HAC and cov["names"] == ["armature_j1", "mu_viscous_j1", "mu_viscous_j2"]
    by_name = {p["name"]: p for p in ident["parameters"]}
    se = np.sqrt(np.diag(np.array(cov["matrix"])))
    assert np.allclose(se, [by_name[n]["stderr"] for n in cov["names"]])
    t95 = float(stats.t.ppf(0.975, cov["dof"]))
    assert np.isclose(by_name["armature_j1"]["ci95_high"] - x[free[0]], t95 * se[0])
    pairs = cv.strong_pairs(cov)
    assert [(a, b) for a, b, _ in pairs] == [("armature_j1", "mu_viscous_j1")] and pairs[0][2] < -0.9
    assert set(cov["alternatives"]) == {cv.IID, cv.BLOCK_BOOTSTRAP, "hac_bartlett_2x"}
    assert ident["weakest_directions"] and set(ident["weakest_directions"][0]["components"]) >= {"armature_j1"}
    assert "sandwich" in cv.method_line(cov) and "independent" in cv.method_line(None)


def test_fit_record_reads_the_covariance_and_older_fits_without_one(tmp_path):
    from twinlake.fit.records.record import FitRecord, load_fit, publish_fit
    from twinlake.sim import DynamicsParams

    free = [LAYOUT.index("armature_j1"), LAYOUT.index("mu_viscous_j1")]
    rng = np.random.default_rng(6)
    ident = analyse(LAYOUT.names, np.array(LAYOUT.nominal, float), rng.standard_normal((2 * 7 * 50, 2)),
                    rng.standard_normal(2 * 7 * 50), free, LAYOUT.bounds[:, 0], LAYOUT.bounds[:, 1],
                    segments=cv.replay_segments([50]))
    old = ident.to_dict()
    old.pop("covariance")
    for fit_id, doc in (("new", ident.to_dict()), ("old", old)):
        publish_fit(tmp_path, FitRecord(fit_id=fit_id, fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00",
                                        status="ok", best_loss=1.0, params=DynamicsParams.nominal(), seed=0,
                                        settings={}, extra={"identifiability_json": json.dumps(doc)}))
    names, matrix = load_fit(tmp_path, "new").covariance
    assert names == ["armature_j1", "mu_viscous_j1"] and np.allclose(matrix, ident.covariance)
    assert load_fit(tmp_path, "old").covariance is None
