"""Bags of every storage kind, written by real writers, through `twinlake ingest` and
`twinlake intervals`: JointState only (rosbags sqlite3, the independent MCAP writer), robot
state at 1 kHz beside joint states at 30 Hz (MCAP), ROS 1 franka_ros at 30 Hz with a lost
message, split files, a lone .db3 without metadata.yaml, zstd compression and an unsupported
one, a truncated file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bag_writers import (JOINT_STATE, ROS1_STATE, ROS2_STATE, T0_NS, Topic, joint_states, motion,
                         robot_states, store, write_mcap_independent, write_ros1, write_ros2)
from twinlake.catalog import Lake, connect
from twinlake.cli import app

FR3 = [f"fr3_joint{j}" for j in range(1, 8)]
PANDA = [f"panda_joint{j}" for j in range(1, 8)]
MS = 1_000_000


def ingest(lake: Path, *args: str) -> tuple[int, list[dict]]:
    res = CliRunner().invoke(app, ["ingest", *args, "--lake", str(lake), "--json"])
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    return res.exit_code, rows


def intervals(lake: Path, *args: str) -> list[dict]:
    res = CliRunner().invoke(app, ["intervals", "--lake", str(lake), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def run_row(partition: str) -> dict:
    return pq.read_table(Path(partition) / "run.parquet").to_pylist()[0]


def frames(partition: str):
    return pq.read_table(Path(partition) / "frames.parquet")


def test_joint_states_only_sqlite3_directory(tmp_path):
    ts = store(2)
    m = motion(400, 0.001)
    times = [T0_NS + i * MS for i in range(400)]
    bag = write_ros2(tmp_path / "js_only", ts, [Topic("/joint_states", JOINT_STATE,
                                                      joint_states(ts, times, FR3, m))])
    code, (out,) = ingest(tmp_path / "lake", str(bag), "--robot", "fr3")
    assert code == 0 and out["status"] == "published", out
    f = frames(out["partition"])
    assert f.num_rows == 400
    np.testing.assert_array_equal(np.column_stack([f[f"q{j}"] for j in range(1, 8)]), m["q"])
    np.testing.assert_array_equal(np.column_stack([f[f"tau_J{j}"] for j in range(1, 8)]), m["tau"])
    assert f["ee_px"].null_count == 400  # not recorded: null
    row = run_row(out["partition"])
    assert (row["source_format"], row["source_version"], row["time_source"]) == ("ros_bag", 2, "header.stamp")
    assert {r["name"] for r in row["raw_files"]} == {"metadata.yaml", "js_only.db3"}
    (iv,) = intervals(tmp_path / "lake")
    assert (iv["seq_first"], iv["seq_last"], iv["start_reason"], iv["end_reason"]) == (0, 399, "run_start", "run_end")


def test_independent_mcap_writer_at_30_hz(tmp_path):
    ts = store(2)
    n = 90
    times = [T0_NS + i * 33_333_333 for i in range(n)]
    bag = write_mcap_independent(tmp_path / "arm.mcap", ts, [Topic("/franka/joint_states", JOINT_STATE,
                                                                   joint_states(ts, times, PANDA, motion(n, 1 / 30)))])
    code, (out,) = ingest(tmp_path / "lake", str(bag), "--robot", "panda")
    assert code == 0 and out["status"] == "published" and out["frame_count"] == n, out
    row = run_row(out["partition"])
    assert row["bag_storage"] == "rosbag2 mcap" and abs(row["rate_hz"] - 30.0) < 0.01
    assert row["streams"][0]["messages"] == n
    (iv,) = intervals(tmp_path / "lake", "--period-s", str(1 / 30), "--period-tol-s", "0.005")
    assert (iv["frame_count"], iv["end_reason"]) == (n, "run_end")


def test_robot_state_1khz_beside_joint_states_30hz(tmp_path):
    ts = store(2)
    n = 1000
    times = [T0_NS + i * MS for i in range(n)]
    js_times = [T0_NS + i * 33_333_333 for i in range(30)]
    bag = write_ros2(tmp_path / "fr3_mcap", ts, [
        Topic("/franka_robot_state_broadcaster/robot_state", ROS2_STATE, robot_states(ts, ROS2_STATE, times, motion(n, 0.001))),
        Topic("/joint_states", JOINT_STATE, joint_states(ts, js_times, FR3, motion(30, 1 / 30)))], mcap=True)
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(bag), "--robot", "fr3")
    assert code == 0 and out["frame_count"] == n, out
    row = run_row(out["partition"])
    rates = {s["topic"]: (s["role"], s["messages"], round(s["rate_hz"])) for s in row["streams"]}
    assert rates == {"/franka_robot_state_broadcaster/robot_state": ("primary", 1000, 1000),
                     "/joint_states": ("secondary", 30, 30)}
    f = frames(out["partition"])
    assert f["tau_cmd1"].to_numpy()[5] == pytest.approx(0.5 * f["tau_J1"].to_numpy()[5])
    assert f["robot_mode"].to_pylist()[:2] == [2, 2] and f["ee_qw"].to_pylist()[0] == 1.0
    with connect(Lake(lake)) as con:
        joined = con.execute("SELECT count(*), count(js_q1), max(abs(js_t_s - t_s)) "
                             "FROM frames_with_joint_states").fetchone()
    assert joined[0] == n and joined[1] == n and joined[2] < 1 / 30 + 1e-9
    (iv,) = intervals(lake)
    assert (iv["seq_first"], iv["seq_last"]) == (0, n - 1)


def test_ros1_franka_state_30hz_with_a_lost_message(tmp_path):
    ts = store(1)
    n = 120
    keep = [i for i in range(n) if i != 50]  # message 50 never reached the bag
    times = [T0_NS + i * 33_333_333 for i in keep]
    m = {k: v[keep] for k, v in motion(n, 1 / 30).items()}
    bag = write_ros1(tmp_path / "panda.bag", ts, [
        Topic("/franka_state_controller/franka_states", ROS1_STATE, robot_states(ts, ROS1_STATE, times, m, seq=keep)),
        Topic("/franka_state_controller/joint_states", JOINT_STATE, joint_states(ts, times, PANDA, m))],
        compression="lz4")
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(bag), "--robot", "panda")
    assert code == 0 and out["frame_count"] == n - 1, out
    row = run_row(out["partition"])
    assert (row["seq_source"], row["gap_count"], row["dropped"]) == ("header.seq", 1, 1)
    f = frames(out["partition"])
    assert f["ee_px"].to_numpy()[0] == pytest.approx(0.3 + 0.01 * m["q"][0, 0])
    ivs = intervals(lake, "--period-s", str(1 / 30), "--period-tol-s", "0.005")
    assert [(i["seq_first"], i["seq_last"], i["end_reason"]) for i in ivs] == [
        (0, 49, "seq_gap"), (51, n - 1, "run_end")]


def test_split_files_and_a_lone_db3(tmp_path):
    ts = store(2)
    n = 600
    times = [T0_NS + i * MS for i in range(n)]
    topics = [Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, motion(n, 0.001)))]
    split = write_ros2(tmp_path / "split", ts, topics, split_every=250)
    assert sorted(p.name for p in split.iterdir()) == ["metadata.yaml", "split_0.db3", "split_1.db3", "split_2.db3"]
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(split), "--robot", "fr3")
    assert code == 0 and out["frame_count"] == n and len(out["files"]) == 4, out
    lone = tmp_path / "lone.db3"
    shutil.copy(write_ros2(tmp_path / "one", ts, topics) / "one.db3", lone)
    code, (out2,) = ingest(lake, str(lone), "--robot", "fr3")
    assert code == 0 and out2["run"] == "lone" and out2["frame_count"] == n, out2
    assert run_row(out2["partition"])["bag_storage"] == "rosbag2 sqlite3"
    assert [i["frame_count"] for i in intervals(lake)] == [n, n]


def test_compression_read_and_refused(tmp_path):
    ts = store(2)
    times = [T0_NS + i * MS for i in range(200)]
    topics = [Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, motion(200, 0.001)))]
    bag = write_ros2(tmp_path / "zstd_file", ts, topics, compression="file")
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(bag), "--robot", "fr3")
    assert code == 0 and out["frame_count"] == 200, out
    assert run_row(out["partition"])["bag_compression"] == "zstd/file"
    meta = bag / "metadata.yaml"  # as a bag compressed by a plugin rosbags lacks would say
    meta.write_text(meta.read_text().replace("compression_format: zstd", "compression_format: lz4"))
    code, (bad,) = ingest(lake, str(bag), "--robot", "fr3", "--run", "lz4")
    assert code == 1 and bad["status"] == "rejected" and "'lz4'" in bad["message"], bad
    assert "compression" in bad["message"]


def test_truncated_file_is_refused_and_kept(tmp_path):
    ts = store(2)
    times = [T0_NS + i * MS for i in range(500)]
    bag = write_mcap_independent(tmp_path / "whole.mcap", ts, [Topic("/joint_states", JOINT_STATE,
                                                                     joint_states(ts, times, FR3, motion(500, 0.001)))])
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(bag.read_bytes()[: bag.stat().st_size // 2])
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(cut), "--robot", "fr3")
    assert code == 1 and out["status"] == "rejected" and "cut.mcap" in out["message"], out
    assert (Path(out["quarantine"]) / "cut.mcap").read_bytes() == cut.read_bytes()
    assert not (lake / "runs").exists() or not any((lake / "runs").rglob("run.parquet"))
