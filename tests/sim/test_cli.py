import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from sim_recording import record_synthetic
from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake, publish_partition
from twinlake.cli import app
from twinlake.sim import DEMO_PROFILE_PATH, load_params
from twinlake.sim.replay.sim_csv import SIM_CSV_COLUMNS


def publish(lake_dir, robot: str, run: str, frames: dict, rate_hz: float = 1000.0,
            control_period_s: float | None = 1e-3, metadata: dict | None = None) -> None:
    """Write a run partition through the catalog's own atomic publish."""
    n = len(frames["seq"])
    frames = dict(frames)
    if control_period_s is not None:
        frames["control_period_s"] = np.full(n, control_period_s)
    frames["joint_target_valid"] = (np.asarray(frames.get("controller", np.full(n, 2))) == 2).astype(np.int8)
    frames["schema_version"] = np.full(n, 2, dtype=np.int32)
    table = pa.Table.from_arrays(
        [pa.array(frames[f.name], type=f.type) if f.name in frames else pa.nulls(n, f.type) for f in FRAME_SCHEMA],
        schema=FRAME_SCHEMA)
    row = {f.name: pa.nulls(1, type=f.type) for f in RUN_SCHEMA}
    row.update(source_format=pa.array(["synthetic"]), frame_count=pa.array([n], pa.int64()),
               seq_first=pa.array([0], pa.int64()), seq_last=pa.array([n - 1], pa.int64()),
               rate_hz=pa.array([rate_hz]), metadata_json=pa.array([json.dumps(metadata) if metadata else None]))
    lake = Lake(lake_dir)

    def write(path):
        pq.write_table(table, path / "frames.parquet")
        pq.write_table(pa.table(row, schema=RUN_SCHEMA), path / "run.parquet")

    publish_partition(lake, lake.run_relative(robot, run), write)


def test_sim_replay_writes_frankatwin_sim_csv_and_sidecar(tmp_path):
    truth = load_params(DEMO_PROFILE_PATH)
    frames = record_synthetic(truth, 600, noise_q=1e-4, noise_dq=1e-3, seed=2)
    publish(tmp_path / "lake", "sim-fr3", "run-a", frames)
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["sim", "replay", "run-a", "--lake", str(tmp_path / "lake"), "--out", str(out),
                                 "--params", str(DEMO_PROFILE_PATH), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert open(summary["csv"]).readline().strip() == ",".join(SIM_CSV_COLUMNS)
    csv = pd.read_csv(summary["csv"])  # FrankaTwin's compare_sim_real reads it with pandas
    assert tuple(csv.columns) == SIM_CSV_COLUMNS and len(csv) == 600 - 4
    q_sim = csv[[f"q{j}" for j in range(1, 8)]].to_numpy()
    q_rec = np.column_stack([frames[f"q{j}"][4:] for j in range(1, 8)])
    assert np.sqrt(np.mean((q_sim - q_rec) ** 2)) < 2e-4  # the true params reproduce the run
    assert csv["x_des_x"].isna().all() and csv["e_oz"].isna().all()  # joint impedance: no Cartesian target
    np.testing.assert_allclose(csv["t_s"].to_numpy(), frames["t_s"][4:])
    assert np.abs(csv["x_z"].to_numpy() - 0.6245).max() < 0.2 and np.isfinite(csv["wz"]).all()
    side = json.loads(open(summary["sidecar"]).read())
    assert side["schema_version"] == 1 and side["sim"]["sysid_motor_delay_steps"] == 2
    assert side["sim"]["sysid_params_decoded"]["armature"] == load_params(DEMO_PROFILE_PATH).armature.tolist()
    assert side["source"]["run"] == "run-a" and side["source"]["replayed_from_row"] == 4
    assert side["args"]["zoh_total_phys_steps"] == 596 and side["ended_normally"] is True
    # same inputs, same bytes
    again = runner.invoke(app, ["sim", "replay", "sim-fr3/run-a", "--lake", str(tmp_path / "lake"), "--out",
                                str(tmp_path / "out2"), "--params", str(DEMO_PROFILE_PATH)])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "out2" / "run-a_i0_sim.csv").read_bytes() == open(summary["csv"], "rb").read()
    assert (tmp_path / "out2" / "run-a_i0_sim.json").read_bytes() == open(summary["sidecar"], "rb").read()


