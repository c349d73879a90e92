"""The torque route off the multisine shape: a real payload run's shape (rest, one move, a long
standstill with a ringing tool, sensor offsets; tests/plant/payload_run.py) on the measured
route, estimates inside their bounds with nothing non-finite or denormal stored, a fit worse
than nominal on its own training rows failing its adequacy line, the signal-meaning check on a
gravity-compensated and a sign-flipped tau_J, and the delay scan's minimum at its bound."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import synth
import torque_runs
from twinlake.catalog import connect
from twinlake.catalog.selection import run_frames
from twinlake.cli import app
from twinlake.fit.records.record import load_fit
from twinlake.fit.trust.statuses import fit_statuses
from twinlake.fit.torque import TorqueFitSettings, fit_torque
from twinlake.fit.torque.scores.findings import DELAY_CHI2_95
from twinlake.fit.torque.model.regressor import RigidBodyModel
from twinlake.fit.core.parameter_status import Status

STIFF = dict(friction_law="stribeck", coulomb_neg_nm=(0.90, 1.00, 0.75, 0.80, 0.45, 0.35, 0.22), dynamic_ratio=(0.6,) * 7)


@pytest.fixture(scope="module")
def tool_lake(tmp_path_factory):
    """Two payload runs (a, b) of the plant carrying its ringing 0.33 kg tool."""
    return torque_runs.payload_runs(tmp_path_factory.mktemp("tool"), "tool", ("a", "b"))


@pytest.fixture(scope="module")
def plant_lake(tmp_path_factory):
    """Two 6 s multisine runs (a, b) of the plant (its 1.2 kg payload), and the same runs
    through the libfranka-style PC logger as mapped logs (robot `panda`)."""
    root = tmp_path_factory.mktemp("plant")
    lake, truth = torque_runs.plant_runs(root, "plant", ("a", "b"), seconds=6.0)
    torque_runs.pc_log_copies(root, lake, "panda", ("a", "b"), "plant")
    return lake, truth


@pytest.fixture(scope="module")
def tool_fit(tool_lake):
    lake, _ = tool_lake
    return fit_torque(lake, TorqueFitSettings(train=["tool/a"], holdout=["tool/b"], torque="measured"), fit_id="tool-m")


def _frames(lake: Path, robot: str, run: str) -> dict[str, np.ndarray]:
    con = connect(lake)
    try:
        table = run_frames(con, robot, run)
    finally:
        con.close()
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def _numbers(value, path="$"):
    """Every float in a JSON-like value, with where it is."""
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")


def test_payload_run_identifies_the_tool_from_standstill_and_predicts_a_second_run(tool_lake, tool_fit):
    lake, truth = tool_lake
    torque = json.loads(tool_fit.extra["torque_json"])
    assert torque["friction_law"] == "stribeck" and torque["rest_rule"] is None  # link side: standstill rows are data
    assert torque["standstill"]["rows"] > 0.7 * torque["rows"]  # mostly standstill, every row used
    payload = torque["payload"]
    assert payload["mass_kg"] == pytest.approx(truth.payload_mass_kg, rel=0.10)
    entries = {e["name"]: e for e in tool_fit.identifiability["parameters"]}
    determined = [a for a in "xyz" if "unidentifiable" not in entries[f"payload_com_{a}"]["flags"]
                  and entries[f"payload_com_{a}"]["prior"] is None]
    assert determined, "the move turns the flange by 40°: the poses determine the CoM"
    for i, axis in enumerate("xyz"):
        if axis in determined:
            assert abs(payload["com_m"][i] - truth.payload_com_m[i]) < 0.02, axis
    fitted, nominal = torque["holdout"], torque["nominal_holdout"]
    for j in range(7):
        if nominal["rmse_raw_nm"][j] > 2 * nominal["floor_nm"][j]:
            assert fitted["rmse_raw_nm"][j] < nominal["rmse_raw_nm"][j], j
        else:
            assert fitted["rmse_raw_nm"][j] <= 1.05 * nominal["rmse_raw_nm"][j], j
    torque_lines = [(t, ok) for t, ok in torque["adequacy_lines"] if not t.startswith("held-out replay")]
    assert all(ok is not False for _, ok in torque_lines), torque_lines
    # replayed, the twin with these link-side parameters does not move as the plant did (the motor side's
    # friction and rotor inertia are not in tau_J): said, not hidden
    assert [r["passed"] for r in torque["holdout_replay"]] == [False]


def test_one_pose_leaves_the_payload_flagged_not_estimated(tmp_path):
    """At one pose the payload's gravity torques are collinear with the sensor offsets."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plant import HOME_Q, payload_run_reference, record, tool_plant
    from twinlake.synthetic import SyntheticRecording, ingest, multisine_run

    (tmp_path / "x").mkdir()
    ref = payload_run_reference(tmp_path / "x" / "reference.csv", HOME_Q, HOME_Q, rest_after_s=5.0)
    record(ref, tmp_path / "x" / "x.csv", plant=tool_plant(ring_start_s=1.0), tail_s=0.0, settle_s=1.0)
    ingest(tmp_path / "lake", [SyntheticRecording(multisine_run("x", (0.3,), seed=1, seconds=1.0, amplitude_deg=0.0),
                                                  tmp_path / "x" / "x.csv", None)], "st")
    rec = fit_torque(tmp_path / "lake", TorqueFitSettings(train=["st/x"], torque="measured"), fit_id="still")
    status = {s.name: s for s in fit_statuses(rec)}
    for name in ("payload_mass", "payload_com_x", "payload_com_y", "payload_com_z"):
        assert status[name].status in (Status.NOT_IDENTIFIED, Status.HELD_AT_PRIOR), (name, status[name])


