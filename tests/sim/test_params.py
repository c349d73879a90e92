import json

import numpy as np
import pytest

from twinlake.sim import (
    DEFAULT_BOUNDS,
    DEMO_PROFILE_PATH,
    PARAM_NAMES,
    DynamicsParams,
    load_params,
    save_profile,
    to_frankatwin_decoded,
)


def _distinct() -> DynamicsParams:
    return DynamicsParams(
        armature=np.linspace(0.1, 0.4, 7), mu_static=np.linspace(0.5, 1.7, 7),
        dynamic_ratio=np.linspace(0.3, 0.9, 7), mu_viscous=np.linspace(0.2, 3.0, 7), motor_delay_ms=3,
    )


def test_vector_layout_round_trips_in_frankatwin_order():
    p = _distinct()
    v = p.to_vector()
    # FrankaTwin's 29 first, then the groups beyond FrankaTwin's vector: payload (7), asymmetry, bias,
    # the sigmoid law's φ2, φ3, the delay offsets, the link mass scales and load friction (7 each)
    assert v.shape == (85,) and len(PARAM_NAMES) == 85 and DEFAULT_BOUNDS.shape == (85, 2)
    assert PARAM_NAMES[71] == "link_mass_scale_j1" and PARAM_NAMES[78] == "coulomb_load_per_nm_j1"
    assert PARAM_NAMES[29:36] == ("payload_mass", "payload_com_x", "payload_com_y", "payload_com_z",
                                  "payload_ixx", "payload_iyy", "payload_izz")
    assert PARAM_NAMES[36] == "coulomb_asymmetry_j1" and PARAM_NAMES[43] == "tau_bias_j1"
    assert np.array_equal(DynamicsParams.from_vector(v[:29]).to_vector(), v)  # FrankaTwin's (29,) is accepted
    assert PARAM_NAMES[0] == "armature_j1" and PARAM_NAMES[7] == "mu_static_j1"
    assert PARAM_NAMES[14] == "dynamic_ratio_j1" and PARAM_NAMES[21] == "mu_viscous_j1"
    assert PARAM_NAMES[28] == "motor_delay_ms"
    np.testing.assert_array_equal(v[7:14], p.mu_static)
    back = DynamicsParams.from_vector(v)
    np.testing.assert_array_equal(back.to_vector(), v)
    np.testing.assert_allclose(back.mu_dynamic, p.dynamic_ratio * p.mu_static)


def test_delay_is_rounded_and_clamped_like_frankatwin():
    v = _distinct().to_vector()
    for raw, expected in ((2.4, 2), (2.6, 3), (-1.0, 0), (9.0, 4)):
        v[28] = raw
        assert DynamicsParams.from_vector(v).motor_delay_ms == expected


def test_nominal_is_inside_default_bounds_and_demo_profile_differs():
    nominal = DynamicsParams.nominal().to_vector()
    assert np.all(nominal >= DEFAULT_BOUNDS[:, 0]) and np.all(nominal <= DEFAULT_BOUNDS[:, 1])
    demo = load_params(DEMO_PROFILE_PATH)
    assert demo.motor_delay_ms == 2
    assert np.all(demo.to_vector() >= DEFAULT_BOUNDS[:, 0]) and np.all(demo.to_vector() <= DEFAULT_BOUNDS[:, 1])
    assert not np.allclose(demo.to_vector(), nominal)


def test_profile_round_trip_is_deterministic(tmp_path):
    p = _distinct()
    a = save_profile(p, tmp_path / "a.json", fit_id="f1", seed=3)
    b = save_profile(p, tmp_path / "b.json", fit_id="f1", seed=3)
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["schema"] == "twinlake.profile/v1" and doc["provenance"] == {"fit_id": "f1", "seed": 3}
    np.testing.assert_array_equal(load_params(a).to_vector(), p.to_vector())


def test_reads_frankatwin_sysid_best_params(tmp_path):
    decoded = to_frankatwin_decoded(_distinct())
    assert set(decoded) == {"armature", "mu_static", "dynamic_ratio", "mu_dynamic", "mu_viscous", "motor_delay_steps"}
    path = tmp_path / "sysid_best_params.json"
    path.write_text(json.dumps({"best_score": 0.1, "best_params_raw": [0.5] * 29, "best_params_decoded": decoded}))
    np.testing.assert_allclose(load_params(path).to_vector(), _distinct().to_vector())
    # FrankaTwin 0.3.0 published fit (FrankaTwin 0.3.0's docs), given as mu_dynamic only
    published = {"armature": [0.425, 0.281, 0.185, 0.189, 0.182, 0.159, 0.106],
                 "mu_static": [1.13, 1.04, 1.58, 1.74, 1.17, 1.38, 1.02],
                 "mu_dynamic": [0.59, 0.65, 1.00, 1.20, 0.75, 0.41, 0.44],
                 "mu_viscous": [2.73, 3.27, 0.76, 2.23, 1.09, 0.05, 0.50], "motor_delay_steps": 3}
    path.write_text(json.dumps({"best_params_decoded": published}))
    loaded = load_params(path)
    np.testing.assert_allclose(loaded.mu_dynamic, published["mu_dynamic"])
    assert loaded.motor_delay_ms == 3


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "line 1: not valid JSON"),
        ("[1, 2, 3]", "expected a JSON object, found a JSON list"),
        (b"\xff\xfe{}", "parameter file is not UTF-8 text"),
        ('{"schema": "twinlake.profile/v1", "params": {"armature": [1, 2]}}', "missing field"),
        ('{"best_params_decoded": {"armature": [1,2,3], "mu_static": [1,1,1,1,1,1,1], "dynamic_ratio": [1,1,1,1,1,1,1],'
         ' "mu_viscous": [1,1,1,1,1,1,1], "motor_delay_steps": 1}}', "armature: expected 7 values"),
        ('{"something": 1}', "expected schema"),
    ],
)
def test_bad_parameter_files_name_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        load_params(path)
    assert str(path) in str(info.value)


def test_a_missing_or_directory_parameter_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="missing.json: parameter file not found"):
        load_params(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="parameter file is a directory, expected a file"):
        load_params(tmp_path)
