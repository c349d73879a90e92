"""Recordings with a true payload and a configured load: the offline recorder states the
configured load in its metadata, ingest keeps it, and the fit's replay of the run matches the
recording only with the true payload."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.daemon.noise import NoiseConfig
from twinlake.daemon.offline import record_offline
from twinlake.sim import DEMO_PROFILE_PATH, EndLoad, load_params, replay_reference

PLAN = ["--mode", "multisine", "--joints", "1,2,3,4,5,6,7", "--seconds", "1.5", "--ramp", "0.3", "--hold", "0.2",
        "--rate", "50", "--tones", "0.5,1.1,2.3", "--amplitude-deg", "2", "--max-velocity", "0.5",
        "--max-acceleration", "5", "--max-jerk", "100", "--robot-id", "sim-pay"]
TRUE = EndLoad(0.8, (0.0, 0.01, 0.06))
CONFIGURED = EndLoad(0.3, (0.0, 0.0, 0.04))


def test_an_offline_payload_recording_replays_only_with_its_payload(tmp_path):
    from twinlake.fit.core.objective import build_data

    out = tmp_path / "plan"
    assert CliRunner().invoke(app, ["excite", *PLAN, "--output", str(out)]).exit_code == 0
    csv = tmp_path / "pay.csv"
    record_offline(out / "reference.csv", csv, noise=NoiseConfig.parse("none"), tail_s=0.1, payload=TRUE,
                   configured_load=CONFIGURED)
    meta = json.loads((tmp_path / "pay.meta.json").read_text())
    assert meta["configured_load"] == CONFIGURED.to_json()
    lake = tmp_path / "lake"
    result = CliRunner().invoke(app, ["ingest", "--lake", str(lake), "--json", str(csv)])
    assert result.exit_code == 0, result.output
    inp = build_data(lake, ["pay"]).inputs[0]
    assert inp.configured_load == CONFIGURED  # from the run's metadata
    truth = load_params(DEMO_PROFILE_PATH)
    q_true = replay_reference(inp, truth.with_payload(TRUE)).q
    q_bare = replay_reference(inp, truth).q
    assert np.abs(q_true - inp.q_ref).max() < 1e-8  # the CSV's 12 significant digits
    assert np.abs(q_bare - inp.q_ref).max() > 1e-3


def test_the_daemon_arm_sags_under_an_uncompensated_payload_only(start_daemon):
    from twinlake.sim import HOME_Q

    quiet = NoiseConfig.parse("none")
    loaded = start_daemon(initial_controller="idle", noise=quiet, payload=EndLoad(0.8))
    sagged = loaded.wait_state(lambda s: s.running and np.abs(s.q - HOME_Q).max() > 5e-3)
    assert loaded.finish() == 0
    compensated = start_daemon(initial_controller="idle", noise=quiet, payload=EndLoad(0.8),
                               configured_load=EndLoad(0.8))
    compensated.wait_state(lambda s: s.running)
    still = compensated.wait_state(lambda s: s.running and s.timestamp >= sagged.timestamp)
    assert np.abs(still.q - HOME_Q).max() < 1e-9  # the firmware compensates exactly what is configured
    assert compensated.finish() == 0


def test_sim_record_takes_payload_and_configured_load_flags(tmp_path):
    out = tmp_path / "plan"
    assert CliRunner().invoke(app, ["excite", *PLAN, "--output", str(out)]).exit_code == 0
    res = CliRunner().invoke(app, ["sim", "record", "--reference", str(out / "reference.csv"), "--out",
                                   str(tmp_path / "a.csv"), "--tail", "0.05", "--payload", "0.8,0,0.01,0.06",
                                   "--configured-load", "0.3,0,0,0.04"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "a.meta.json").read_text())["configured_load"] == CONFIGURED.to_json()
    bad = CliRunner().invoke(app, ["sim", "record", "--reference", str(out / "reference.csv"), "--out",
                                   str(tmp_path / "b.csv"), "--payload", "0.8,1"])
    assert bad.exit_code == 1 and "--payload '0.8,1': expected MASS or MASS,X,Y,Z" in bad.output


def test_excite_states_the_configured_load_and_the_fit_replays_with_it(start_daemon, tmp_path):
    """`twinlake excite --execute --configured-load` against a daemon configured with the same
    load: metadata.json states it, ingest keeps it in the run's metadata, where the fit reads it."""
    daemon = start_daemon(initial_controller="joint_impedance", payload=CONFIGURED, configured_load=CONFIGURED)
    daemon.wait_state(lambda s: s.controller == "joint_impedance")
    ports = daemon.daemon.ports
    out = tmp_path / "exc"
    result = CliRunner().invoke(app, ["excite", *PLAN, "--execute", "--host", "127.0.0.1",
                                      "--cmd-port", str(ports["cmd"]), "--state-port", str(ports["state"]),
                                      "--recording-port", str(ports["recording"]), "--output", str(out),
                                      "--record", "run.csv", "--configured-load", "0.3,0,0,0.04",
                                      "--max-lateness", "0.5", "--stale-after", "1.0"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metadata.json").read_text())["configured_load"] == CONFIGURED.to_json()
    lake = tmp_path / "lake"
    ingested = CliRunner().invoke(app, ["ingest", "--lake", str(lake), "--json", str(out)])
    assert ingested.exit_code == 0, ingested.output
    from twinlake.catalog import connect
    from twinlake.sim.arm_model.load import load_from_metadata

    con = connect(lake)
    try:
        (meta_json,) = con.execute("SELECT metadata_json FROM runs WHERE run = 'exc'").fetchone()
    finally:
        con.close()
    assert load_from_metadata(json.loads(meta_json)) == CONFIGURED  # what build_data replays each interval with


def test_a_malformed_configured_load_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "never"
    result = CliRunner().invoke(app, ["excite", *PLAN, "--output", str(out), "--configured-load", "0.3,0,0"])
    assert result.exit_code == 1
    assert "--configured-load" in result.output and "MASS,X,Y,Z" in result.output
    assert not out.exists()
    preview = tmp_path / "preview"
    assert CliRunner().invoke(app, ["excite", *PLAN, "--output", str(preview), "--configured-load", "0.3"]).exit_code == 0
    assert json.loads((preview / "metadata.json").read_text())["configured_load"]["mass_kg"] == 0.3


def test_sim_record_takes_the_true_friction_law(tmp_path):
    """`twinlake sim record --friction-law tanh`: the recording replays to its 12 digits with
    the tanh law only; an unknown law is refused naming the laws, before any file is made."""
    from twinlake.fit.core.objective import build_data

    out = tmp_path / "plan"
    assert CliRunner().invoke(app, ["excite", *PLAN, "--output", str(out)]).exit_code == 0
    csv = tmp_path / "tanh.csv"
    res = CliRunner().invoke(app, ["sim", "record", "--reference", str(out / "reference.csv"), "--out", str(csv),
                                   "--tail", "0.05", "--noise", "none", "--friction-law", "tanh"])
    assert res.exit_code == 0, res.output
    lake = tmp_path / "lake"
    assert CliRunner().invoke(app, ["ingest", "--lake", str(lake), str(csv)]).exit_code == 0
    inp = build_data(lake, ["tanh"]).inputs[0]
    truth = load_params(DEMO_PROFILE_PATH)
    assert np.abs(replay_reference(inp, truth, friction_law="tanh").q - inp.q_ref).max() < 1e-8
    assert np.abs(replay_reference(inp, truth).q - inp.q_ref).max() > 1e-6
    bad = CliRunner().invoke(app, ["sim", "record", "--reference", str(out / "reference.csv"), "--out",
                                   str(tmp_path / "never.csv"), "--friction-law", "coulomb"])
    assert bad.exit_code == 1 and "stribeck, tanh, sigmoid" in bad.output
    assert not (tmp_path / "never.csv").exists()


def test_the_daemon_plant_takes_the_true_friction_law(start_daemon):
    daemon = start_daemon(initial_controller="idle", noise=NoiseConfig.parse("none"), friction_law="sigmoid")
    assert daemon.daemon.robot.sim.plant.friction_law == "sigmoid"
    daemon.wait_state(lambda s: s.running)
    assert daemon.finish() == 0


def test_daemon_serve_refuses_an_unknown_friction_law():
    result = CliRunner().invoke(app, ["daemon", "serve", "--cmd-port", "0", "--state-port", "0", "--recording-port", "0",
                                      "--duration", "0.1", "--friction-law", "coulomb"])
    assert result.exit_code == 1 and "stribeck, tanh, sigmoid" in result.output