def test_every_torque_estimate_is_inside_its_bounds_and_nothing_stored_is_denormal(tool_lake, tool_fit, tmp_path):
    lake, _ = tool_lake
    fit_torque(lake, TorqueFitSettings(train=["tool/a"], torque="commanded", params=["+payload", "+bias", "+asymmetry"]),
               fit_id="tool-c")
    for fit_id in ("tool-m", "tool-c"):
        res = CliRunner().invoke(app, ["fit", "show", fit_id, "--lake", str(lake), "--json"])
        assert res.exit_code == 0, res.output
        shown = json.loads(res.output)
        shown["torque_json"] = json.loads(shown["torque_json"])
        for where, x in _numbers(shown):
            assert math.isfinite(x) and (x == 0 or abs(x) >= np.finfo(float).tiny), (fit_id, where, x)
        for st in shown["parameter_status"]:
            assert st["lower"] <= st["value"] <= st["upper"], (fit_id, st)
            if st["unconstrained_value"] is not None and not st["lower"] <= st["unconstrained_value"] <= st["upper"]:
                assert st["status"] in ("at_bound", "not_identified", "held_at_prior"), (fit_id, st)
    rec = load_fit(lake, "tool-c")
    beyond = [s for s in fit_statuses(rec) if s.status is Status.AT_BOUND]
    assert all(("≥" if s.side == "lower" else "≤") in s.display() for s in beyond)


def test_the_delay_scan_minimum_at_its_bound_is_said(tool_lake, tool_fit):
    lake, _ = tool_lake
    rec = fit_torque(lake, TorqueFitSettings(train=["tool/a"], torque="commanded", params=["+payload"]), fit_id="tool-d")
    torque = json.loads(rec.extra["torque_json"])
    scan = {int(k): v for k, v in torque["delay_scan"].items()}
    best = min(scan, key=scan.get)
    assert best in (0, max(scan))  # a mostly-standstill run: the scan's minimum at its end (4 ms)
    assert torque["delay_at_bound"] and f"at {best} ms" in torque["delay_at_bound"]
    trend = "still falling" if scan[best] < scan[best + (1 if best == 0 else -1)] else "flat"
    assert trend in torque["delay_at_bound"]
    shown = CliRunner().invoke(app, ["fit", "show", "tool-d", "--lake", str(lake)])
    assert "minimum is at its bound" in shown.output and trend in shown.output
    status = {s.name: s for s in fit_statuses(rec)}
    rise = scan[best + (1 if best == 0 else -1)] - scan[best]  # unresolved beats at a bound (parameter_status)
    assert status["motor_delay_ms"].status is (Status.NOT_IDENTIFIED if rise < DELAY_CHI2_95 else Status.AT_BOUND), rise


