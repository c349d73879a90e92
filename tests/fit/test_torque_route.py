"""The torque route end to end on recordings of a known truth, through the lake and the CLI:
the twin's own recorder under the extended family (payload, tanh friction, asymmetry, bias,
a 3 ms delay) from the commanded torques, the independent plant's measured tau_J for the
payload, a mapped log without targets or gains (and one tick in twelve missing), and
`fit compare` catching a torque sign flip and gravity counted twice."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import mujoco
import numpy as np
import pytest
from typer.testing import CliRunner

import synth
import torque_runs
from twinlake.catalog import connect
from twinlake.catalog.selection import run_frames
from twinlake.cli import app
from twinlake.fit.trust.compare import compare_fits
from twinlake.fit.records.extras import TorqueExtras
from twinlake.fit.records.record import load_fit
from twinlake.fit.torque import TorqueFitSettings, fit_torque
from twinlake.fit.torque.model.regressor import RigidBodyModel
from twinlake.sim import PARAM_NAMES, load_params
from twinlake.sim.arm_model.model import FR3_MODEL_PATH

EXTENDED = ["+payload", "+asymmetry", "+bias"]


@pytest.fixture(scope="module")
def twin_lake(tmp_path_factory) -> Path:
    """Two 8 s runs of the twin under torque_runs.EXTENDED_TRUTH (tanh law) in one lake."""
    lake, _, _ = torque_runs.twin_runs(tmp_path_factory.mktemp("tq"), "ext", ("a", "b"), family="extended", seconds=8.0)
    return lake


def _frames(lake: Path, robot: str, run: str) -> dict[str, np.ndarray]:
    con = connect(lake)
    try:
        table = run_frames(con, robot, run)
    finally:
        con.close()
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_commanded_route_recovers_the_extended_truth_and_is_an_ordinary_fit(twin_lake, tmp_path):
    res = _cli("fit", "run", "--lake", str(twin_lake), "--method", "torque", "--train", "ext/a", "--holdout", "ext/b",
               "--friction-law", "tanh", "--params", *EXTENDED, "--id", "tq-ext", "--json")
    assert res.exit_code == 0, res.output
    rec = load_fit(twin_lake, "tq-ext")
    assert rec.settings["method"] == "torque" and rec.settings["torque"] == "commanded"
    assert rec.friction_law == "tanh"  # what validate, export and campaigns read
    truth = torque_runs.EXTENDED_TRUTH.to_vector()
    bars = {e["name"]: e for e in rec.identifiability["parameters"]}
    free = [n for n in PARAM_NAMES if bars[n]["free"]]
    assert len(free) == 7 * 5 + 7  # armature, Coulomb, viscous, asymmetry, bias per joint; the payload's 7
    est = rec.vector
    for name in free:
        i = PARAM_NAMES.index(name)
        err = abs(est[i] - truth[i])
        assert err <= max(0.05 * abs(truth[i]), 0.02 if not name.startswith("payload_i") else 5e-4), name
        assert err <= 4 * bars[name]["stderr"] + 1e-4, name  # the stated (HAC) bars cover the error
    assert rec.params.motor_delay_ms == 3
    torque = json.loads(rec.extra["torque_json"])
    assert torque["delay_ms"] == 3 and torque["filter"]["from_spectrum"]
    assert torque["train"]["variance_explained_all"] > 0.99 and torque["holdout"]["floor_ratio"] < 3
    shown = _cli("fit", "show", "tq-ext", "--lake", str(twin_lake))
    assert shown.exit_code == 0 and "held-out torque residual" in shown.output
    out = tmp_path / "tq.json"
    assert _cli("fit", "export", "tq-ext", "--lake", str(twin_lake), "--format", "profile", "--out", str(out)).exit_code == 0
    assert load_params(out).payload_mass == pytest.approx(rec.params.payload_mass)
    snippet = tmp_path / "tq.xml"
    assert _cli("fit", "export", "tq-ext", "--lake", str(twin_lake), "--format", "mjcf", "--out", str(snippet)).exit_code == 0
    body = [line for line in snippet.read_text().splitlines() if line.strip().startswith(("<body", "<inertial", "</body>"))]
    xml = FR3_MODEL_PATH.read_text().replace('<site name="ee" pos="0 0 0.107" size="0.01" rgba="1 0.3 0.3 1"/>',
                                             '<site name="ee" pos="0 0 0.107"/>' + "".join(body))
    model = mujoco.MjModel.from_xml_string(xml)  # the exported payload body loads in MuJoCo
    assert model.body("payload").mass[0] == pytest.approx(rec.params.payload_mass, rel=1e-5)


def test_compare_agrees_across_runs_and_catches_a_sign_flip_and_gravity_counted_twice(twin_lake):
    settings = dict(friction_law="tanh", params=EXTENDED)
    good = fit_torque(twin_lake, TorqueFitSettings(train=["ext/a"], **settings), fit_id="tq-a")
    other = fit_torque(twin_lake, TorqueFitSettings(train=["ext/b"], **settings), fit_id="tq-b")
    assert compare_fits(good, other).verdict == "agree"
    frames = _frames(twin_lake, "ext", "a")
    flipped = {k: v for k, v in frames.items()}
    gravity_twice = {k: v for k, v in frames.items()}
    q = np.column_stack([frames[f"q{j}"] for j in range(1, 8)])
    g = RigidBodyModel.load().gravity_torque(q)
    for j in range(1, 8):
        flipped[f"tau_cmd{j}"] = -frames[f"tau_cmd{j}"]
        gravity_twice[f"tau_cmd{j}"] = frames[f"tau_cmd{j}"] + g[:, j - 1]
    for run, cols in (("a-flipped", flipped), ("a-gravity", gravity_twice)):
        synth.publish_run(twin_lake, "ext", run, {k: v for k, v in cols.items() if k in synth.FRAME_SCHEMA.names})
    sign = compare_fits(good, fit_torque(twin_lake, TorqueFitSettings(train=["ext/a-flipped"], **settings), fit_id="tq-s"))
    assert sign.verdict == "disagree" and any(c.startswith("torque sign") for c in sign.causes), sign.causes
    twice = compare_fits(good, fit_torque(twin_lake, TorqueFitSettings(train=["ext/a-gravity"], **settings), fit_id="tq-g"))
    assert twice.verdict == "disagree" and any(c.startswith("gravity counted twice") for c in twice.causes), twice.causes
    res = _cli("fit", "compare", "tq-a", "tq-s", "--lake", str(twin_lake), "--json")
    assert res.exit_code == 1 and json.loads(res.output)["verdict"] == "disagree"


def test_measured_route_finds_the_independent_plants_payload_on_a_mapped_log(tmp_path):
    lake, truth = torque_runs.plant_runs(tmp_path, "plant", ("a",), seconds=10.0)
    rec = fit_torque(lake, TorqueFitSettings(train=["plant/a"], torque="measured", friction_law="tanh"), fit_id="m1")
    payload = json.loads(rec.extra["torque_json"])["payload"]
    assert payload["mass_kg"] == pytest.approx(truth.payload_mass_kg, rel=0.02)
    assert TorqueExtras.from_json(load_fit(lake, "m1").extra).to_json() == rec.extra  # the route's typed columns
    assert list(rec.extra) == [f.name for f in fields(TorqueExtras)]
    assert np.abs(np.array(payload["com_m"]) - truth.payload_com_m).max() < 0.005
    assert not any(b["name"].startswith("armature") for b in json.loads(rec.extra["torque_json"])["beta"])
    frames = _frames(lake, "plant", "a")  # a mapped log: q, dq, tau_J only, one tick in twelve lost
    keep = np.arange(len(frames["seq"])) % 12 != 5
    mapped = {"seq": frames["seq"][keep], "t_s": frames["t_s"][keep]}
    mapped.update({f"{p}{j}": frames[f"{p}{j}"][keep] for p in ("q", "dq", "tau_J") for j in range(1, 8)})
    synth.publish_run(lake, "plant", "mapped", mapped)
    res = _cli("fit", "run", "--lake", str(lake), "--method", "torque", "--train", "plant/mapped",
               "--friction-law", "tanh", "--id", "m2", "--json")
    assert res.exit_code == 0, res.output
    mapped_fit = load_fit(lake, "m2")
    torque = json.loads(mapped_fit.extra["torque_json"])
    assert mapped_fit.settings["torque"] == "measured"  # the default when tau_cmd is absent
    assert torque["gaps"]["plant/mapped"]["filled_ticks"] > 0
    assert torque["payload"]["mass_kg"] == pytest.approx(truth.payload_mass_kg, rel=0.02)
    refused = _cli("fit", "run", "--lake", str(lake), "--train", "plant/mapped", "--workers", "0")
    assert refused.exit_code != 0 and "no clean interval" in refused.output  # its gaps leave no clean interval


def test_validate_scores_a_torque_fit_on_a_run_it_cannot_replay(tmp_path):
    lake, _ = torque_runs.plant_runs(tmp_path, "plant", ("a", "b"), seconds=6.0)
    for run in ("a", "b"):  # mapped logs: q, dq, tau_J only
        frames = _frames(lake, "plant", run)
        synth.publish_run(lake, "plant", f"{run}-mapped", {k: v for k, v in frames.items()
                                                           if k in ("seq", "t_s") or k[:-1] in ("q", "dq", "tau_J")})
    fit_torque(lake, TorqueFitSettings(train=["plant/a-mapped"], friction_law="tanh"), fit_id="v1")
    res = _cli("fit", "validate", "v1", "--runs", "plant/b-mapped", "--lake", str(lake), "--json")
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)
    assert row["run"] == "plant/b-mapped" and row["passed"] is True and row["variance_explained_all"] > 0.99
    assert row["new"] is True  # stored in the lake like a replayed validation
    again = json.loads(_cli("fit", "validate", "v1", "--runs", "plant/b-mapped", "--lake", str(lake), "--json").output)
    assert again["validation"] == row["validation"] and again["new"] is False  # the same validation, not a copy
    shown = json.loads(_cli("fit", "show", "v1", "--lake", str(lake), "--json").output)["validations"]
    assert [(v["run"], v["fitted_source"], v["passed"]) for v in shown] == [("b-mapped", "twinlake_torque", True)]
    assert shown[0]["fitted_torque_floor_ratio"] == pytest.approx(row["floor_ratio"])
    assert shown[0]["fitted_q_rmse_all_rad"] is None  # nothing was replayed
    assert "torque / floor" in _cli("fit", "show", "v1", "--lake", str(lake)).output
    refused = _cli("fit", "run", "--lake", str(lake), "--train", "plant/b-mapped", "--workers", "0")
    assert refused.exit_code != 0 and "cannot be replayed: no controller" in refused.output, refused.output
    assert "joint targets (q_target)" in refused.output and "--method torque" in refused.output
    strict = _cli("fit", "validate", "v1", "--runs", "plant/b-mapped", "--lake", str(lake), "--max-floor-ratio", "0.5")
    assert strict.exit_code == 1 and "not replayable" in strict.output and "stored as validation" in strict.output
    con = connect(lake)
    try:
        stored = con.execute("SELECT verdict, torque_floor_ratio FROM validations WHERE fit = 'v1' ORDER BY verdict").fetchall()
        latest = con.execute("SELECT fitted_verdict, passed FROM fit_validations WHERE fit = 'v1'").fetchall()
    finally:
        con.close()
    assert [v for v, _ in stored] == ["fail", "pass"] and stored[0][1] == pytest.approx(row["floor_ratio"])
    assert latest == [("fail", False)]  # the latest validation of the run is the one `fit show` reports
