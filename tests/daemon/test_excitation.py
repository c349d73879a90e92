"""Excitation plans: envelope, derivatives, tone weights, validation, preflight, preview files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from twinlake.daemon.excitation import (
    PREVIEW_ANCHOR_Q, Q_LOWER, Q_UPPER, Plan, envelope, offsets, preflight, sample_times, validate_plan,
)
from twinlake.daemon.excite_files import REFERENCE_COLUMNS, read_reference_csv
from twinlake.daemon.excite_run import new_output_dir, run_preview


def test_envelope_is_c3_with_zero_ends():
    s = np.linspace(0, 10, 10001)
    w, w1, w2, w3 = envelope(s, 10.0, 2.0)
    assert w[0] == 0 and w[-1] == 0 and np.all(w[(s >= 2) & (s <= 8)] == 1)
    for lower, upper in ((w, w1), (w1, w2), (w2, w3)):
        assert np.allclose(np.gradient(lower, s)[5:-5], upper[5:-5], atol=2e-2 * np.abs(upper).max() + 1e-9)
    assert w1[0] == w2[0] == w3[0] == 0 and w1[-1] == w2[-1] == w3[-1] == 0


@pytest.mark.parametrize("plan", [
    Plan(mode="sine", joints=(2, 5), seconds=6, ramp=1.5, hold=0.5, gap=0.5, f0=0.4),
    Plan(mode="chirp", joints=(1,), seconds=8, ramp=2, f0=0.2, f1=0.9),
    Plan(mode="multisine", joints=(1, 3, 7), seconds=8, ramp=2, tones=(0.1, 0.3, 0.7), seed=4),
])
def test_derivatives_match_finite_differences(plan):
    t = np.linspace(0, plan.total_s, 200001)
    off = offsets(plan, t)
    dt = t[1] - t[0]
    for k in range(3):
        fd = np.gradient(off[k], dt, axis=0)
        scale = np.abs(off[k + 1]).max()
        assert np.abs(fd[2:-2] - off[k + 1][2:-2]).max() < 1e-3 * scale + 1e-9
    # zero at the segment boundaries and outside segments
    assert np.all(off[:, 0] == 0) and np.all(off[:, -1] == 0)


def test_sequential_segments_move_one_joint_at_a_time():
    plan = Plan(mode="sine", joints=(2, 5), seconds=6, ramp=1.5, hold=0.5, gap=0.5, f0=0.4)
    t = sample_times(plan, 1000)
    off = offsets(plan, t)[0]
    first = (t > 0.5) & (t < 6.5)
    assert np.abs(off[first, 1]).max() > 0 and np.all(off[first, 4] == 0)
    assert np.all(off[t > 6.5, 1] == 0) and np.abs(off[t > 7.0, 4]).max() > 0
    assert plan.total_s == 2 * 0.5 + 2 * 6 + 0.5


def test_multisine_weights_bound_the_peak_and_seed_fixes_phases():
    plan = Plan(mode="multisine", joints=tuple(range(1, 8)), seconds=30, ramp=5, amplitude_deg=2.0,
                tones=(0.1, 0.23, 0.41), seed=3)
    off = offsets(plan, sample_times(plan, 1000))[0]
    assert np.abs(off).max() <= math.radians(2.0) + 1e-12
    assert np.array_equal(off, offsets(plan, sample_times(plan, 1000))[0])
    other = offsets(Plan(**{**plan.to_dict(), "joints": plan.joints, "tones": plan.tones, "seed": 4}),
                    sample_times(plan, 1000))[0]
    assert not np.allclose(off, other)


@pytest.mark.parametrize("changes, match", [
    ({"mode": "square"}, "--mode"), ({"joints": (1, 1)}, "--joints"), ({"joints": (8,)}, "--joints"),
    ({"amplitude_deg": 0}, "--amplitude-deg"), ({"ramp": 11}, "--ramp 11 s needs --seconds ≥ 22"),
    ({"hold": -1}, "--hold"), ({"seconds": 700, "ramp": 5}, "total"), ({"f0": 0}, "--f0"),
    ({"f1": 0.05}, "--f0/--f1"), ({"tones": ()}, "--tones"), ({"rate": 5}, "--rate: expected 10..200 Hz"),
    ({"rate": 10, "ramp": 0.4, "seconds": 20}, "--ramp 0.4 s at --rate 10 Hz"),
    ({"mode": "sine", "f0": 4.0, "f1": 5.0}, "highest frequency"), ({"max_jerk": 0}, "--max-jerk"),
    ({"amplitude_deg": float("nan")}, "finite"), ({"seed": -1}, "--seed"),
])
def test_bad_plans_are_rejected(changes, match):
    with pytest.raises(ValueError, match=match):
        validate_plan(Plan(**changes))


def test_preflight_checks_range_and_peaks():
    plan = Plan(mode="sine", joints=(4,), amplitude_deg=5.0, max_velocity=1.0, max_acceleration=5, max_jerk=50)
    q0 = PREVIEW_ANCHOR_Q.copy()
    q0[3] = Q_UPPER[3] - 0.05
    with pytest.raises(ValueError, match="repulsion"):
        preflight(plan, q0)
    q0[3] = Q_LOWER[3] + 0.05
    with pytest.raises(ValueError, match="repulsion"):
        preflight(plan, q0)
    with pytest.raises(ValueError, match="reference velocity peak"):
        preflight(Plan(mode="sine", amplitude_deg=10.0, f0=0.5), PREVIEW_ANCHOR_Q)
    peaks = preflight(Plan(), PREVIEW_ANCHOR_Q)
    assert peaks["offset_rad"][0] == pytest.approx(math.radians(1.0), rel=1e-3) and peaks["offset_rad"][1] == 0


def test_preview_writes_three_files_once(tmp_path):
    plan = Plan(mode="multisine", joints=(1, 2, 3, 4, 5, 6, 7), seconds=10, ramp=2, hold=1, rate=50)
    out = new_output_dir(str(tmp_path / "prev"))
    meta = run_preview(plan, out, robot_id="left")
    assert sorted(p.name for p in out.iterdir()) == ["metadata.json", "preview.svg", "reference.csv"]
    t, q = read_reference_csv(out / "reference.csv")
    assert len(t) == math.ceil(plan.total_s * plan.rate) + 1 and t[-1] == plan.total_s
    assert np.allclose(q[0], PREVIEW_ANCHOR_Q) and np.allclose(q[-1], PREVIEW_ANCHOR_Q)
    header = (out / "reference.csv").read_text().splitlines()[0].split(",")
    assert header == REFERENCE_COLUMNS and len(header) == 29
    saved = json.loads((out / "metadata.json").read_text())
    assert saved == meta and saved["status"] == "preview" and saved["anchor_source"] == "illustrative_only"
    assert saved["sysid_ready"] is False and saved["robot_id"] == "left" and saved["plan"]["mode"] == "multisine"
    svg = (out / "preview.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 4 * 7
    with pytest.raises(FileExistsError):
        new_output_dir(str(out))
    with pytest.raises(FileExistsError):
        run_preview(plan, out)