def test_a_fit_worse_than_nominal_on_its_training_rows_fails_and_says_why(tmp_path):
    """A mostly-standstill run of an arm with stiction and no payload, fitted on the commanded
    route under the rest rule: the few moving rows leave payload, bias and asymmetry free."""
    lake, _ = torque_runs.payload_runs(tmp_path, "np", ("a",), payload_mass_kg=0.0, ring_torque_nm=0.0, **STIFF)
    rec = fit_torque(lake, TorqueFitSettings(train=["np/a"], torque="commanded",
                                             params=["+payload", "+bias", "+asymmetry"]), fit_id="worse")
    torque = json.loads(rec.extra["torque_json"])
    nominal_rms = np.sqrt(np.mean((np.array(torque["nominal_train"]["rmse_raw_nm"])
                                   / np.array(torque["nominal_train"]["floor_nm"])) ** 2))
    fitted_rms = np.sqrt(np.mean((np.array(torque["train"]["rmse_raw_nm"]) / np.array(torque["train"]["floor_nm"])) ** 2))
    assert fitted_rms > nominal_rms  # the failure is real
    line = [(t, ok) for t, ok in torque["adequacy_lines"] if "every finite row (" in t][0]
    assert line[1] is False and "WORSE than the nominal model" in line[0]
    assert "too few informative rows" in line[0] and "rest rule" in line[0]


def test_signal_check_names_a_gravity_compensated_and_a_sign_flipped_tau_j(plant_lake):
    lake, truth = plant_lake
    frames = _frames(lake, "plant", "a")
    q = np.column_stack([frames[f"q{j}"] for j in range(1, 8)])
    rigid = RigidBodyModel.load()  # the robot's gravity model with its load configured: links and payload
    g = rigid.gravity_torque(q, rigid.payload_theta(truth.payload_mass_kg, truth.payload_com_m, np.zeros(3)))
    keep = ("seq", "t_s")
    base = {k: v for k, v in frames.items() if k in keep or k[:-1] in ("q", "dq")}
    compensated = base | {f"tau_J{j}": frames[f"tau_J{j}"] - g[:, j - 1] for j in range(1, 8)}
    flipped = base | {f"tau_J{j}": frames[f"tau_J{j}"] * (-1 if j == 4 else 1) for j in range(1, 8)}
    synth.publish_run(lake, "plant", "compensated", compensated)
    synth.publish_run(lake, "plant", "flipped", flipped)
    synth.publish_run(lake, "plant", "as-commanded", base | {f"tau_cmd{j}": frames[f"tau_J{j}"] for j in range(1, 8)})
    checks = {}
    for run, signal in (("a", "measured"), ("compensated", "measured"), ("flipped", "measured"),
                        ("as-commanded", "commanded")):
        rec = fit_torque(lake, TorqueFitSettings(train=[f"plant/{run}"], torque=signal, friction_law="tanh"),
                         fit_id=f"sig-{run}")
        checks[run] = json.loads(rec.extra["torque_json"])["signal_check"]
    assert "map it as tau_measured" in " ".join(checks["as-commanded"]["findings"]), checks["as-commanded"]
    assert checks["a"]["ok"], checks["a"]
    assert not checks["compensated"]["ok"] and "map it as tau_commanded" in " ".join(checks["compensated"]["findings"])
    assert not checks["flipped"]["ok"]
    assert any("the sign of J4 looks inverted" in f for f in checks["flipped"]["findings"]), checks["flipped"]
    assert not any("J2 looks inverted" in f for f in checks["flipped"]["findings"])
    shown = CliRunner().invoke(app, ["fit", "show", "sig-flipped", "--lake", str(lake)])
    assert "the sign of J4 looks inverted" in shown.output


