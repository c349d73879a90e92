"""Parameter space: freezing and re-bounding from specs, the normalised encoding, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinlake.fit.core.space import ParameterSpace, parse_space, select
from twinlake.fit.core.parameter_status import AT_BOUND_FRACTION
from twinlake.sim import DEFAULT_BOUNDS, LAYOUT, PARAM_NAMES

DELAY_INDEX = LAYOUT.index("motor_delay_ms")


def test_default_space_is_frankatwins_29_with_five_delays():
    space = parse_space([])
    assert np.array_equal(space.bounds, DEFAULT_BOUNDS)
    assert len(space.free_indices) == 28
    assert space.delay_choices.tolist() == [0, 1, 2, 3, 4]
    assert space.free_names[-1] == "motor_delay_ms"


def test_freeze_group_rebound_joint_and_delay_range():
    space = parse_space(["dynamic_ratio=1,armature=0:0.6", "mu_viscous_j3=0.5:2", "delay=1:3"])
    names = [PARAM_NAMES[i] for i in space.free_indices]
    assert not any(n.startswith("dynamic_ratio") for n in names)
    assert space.bounds[PARAM_NAMES.index("armature_j5")].tolist() == [0.0, 0.6]
    assert space.bounds[PARAM_NAMES.index("mu_viscous_j3")].tolist() == [0.5, 2.0]
    assert space.bounds[PARAM_NAMES.index("mu_viscous_j2")].tolist() == [0.0, 5.0]
    assert space.delay_choices.tolist() == [1, 2, 3]
    full = space.decode(np.full((2, len(names)), 0.5), np.array([1, 3]))
    assert np.all(full[:, 14:21] == 1.0)
    assert full[:, DELAY_INDEX].tolist() == [1.0, 3.0]


def test_joint_selector_and_frozen_delay(tmp_path):
    spec = tmp_path / "space.json"
    spec.write_text(json.dumps({"mu_static": [0.1, 2.0], "j7": 0.2, "motor_delay_ms": 3}))
    space = parse_space([str(spec)])
    assert all(not PARAM_NAMES[i].endswith("_j7") for i in space.free_indices)
    assert space.delay_choices.tolist() == [3]
    assert space.bounds[PARAM_NAMES.index("mu_static_j1")].tolist() == [0.1, 2.0]
    assert "motor_delay_ms" not in space.free_names
    # items apply in order: a later re-bound frees a parameter frozen before
    later = parse_space([str(spec), "mu_static_j7=0:1"])
    assert PARAM_NAMES.index("mu_static_j7") in later.free_indices


@pytest.mark.parametrize(
    "spec, words",
    [
        ("armatur=0:1", "unknown parameter selector 'armatur'"),
        ("armature=1:0", "lo <= hi"),
        ("armature", "NAME=VALUE"),
        ("armature=a:b", "expected numbers"),
        ("delay=2.5", "whole number of ms"),
    ],
)
def test_bad_specs_name_the_item(spec, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        parse_space([spec])


def test_bad_json_spec_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  'x': 1}")
    with pytest.raises(ValueError, match=r"bad.json: line 2"):
        parse_space([str(bad)])


def test_select_groups_and_joints():
    assert len(select("mu_static")) == 7
    assert [PARAM_NAMES[i] for i in select("j2")] == [f"{g}_j2" for g in ("armature", "mu_static", "dynamic_ratio", "mu_viscous")]
    assert select("delay") == [DELAY_INDEX]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=28, max_size=28), st.integers(0, 4))
def test_encode_inverts_decode(z, delay):
    space = ParameterSpace()
    full = space.decode(np.array([z]), np.array([delay]))
    assert np.allclose(space.encode(full), np.array([z]), atol=1e-12)
    tol = AT_BOUND_FRACTION  # the one at-bound tolerance (fit/core/parameter_status.py)
    assert space.at_bounds(full[0]) == [PARAM_NAMES[i] for i in space.free_indices
                                         if z[list(space.free_indices).index(i)] <= tol
                                         or z[list(space.free_indices).index(i)] >= 1 - tol]


def test_the_payload_groups_are_frozen_unless_freed_by_spec_or_preset():
    from twinlake.sim import LAYOUT

    default = parse_space([])
    assert all(n not in default.free_names for n in LAYOUT.names[29:])
    assert len(default.free_names) == 29  # FrankaTwin's 29 (28 continuous + the delay)
    mass = LAYOUT.index("payload_mass")
    spec = parse_space(["payload_mass=0:2.5"])
    assert "payload_mass" in spec.free_names and spec.bounds[mass].tolist() == [0.0, 2.5]
    preset = parse_space(["+payload"])
    assert preset.free_names[-5:-1] == ["payload_mass", "payload_com_x", "payload_com_y", "payload_com_z"]
    assert "payload_ixx" not in preset.free_names
    assert parse_space(["+payload", "payload_com=0"]).free_names[-2:] == ["payload_mass", "motor_delay_ms"]
    with pytest.raises(ValueError, match="unknown preset '\\+paylod': expected one of \\+payload"):
        parse_space(["+paylod"])
    # a space stored before the payload groups existed reads back with them frozen at nominal
    old = default.to_json()
    old = {"bounds": {n: b for n, b in old["bounds"].items() if LAYOUT.index(n) < 29}, "frozen": {}}
    assert ParameterSpace.from_json(old).frozen == default.frozen


def test_the_asymmetry_and_bias_presets_free_their_groups_only():
    from twinlake.sim import LAYOUT

    assert parse_space(["+bias"]).free_names[-8:-1] == list(LAYOUT.group("tau_bias").names)
    assert parse_space(["+asymmetry"]).free_names[-8:-1] == list(LAYOUT.group("coulomb_asymmetry").names)
    assert parse_space(["j3=0.2"]).frozen[LAYOUT.index("tau_bias_j3")] == 0.0  # a joint selector leaves them
