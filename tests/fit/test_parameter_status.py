"""The one parameter-status rule (fit/core/parameter_status.py) and its invariant where a fit's
summary is built (fit/reports/show.fit_summary): a two-sided interval only for an estimated
parameter."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from twinlake.fit.records.record import FitRecord
from twinlake.fit.reports.show import fit_summary
from twinlake.fit.core.space import ParameterSpace
from twinlake.fit.core.parameter_status import (
    AT_BOUND_FRACTION,
    ParameterStatus,
    Status,
    bound_side,
    classify,
    count,
)
from twinlake.sim import LAYOUT, DynamicsParams


def test_an_identified_parameter_inside_its_bounds_is_estimated_with_its_interval():
    st = classify("mu_static_j7", 0.4799, 0.0, 2.0, stderr=0.004)
    assert st.status is Status.ESTIMATED
    assert st.interval == pytest.approx((0.4799 - 1.96 * 0.004, 0.4799 + 1.96 * 0.004), rel=1e-4)
    assert st.display() == "0.4799 [0.4721, 0.4877]"
    near = classify("mu_viscous_j2", 2.6995, 0.0, 4.0, stderr=0.00077)  # the value to the interval's decimals
    assert near.display() == "2.6995 [2.6980, 2.7010]"


@pytest.mark.parametrize("stderr", [math.inf, math.nan, 0.0, None, 0.6])
def test_a_missing_non_finite_zero_or_absurd_standard_error_is_not_identified(stderr):
    st = classify("armature_j7", 0.074, 0.0, 2.0, stderr=stderr)  # 0.6·1.96 > half of the range 2
    assert st.status is Status.NOT_IDENTIFIED and st.interval is None
    assert st.display() == "not identified (0.074)"


def test_the_fits_own_unidentified_reason_wins_over_a_narrow_interval():
    st = classify("armature_j1", 0.309, 0.0, 0.6, stderr=0.0013, unidentified="in a weak direction")
    assert st.status is Status.NOT_IDENTIFIED and st.interval is None and "weak direction" in st.reason


def test_at_a_bound_by_the_one_tolerance_or_by_the_unconstrained_value():
    span = 2.0
    inside = classify("mu_viscous_j3", 2 * AT_BOUND_FRACTION * span, 0.0, span, stderr=0.01)
    edge = classify("mu_viscous_j3", 0.5 * AT_BOUND_FRACTION * span, 0.0, span, stderr=0.01)
    beyond = classify("mu_viscous_j3", 0.5, 0.0, 0.5, stderr=0.01, unconstrained_value=0.61)
    assert inside.status is Status.ESTIMATED
    assert edge.status is Status.AT_BOUND and edge.interval is None and edge.display() == "≥ 0"
    assert beyond.status is Status.AT_BOUND and beyond.side == "upper"
    assert beyond.display() == "≤ 0.5 (unconstrained 0.61)" and "0.61" in beyond.reason
    assert bound_side(1.0, 1.0, 1.0) is None  # a zero-width range is no bound hit


def test_held_at_a_prior_and_frozen_carry_their_value_and_no_interval():
    held = classify("armature_j7", 0.074, 0.0, 2.0, stderr=0.0, prior=0.074)
    fixed = classify("dynamic_ratio_j1", 1.0, 0.0, 1.0, free=False, stderr=0.01)
    assert held.status is Status.HELD_AT_PRIOR and held.prior == 0.074 and held.display() == "held at 0.074 (prior)"
    assert fixed.status is Status.FIXED and fixed.interval is None and fixed.display() == "1 (fixed)"
    assert count([held, fixed]) == {"estimated": 0, "at_bound": 0, "not_identified": 0, "held_at_prior": 1,
                                    "fixed": 1}


def test_the_status_refuses_an_interval_unless_estimated_and_round_trips_through_json():
    with pytest.raises(ValueError, match="only for an estimated parameter"):
        ParameterStatus("x", Status.AT_BOUND, 0.0, 0.0, 1.0, 0.1, (0.0, 0.2), None, None, "")
    st = classify("x", 0.5, 0.0, 1.0, stderr=0.01)
    assert ParameterStatus.from_dict(json.loads(json.dumps(st.to_dict()))) == st


def _ident_entry(name, value, lo, hi, se, flags=()):
    ci = (None, None) if se is None else (value - 1.96 * se, value + 1.96 * se)
    return {"name": name, "value": value, "free": True, "stderr": se, "ci95_low": ci[0], "ci95_high": ci[1],
            "lower_bound": lo, "upper_bound": hi, "seed_min": None, "seed_max": None, "flags": list(flags)}


def test_the_fit_summary_shows_an_interval_only_for_estimated_parameters():
    """Built where `fit show --json`, `fit report` and the exports read it: an at-bound, a
    flagged and a non-finite parameter lose their stored intervals; estimated ones keep them."""
    space = ParameterSpace()
    vec = DynamicsParams.nominal().to_vector()
    vec[LAYOUT.index("motor_delay_ms")] = 2  # inside its bounds 0..4
    names = list(LAYOUT.names)
    free = set(space.free_names)
    entries = []
    for i, n in enumerate(names):
        lo, hi = (float(b) for b in space.bounds[i])
        if n not in free or i in LAYOUT.integer_indices:
            entries.append({**_ident_entry(n, float(vec[i]), lo, hi, None), "free": False})
        else:
            entries.append(_ident_entry(n, float(vec[i]), lo, hi, 1e-4 * (hi - lo)))
    hit = names.index("mu_viscous_j2")
    vec[hit] = space.bounds[hit, 0]
    entries[hit] = _ident_entry("mu_viscous_j2", float(vec[hit]), *map(float, space.bounds[hit]), 1e-3)
    entries[names.index("armature_j1")]["flags"] = ["unidentifiable"]
    entries[names.index("armature_j6")]["stderr"] = None  # stored inf
    rec = FitRecord(fit_id="f", fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00", status="done",
                    best_loss=1.0, params=DynamicsParams.from_vector(vec), seed=0,
                    settings={"space": space.to_json()},
                    extra={"identifiability_json": json.dumps({"parameters": entries})})
    summary = json.loads(json.dumps(fit_summary(rec)))
    status = {p["name"]: p["status"] for p in summary["parameter_status"]}
    assert status["mu_viscous_j2"] == "at_bound" and status["armature_j1"] == "not_identified"
    assert status["armature_j6"] == "not_identified" and status["mu_static_j3"] == "estimated"
    assert status["motor_delay_ms"] == "estimated" and status["payload_mass"] == "fixed"
    for p in summary["identifiability"]["parameters"]:
        has_interval = p["ci95_low"] is not None
        assert has_interval == (p["status"] == "estimated" and p["name"] != "motor_delay_ms"), p["name"]
    for p in summary["parameter_status"]:
        assert (p["interval"] is not None) <= (p["status"] == "estimated")
    assert np.isfinite([p["value"] for p in summary["parameter_status"]]).all()
