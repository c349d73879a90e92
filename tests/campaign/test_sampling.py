"""Parameter draws: seeded per episode, inside the bounds, following the fit's stored error
bars and delay probabilities; declared ranges checked against the bounds; the randomisation
export describes exactly the distribution the campaign draws from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from campaign_inputs import FIT_ID, make_fit
from twinlake.campaign.sampling import declared, parse_ranges, posterior, truncated_normal_ppf
from twinlake.fit.reports.export import export_fit, randomization_doc
from twinlake.fit.records.record import load_fit
from twinlake.sim import LAYOUT


def test_draws_are_seeded_per_episode_and_inside_the_bounds(lake):
    dist = posterior(randomization_doc(load_fit(lake, FIT_ID)))
    a = dist.draw(7, 3)
    assert np.array_equal(a, dist.draw(7, 3))  # same (seed, index): same vector
    assert not np.array_equal(a, dist.draw(7, 4)) and not np.array_equal(a, dist.draw(8, 3))
    many = np.stack([dist.draw(7, i) for i in range(300)])
    assert (many >= LAYOUT.bounds[:, 0]).all() and (many <= LAYOUT.bounds[:, 1]).all()


def test_truncated_normal_quantile_matches_scipys_reference_in_both_tails():
    from scipy import stats

    grid = [(-np.inf, np.inf), (-1.0, 2.0), (3.0, 9.0), (-40.0, -35.0), (8.0, np.inf), (-np.inf, -6.0), (0.0, 1e-9)]
    for a, b in grid:
        for u in (0.0, 1e-9, 0.25, 0.5, 0.9, 1 - 1e-9):
            ref, got = stats.truncnorm.ppf(u, a, b), truncated_normal_ppf(u, a, b)
            assert a <= got <= b and got == pytest.approx(ref, rel=1e-9, abs=1e-12), (a, b, u, got, ref)


def test_posterior_follows_the_stored_errors_and_delay_probabilities(lake):
    rec = load_fit(lake, FIT_ID)
    doc = randomization_doc(rec)
    dist = posterior(doc)
    many = np.stack([dist.draw(1, i) for i in range(400)])
    entry = next(p for p in doc["parameters"] if p["name"] == "mu_viscous_j2")
    assert entry["distribution"] == "truncated_normal" and entry["std"] > 0
    col = many[:, LAYOUT.index("mu_viscous_j2")]
    assert abs(col.mean() - entry["value"]) < 0.3 * entry["std"]
    assert 0.8 < col.std() / entry["std"] < 1.2
    delay = many[:, LAYOUT.index("motor_delay_ms")]
    freq = np.bincount(delay.astype(int), minlength=5) / len(delay)
    assert np.allclose(freq, [0.1, 0.6, 0.3, 0.0, 0.0], atol=0.07)  # the fixture's delay_probs


def test_the_exported_json_gives_the_same_draws(lake, tmp_path):
    rec = load_fit(lake, FIT_ID)
    path = export_fit(rec, "randomization", tmp_path / "r.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "twinlake.randomization/v1" and doc["delay"]["probabilities"] == [0.1, 0.6, 0.3, 0.0, 0.0]
    assert [p["name"] for p in doc["parameters"]] == [n for n in LAYOUT.names if n != "motor_delay_ms"]
    assert np.array_equal(posterior(doc).draw(3, 11), posterior(randomization_doc(rec)).draw(3, 11))


def test_a_fit_without_error_bars_has_no_posterior(tmp_path):
    make_fit(tmp_path / "lake", "bare", with_errors=False)
    with pytest.raises(ValueError, match="fit bare: no stored error bars"):
        randomization_doc(load_fit(tmp_path / "lake", "bare"))


def test_declared_ranges_uniform_inside_and_checked_against_bounds(lake):
    center = load_fit(lake, FIT_ID).vector
    dist = declared(parse_ranges("mu_static=0.5:1.5;delay=0:2"), center)
    many = np.stack([dist.draw(0, i) for i in range(200)])
    mu = LAYOUT.take(many, "mu_static")
    assert mu.min() >= 0.5 and mu.max() <= 1.5 and mu.std() > 0.2
    assert set(np.unique(LAYOUT.take(many, "motor_delay_ms"))) == {0.0, 1.0, 2.0}
    assert np.array_equal(LAYOUT.take(many, "armature"), np.tile(LAYOUT.take(center, "armature"), (200, 1)))
    with pytest.raises(ValueError, match=r"armature_j1=0:0.9: outside the parameter's bounds \[0, 0.5\]"):
        declared(parse_ranges("armature_j1=0:0.9"), center)
    with pytest.raises(ValueError, match="expected SELECTOR=LOW:HIGH"):
        parse_ranges("mu_static=0.5")


def test_posterior_samples_reproduce_the_stored_covariance(tmp_path):
    """A fit whose Jacobian couples mu_static_j1 and dynamic_ratio_j1 (as friction levels do):
    the stored covariance holds the pair strongly correlated, the export says joint_normal, and
    2000 campaign draws reproduce the strongest pair's correlation within 0.05."""
    from twinlake.fit.core.covariance import correlation

    rec = make_fit(tmp_path / "lake", "coupled", couple=("mu_static_j1", "dynamic_ratio_j1"))
    cov = rec.identifiability["covariance"]
    rho = correlation(np.array(cov["matrix"], dtype=float))
    np.fill_diagonal(rho, 0.0)
    i, j = np.unravel_index(np.nanargmax(np.abs(rho)), rho.shape)
    assert {cov["names"][i], cov["names"][j]} == {"mu_static_j1", "dynamic_ratio_j1"} and abs(rho[i, j]) >= 0.9
    doc = randomization_doc(rec)
    assert doc["correlation"] == "joint_normal" and "independent" not in json.dumps(doc)
    draws = np.stack([posterior(doc).draw(7, k) for k in range(2000)])
    a, b = LAYOUT.index(cov["names"][i]), LAYOUT.index(cov["names"][j])
    assert abs(np.corrcoef(draws[:, a], draws[:, b])[0, 1] - rho[i, j]) < 0.05
    lo, hi = LAYOUT.bounds[:, 0], LAYOUT.bounds[:, 1]
    assert np.all((draws >= lo) & (draws <= hi))
    assert set(np.unique(draws[:, LAYOUT.index("motor_delay_ms")])) <= set(range(5))  # the delay: categorical


def test_an_older_fit_without_a_covariance_stays_independent(lake):
    rec = load_fit(lake, FIT_ID)
    ident = rec.identifiability
    ident.pop("covariance")
    rec.extra["identifiability_json"] = json.dumps(ident)
    doc = randomization_doc(rec)
    assert doc["correlation"] == "independent" and posterior(doc).joint is None