def test_sim_replay_errors_are_one_line(tmp_path):
    frames = record_synthetic(load_params(DEMO_PROFILE_PATH), 50)
    publish(tmp_path / "lake", "sim-fr3", "run-b", frames)
    runner = CliRunner()
    missing = runner.invoke(app, ["sim", "replay", "nope", "--lake", str(tmp_path / "lake"), "--out", str(tmp_path)])
    assert missing.exit_code == 2 and "no run 'nope' in the lake (runs: run-b" in missing.output
    bad_interval = runner.invoke(app, ["sim", "replay", "run-b", "--interval", "7", "--lake", str(tmp_path / "lake"),
                                       "--out", str(tmp_path)])
    assert bad_interval.exit_code == 2 and "no clean interval 7 (its clean intervals: 0" in bad_interval.output
    assert len(bad_interval.output.strip().splitlines()) == 1
    bad_params = tmp_path / "p.json"
    bad_params.write_text("{}")
    res = runner.invoke(app, ["sim", "replay", "run-b", "--params", str(bad_params), "--lake", str(tmp_path / "lake"),
                              "--out", str(tmp_path)])
    assert res.exit_code == 2 and "p.json: expected schema" in res.output
    res = runner.invoke(app, ["sim", "replay", "run-b", "--joint-map", "1=a,9=b", "--lake", str(tmp_path / "lake"),
                              "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--joint-map item '9=b': expected J=NAME" in res.output


def test_sim_replay_of_a_50hz_cartesian_run_uses_the_zoh_time_base(tmp_path):
    from twinlake.sim import HOME_Q, DynamicsParams, ReplayInput, replay_reference

    n = 30
    home = replay_reference(ReplayInput.from_frames(record_synthetic(DynamicsParams.nominal(), 6)),
                            DynamicsParams.nominal())
    t = np.arange(n) / 50.0
    frames = {"seq": np.arange(n), "t_s": t, "controller": np.ones(n, dtype=np.int32)}
    for j in range(7):
        frames[f"q{j + 1}"], frames[f"dq{j + 1}"] = np.full(n, HOME_Q[j]), np.zeros(n)
        frames[f"tau_cmd{j + 1}"] = np.zeros(n)
    pos0, quat0 = home.ee_pos[0], home.ee_quat_xyzw[0]
    for a, name in enumerate(("tgt_px", "tgt_py", "tgt_pz")):
        frames[name] = pos0[a] + (0.02 * np.sin(2 * np.pi * t) if a == 2 else 0.0 * t)
    for a, name in enumerate(("tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw")):
        frames[name] = np.full(n, quat0[a])
    publish(tmp_path / "lake", "fr3-real", "cart-50hz", frames, rate_hz=50.0, control_period_s=None,
            metadata={"args": {"kp_pos": 400.0, "kp_ori": 30.0}, "q_init": HOME_Q.tolist()})
    result = CliRunner().invoke(app, ["sim", "replay", "cart-50hz", "--lake", str(tmp_path / "lake"),
                                      "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    side = json.loads(open(summary["sidecar"]).read())
    assert summary["samples"] == n and summary["ticks"] == 50 + (n - 1) * 20 + 1
    assert side["args"]["zoh_mean_steps_per_csv_row"] > 19 and side["sim"]["control_mode"] == "cartesian_impedance"
    csv = pd.read_csv(summary["csv"])
    np.testing.assert_allclose(csv["x_des_z"].to_numpy(), frames["tgt_pz"])
    assert np.abs(csv["x_z"].to_numpy()[-10:] - pos0[2]).max() > 1e-3  # the flange followed the target