def test_a_torque_fit_replays_its_holdout_and_fails_when_the_motion_is_not_explained(plant_lake):
    """The measured route explains the plant's link-side torques but knows nothing of the motor
    side (its friction, the rotor inertia): replayed, the held-out run's motion is far off."""
    lake, _ = plant_lake
    rec = fit_torque(lake, TorqueFitSettings(train=["plant/a"], holdout=["plant/b"], torque="measured",
                                             friction_law="tanh"), fit_id="rp")
    torque = json.loads(rec.extra["torque_json"])
    assert torque["holdout"]["floor_ratio"] < 3  # the torque score passes
    (replay,) = torque["holdout_replay"]
    assert replay["replayed"] and replay["floor_ratio"] > 3 and replay["passed"] is False
    line = [(t, ok) for t, ok in torque["adequacy_lines"] if t.startswith("held-out replay")][0]
    assert line[1] is False and "the motion is not" in line[0]
    shown = CliRunner().invoke(app, ["fit", "show", "rp", "--lake", str(lake)])
    assert "held-out replay of plant/b" in shown.output


def test_a_suggested_change_never_names_a_value_outside_the_bounds():
    from twinlake.fit.trust.signatures import suggested_change

    text = suggested_change("viscous", 6, 47.6, "N·m·s/rad", 0.4)  # mu_viscous is bounded [0, 5]
    assert "47.6" not in text and "at most +4.6" in text and "not this term alone" in text
    assert suggested_change("viscous", 6, 1.2, "N·m·s/rad", 0.4) == "J6 +1.2 N·m·s/rad"
    assert "at most -0.195" in suggested_change("inertia", 2, -0.3, "kg·m²", 0.195)  # armature >= 0


def test_links_on_a_pc_logged_run_predict_a_second_one_better_than_nominal(plant_lake):
    """The measured route with +links on libfranka-style PC logs (stale rows, skipped ticks)."""
    lake, _ = plant_lake
    rec = fit_torque(lake, TorqueFitSettings(train=["panda/a"], holdout=["panda/b"], torque="measured",
                                             params=["+links"]), fit_id="pc-links")
    torque = json.loads(rec.extra["torque_json"])
    assert torque["gaps"]["panda/a"]["stale_rows"] > 0 and torque["gaps"]["panda/a"]["filled_ticks"] > 0
    fitted, nominal = torque["holdout"], torque["nominal_holdout"]
    loaded = [j for j in range(7) if nominal["rmse_raw_nm"][j] > 2 * nominal["floor_nm"][j]]
    assert len(loaded) >= 4
    for j in loaded:
        assert fitted["rmse_raw_nm"][j] < nominal["rmse_raw_nm"][j], j
    assert [r["replayed"] for r in torque["holdout_replay"]] == [False]  # a mapped log of q, dq, tau_J: said, not replayed


def test_the_bounded_solve_keeps_every_bounded_entry_inside_the_layout_box():
    """β̂ past both kinds of bound (a viscous coefficient of 14.7 with bounds [0, 5]; a payload
    whose centre of mass is 8.7 m off): the weighted nearest β inside, at the bounds."""
    from twinlake.fit.torque.model.equations import EquationSpec
    from twinlake.fit.torque.estimation.estimate import constrain, mass_com_inertia
    from twinlake.fit.torque.estimation.solve import body_blocks, bounds

    spec = EquationSpec("measured", "tanh", ("mu_viscous", "friction", "tau_offset"), payload=True, links=False)
    names = spec.names()
    rigid = RigidBodyModel.load()
    blocks = body_blocks(spec, rigid.flange_rotation, rigid.flange_position_m)
    theta = rigid.payload_theta(0.3, (-8.7, -5.6, 0.05), (1e-3, 1e-3, 1e-3))
    beta_hat = np.zeros(len(names))
    beta_hat[:10] = theta
    beta_hat[names.index("mu_viscous_j5")] = 14.7
    lower, upper = bounds(names)
    beta, moved = constrain(beta_hat, np.eye(len(names)), lower, upper, blocks)
    assert moved and beta[names.index("mu_viscous_j5")] == pytest.approx(5.0)
    assert np.all(beta[10:] >= lower[10:]) and np.all(beta[10:] <= upper[10:])
    mass, com, _ = mass_com_inertia(beta[:10], blocks[0])
    assert 0 < mass <= 3.0 and np.all(np.abs(com) <= 0.2 + 1e-12)
