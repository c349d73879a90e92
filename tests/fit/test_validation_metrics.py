"""FrankaTwin-compatible metrics.json (its `compare_sim_real`) against hand-computed values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from twinlake.fit.trust.metrics import Trajectory, align_to_real_time, compute_metrics, dumps, metrics_document

TOP_KEYS = ["schema_version", "created_utc", "real_csv", "sim_csv", "real_sidecar", "sim_sidecar", "sysid_params",
            "num_samples", "duration_s", "ee", "joints", "tracking", "out_dir", "metrics_path"]
JOINT_KEYS = ["pos_rmse_rad", "pos_max_abs_rad", "pos_rmse_all_rad", "pos_mse_all_rad2", "pos_rmse_pct_of_motion",
              "real_motion_range_rad", "vel_rmse_rad_s", "vel_rmse_all_rad_s"]


def _zquat(angles):
    a = np.asarray(angles, dtype=float)
    return np.column_stack([np.zeros_like(a), np.zeros_like(a), np.sin(a / 2), np.cos(a / 2)])


def _pair():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    x_real = np.zeros((4, 3))
    x_sim = np.zeros((4, 3))
    x_sim[0] = [3.0, 4.0, 0.0]
    quat_real = _zquat([0, 0, 0, 0])
    quat_sim = _zquat([0, 0.2, 0, -0.4])
    quat_sim[1] *= -1  # the sign of a quaternion must not matter
    q_real = np.zeros((4, 7))
    q_real[:, 0] = [0, 1, 2, 3]
    q_sim = q_real.copy()
    q_sim[:, 0] += [1, -1, 1, -1]
    dq_real = np.zeros((4, 7))
    dq_sim = dq_real.copy()
    dq_sim[:, 1] = 2.0
    real = Trajectory(t, x_real, quat_real, q_real, dq_real)
    sim = Trajectory(t.copy(), x_sim, quat_sim, q_sim, dq_sim)
    des = np.tile([0.0, 0.0, 1.0], (4, 1))
    return real, sim, des, quat_real


def test_hand_computed_values():
    real, sim, des, des_quat = _pair()
    m = compute_metrics(real, sim, des, des_quat)
    assert m["num_samples"] == 4 and m["duration_s"] == 3.0
    pos = m["ee"]["pos"]
    assert pos["rmse_m"] == pytest.approx({"x": 1.5, "y": 2.0, "z": 0.0, "3d": 2.5})
    assert pos["max_abs_m"] == pytest.approx({"x": 3.0, "y": 4.0, "z": 0.0, "3d": 5.0})
    assert m["ee"]["ori"]["rmse_rad"] == pytest.approx(math.sqrt(0.05))
    assert m["ee"]["ori"]["max_rad"] == pytest.approx(0.4)
    j = m["joints"]
    assert list(j) == JOINT_KEYS
    assert j["pos_rmse_rad"] == pytest.approx([1, 0, 0, 0, 0, 0, 0])
    assert j["pos_max_abs_rad"] == pytest.approx([1, 0, 0, 0, 0, 0, 0])
    assert j["pos_rmse_all_rad"] == pytest.approx(math.sqrt(1 / 7))
    assert j["pos_mse_all_rad2"] == pytest.approx(1 / 7)
    assert j["pos_rmse_pct_of_motion"] == pytest.approx([100 / 3, 0, 0, 0, 0, 0, 0])
    assert j["real_motion_range_rad"] == pytest.approx([3, 0, 0, 0, 0, 0, 0])
    assert j["vel_rmse_rad_s"] == pytest.approx([0, 2, 0, 0, 0, 0, 0])
    assert j["vel_rmse_all_rad_s"] == pytest.approx(math.sqrt(16 / 28))
    tr = m["tracking"]
    assert tr["real"]["pos"]["rmse_m"] == pytest.approx({"x": 0, "y": 0, "z": 1, "3d": 1})
    assert tr["sim"]["pos"]["rmse_m"]["x"] == pytest.approx(1.5)  # des − x_sim = −3 at row 0
    assert tr["sim"]["pos"]["rmse_m"]["3d"] == pytest.approx(math.sqrt((9 + 16 + 1 + 3) / 4))
    assert tr["real"]["ori"] == pytest.approx({"rmse_rad": 0.0, "max_rad": 0.0})
    assert tr["sim"]["ori"]["max_rad"] == pytest.approx(0.4)


def test_document_has_the_exact_key_order_and_strict_json():
    real, sim, des, des_quat = _pair()
    doc = metrics_document(compute_metrics(real, sim, des, des_quat), created_utc="2026-01-01T00:00:00+00:00",
                           real_csv="real.csv", extra={"sysid_params": {"a": 1}})
    assert list(doc) == TOP_KEYS
    assert list(doc["ee"]) == ["pos", "ori"] and list(doc["ee"]["pos"]) == ["rmse_m", "max_abs_m"]
    assert list(doc["ee"]["pos"]["rmse_m"]) == ["x", "y", "z", "3d"]
    assert list(doc["tracking"]) == ["real", "sim"] and list(doc["tracking"]["sim"]) == ["pos", "ori"]
    text = dumps(doc)
    assert list(json.loads(text)) == TOP_KEYS
    assert dumps(doc) == text  # deterministic
    with pytest.raises(ValueError, match="collides"):
        metrics_document(doc, created_utc="x", extra={"ee": 1})


def test_time_alignment_rule():
    t_real = np.array([0.0, 1.0, 2.0, 3.0])
    same = align_to_real_time(t_real, t_real + 5e-5, np.array([5.0, 6.0, 7.0, 8.0]))
    assert same.tolist() == [5.0, 6.0, 7.0, 8.0]  # within 1e-4 s: used as is
    interp = align_to_real_time(t_real, np.array([0.0, 2.0]), np.array([[0.0, 10.0], [2.0, 30.0]]))
    assert interp.tolist() == [[0.0, 10.0], [1.0, 20.0], [2.0, 30.0], [2.0, 30.0]]  # clamped at the end


def test_missing_signals_give_null_blocks_and_nan_becomes_null():
    t = np.arange(3.0)
    q = np.zeros((3, 7))
    q_sim = q.copy()
    q_sim[1, 3] = np.nan
    m = compute_metrics(Trajectory(t, q_rad=q), Trajectory(t, q_rad=q_sim))
    assert m["ee"] is None and m["tracking"] is None
    assert m["joints"]["pos_rmse_rad"][3] is None and m["joints"]["pos_rmse_rad"][0] == 0.0
    assert "vel_rmse_rad_s" not in m["joints"]
    json.loads(dumps(metrics_document(m, created_utc="x")))
    with pytest.raises(ValueError, match="no samples"):
        compute_metrics(Trajectory(np.zeros(0)), Trajectory(np.zeros(0)))
