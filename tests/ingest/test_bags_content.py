"""What a bag holds, through `twinlake ingest`: two namespaced arms, header stamps against
receive times, a lost message and a NaN effort, an unknown message type, bags without
definitions (kept franka_msgs versions, proven or refused), targets and gains, a malformed
message."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from rosbags.typesys import get_types_from_msg

from bag_writers import (JOINT_STATE, ROS1_STATE, ROS2_STATE, T0_NS, Topic, joint_states, motion,
                         robot_states, store, write_ros1, write_ros2)
from test_bags_formats import FR3, MS, frames, ingest, intervals, run_row


def test_two_namespaced_arms_are_two_runs(tmp_path):
    ts = store(2)
    n = 300
    times = [T0_NS + i * MS for i in range(n)]
    left, right = motion(n, 0.001, seed=1), motion(n, 0.001, seed=2)
    bag = write_ros2(tmp_path / "bimanual", ts, [
        Topic("/left/joint_states", JOINT_STATE, joint_states(ts, times, [f"left/{j}" for j in FR3], left)),
        Topic("/right/joint_states", JOINT_STATE, joint_states(ts, times, FR3, right))], mcap=True)
    lake = tmp_path / "lake"
    code, outs = ingest(lake, str(bag), "--robot-map", "left=fr3-left", "right=fr3-right")
    assert code == 0 and [(o["robot"], o["run"]) for o in outs] == [
        ("fr3-left", "bimanual-left"), ("fr3-right", "bimanual-right")], outs
    for out, m in zip(outs, (left, right)):
        np.testing.assert_array_equal(frames(out["partition"])["q3"].to_numpy(), m["q"][:, 2])
        assert run_row(out["partition"])["arm_namespace"] in ("left", "right")
    assert sorted((i["robot"], i["frame_count"]) for i in intervals(lake)) == [("fr3-left", n), ("fr3-right", n)]
    code, (bad,) = ingest(lake, str(bag), "--robot-map", "lefty=x")
    assert code == 1 and "'lefty'" in bad["message"] and "'left', 'right'" in bad["message"], bad


def test_one_topic_of_fourteen_joints_is_two_arms(tmp_path):
    ts = store(2)
    n = 100
    times = [T0_NS + i * MS for i in range(n)]
    a, b = motion(n, 0.001, seed=1), motion(n, 0.001, seed=2)
    both = {k: np.column_stack([a[k], b[k]]) for k in a}
    names = [f"left_fr3_joint{j}" for j in range(1, 8)] + [f"right_fr3_joint{j}" for j in range(1, 8)]
    bag = write_ros2(tmp_path / "dual", ts, [Topic("/joint_states", JOINT_STATE, joint_states(ts, times, names, both))])
    code, outs = ingest(tmp_path / "lake", str(bag))
    assert code == 0 and [(o["robot"], o["run"]) for o in outs] == [("left", "dual-left"), ("right", "dual-right")], outs
    np.testing.assert_array_equal(frames(outs[1]["partition"])["tau_J7"].to_numpy(), b["tau"][:, 6])
    assert sorted((i["robot"], i["frame_count"]) for i in intervals(tmp_path / "lake")) == [("left", n), ("right", n)]


def test_header_stamps_against_receive_times(tmp_path):
    ts = store(2)
    n = 200
    recv = [T0_NS + i * MS + (i % 3) * 200_000 for i in range(n)]  # transport jitter
    stamps = [T0_NS - 5 * MS + i * MS for i in range(n)]
    stamps[120] = stamps[119] - MS  # the publisher's clock stepped back once
    m = motion(n, 0.001)
    msgs = [(r, dataclasses.replace(msg, header=dataclasses.replace(msg.header, stamp=s.header.stamp)))
            for r, (_, msg), (_, s) in zip(recv, joint_states(ts, recv, FR3, m), joint_states(ts, stamps, FR3, m))]
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(write_ros2(tmp_path / "stamped", ts, [Topic("/joint_states", JOINT_STATE, msgs)])), "--robot", "fr3")
    assert code == 0, out
    f = frames(out["partition"])
    t_s = f["t_s"].to_numpy()
    np.testing.assert_allclose(t_s, (np.array(stamps) - stamps[0]) / 1e9)  # stamps, not re-sorted
    np.testing.assert_array_equal(f["receive_ns"].to_numpy(), recv)
    assert run_row(out["partition"])["time_source"] == "header.stamp"
    ivs = intervals(lake, "--run", "stamped")
    assert [(i["seq_first"], i["seq_last"]) for i in ivs][0] == (0, 119)
    # split where the stamp steps back and where the step after it spans lost ticks
    assert [i["start_reason"] for i in ivs] == ["run_start", "clock_reversal", "time_gap"]
    unstamped = joint_states(ts, recv, FR3, m, stamp=False)
    code, (out2,) = ingest(lake, str(write_ros2(tmp_path / "unstamped", ts, [Topic("/joint_states", JOINT_STATE, unstamped)])), "--robot", "fr3")
    row = run_row(out2["partition"])
    assert code == 0 and row["time_source"] == "receive_time" and "receive_time" in row["reasons"][-1]
    np.testing.assert_allclose(frames(out2["partition"])["t_s"].to_numpy(), (np.array(recv) - recv[0]) / 1e9)


def test_a_lost_message_and_a_nan_effort(tmp_path):
    ts = store(2)
    n = 400
    keep = [i for i in range(n) if i != 200]
    times = [T0_NS + i * MS for i in keep]
    m = {k: v[keep].copy() for k, v in motion(n, 0.001).items()}
    m["tau"][300, 3] = np.nan  # a torque sensor dropout: data, kept as NaN
    lake = tmp_path / "lake"
    bag = write_ros2(tmp_path / "lossy", ts, [Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, m))])
    code, (out,) = ingest(lake, str(bag), "--robot", "fr3")
    assert code == 0 and out["frame_count"] == n - 1, out
    row = run_row(out["partition"])
    assert row["nonfinite_frames"] == [{"column": "tau_J4", "frames": 1}]
    assert np.isnan(frames(out["partition"])["tau_J4"].to_numpy()[300])
    ivs = intervals(lake)
    # the lost message splits (a 2 ms step: a time gap of one lost tick); a NaN torque-sensor sample is counted, and does
    # not split (tau_J is not part of the nonfinite rule, docs/intervals.md)
    assert [(i["seq_first"], i["seq_last"], i["start_reason"], i["end_reason"]) for i in ivs] == [
        (0, 199, "run_start", "time_gap"), (200, n - 2, "time_gap", "run_end")]


def _thing_store(ts):
    ts.register(get_types_from_msg("float64 x\nstring label", "acme_msgs/msg/Thing"))
    return ts


def test_an_unknown_type_is_named_and_the_rest_ingested(tmp_path):
    ts = _thing_store(store(2))
    times = [T0_NS + i * MS for i in range(100)]
    Thing = ts.types["acme_msgs/msg/Thing"]
    bag = write_ros2(tmp_path / "mixed", ts, [
        Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, motion(100, 0.001))),
        Topic("/acme/thing", "acme_msgs/msg/Thing", [(t, Thing(x=1.0, label="a")) for t in times])],
        definitions=False)
    code, (out,) = ingest(tmp_path / "lake", str(bag), "--robot", "fr3")
    assert code == 0 and out["status"] == "published" and "topics_not_ingested" in out["flags"], out
    row = run_row(out["partition"])
    assert row["topics_not_ingested"][0]["topic"] == "/acme/thing"
    assert any("/acme/thing (acme_msgs/msg/Thing) not ingested: unknown type" in r for r in row["reasons"])
    assert len(intervals(tmp_path / "lake")) == 1


def _humble_db3(src: Path, out: Path) -> Path:
    """The bag's .db3 alone with no definitions and no type hashes, as Humble wrote them."""
    (db,) = src.glob("*.db3")
    shutil.copy(db, out)
    con = sqlite3.connect(out)
    con.execute("UPDATE topics SET type_description_hash = ''")
    con.execute("UPDATE message_definitions SET encoded_message_definition = '', type_description_hash = ''")
    con.commit()
    con.close()
    return out


def test_robot_state_without_definitions_uses_a_kept_version_only_when_it_fits(tmp_path):
    ts = store(2)
    n = 100
    times = [T0_NS + i * MS for i in range(n)]
    topic = Topic("/franka_robot_state_broadcaster/robot_state", ROS2_STATE, robot_states(ts, ROS2_STATE, times, motion(n, 0.001)))
    lake = tmp_path / "lake"
    hashed = write_ros2(tmp_path / "iron", ts, [topic], definitions=False)
    code, (out,) = ingest(lake, str(hashed), "--robot", "fr3")
    assert code == 0 and out["frame_count"] == n, out
    assert {"msgtype": ROS2_STATE, "origin": "kept franka_ros2 0.1.13"} in run_row(out["partition"])["definitions"]
    humble = _humble_db3(hashed, tmp_path / "humble.db3")
    code, (out2,) = ingest(lake, str(humble), "--robot", "fr3")
    assert code == 0 and out2["frame_count"] == n, out2  # proven by decoding every message exactly
    assert [(i["run"], i["frame_count"]) for i in intervals(lake)] == [("humble", n), ("iron", n)]
    other = store(2, kept="franka_ros2 0.1.13")  # a robot state of some other version: no robot_mode
    fields = other.fielddefs[ROS2_STATE][1]
    text = other.generate_msgdef(ROS2_STATE, ros_version=2)[0].split("=" * 80)[0].replace("uint8 robot_mode\n", "")
    alien = store(2)
    alien.fielddefs.pop(ROS2_STATE)
    alien.types.pop(ROS2_STATE)
    alien.register(get_types_from_msg(text, ROS2_STATE))
    assert len(alien.fielddefs[ROS2_STATE][1]) == len(fields) - 1
    msgs = [(t, alien.types[ROS2_STATE](**{k: getattr(msg, k) for k, _ in alien.fielddefs[ROS2_STATE][1]}))
            for t, msg in topic.messages]
    odd = write_ros2(tmp_path / "odd", alien, [Topic(topic.name, ROS2_STATE, msgs)], definitions=False)
    code, (bad,) = ingest(lake, str(_humble_db3(odd, tmp_path / "odd.db3")), "--robot", "fr3")
    assert code == 1 and bad["status"] == "rejected", bad
    assert ROS2_STATE in bad["message"] and "franka_ros2 0.1.13" in bad["message"], bad


def test_ros1_without_definition_is_matched_by_md5(tmp_path):
    old = store(1, kept="franka_ros 0.8.2")
    n = 60
    times = [T0_NS + i * 33_333_333 for i in range(n)]
    msgs = robot_states(old, ROS1_STATE, times, motion(n, 1 / 30))
    from rosbags.rosbag1 import Writer

    path = tmp_path / "old.bag"
    with Writer(path) as w:
        conn = w.add_connection("/franka_state_controller/franka_states", ROS1_STATE, msgdef="",
                                md5sum=old.generate_msgdef(ROS1_STATE, ros_version=1)[1])
        for t, msg in msgs:
            w.write(conn, t, old.serialize_ros1(msg, ROS1_STATE))
    code, (out,) = ingest(tmp_path / "lake", str(path), "--robot", "panda")
    assert code == 0 and out["frame_count"] == n, out
    assert {"msgtype": ROS1_STATE, "origin": "kept franka_ros 0.8.2"} in run_row(out["partition"])["definitions"]
    (iv,) = intervals(tmp_path / "lake", "--period-s", str(1 / 30), "--period-tol-s", "0.005")
    assert (iv["seq_first"], iv["seq_last"]) == (0, n - 1)
    bad = tmp_path / "unknown.bag"
    with Writer(bad) as w:
        conn = w.add_connection("/franka_state_controller/franka_states", ROS1_STATE, msgdef="", md5sum="0" * 32)
        for t, msg in msgs[:5]:
            w.write(conn, t, old.serialize_ros1(msg, ROS1_STATE))
    code, (rej,) = ingest(tmp_path / "lake", str(bad), "--robot", "panda")
    assert code == 1 and "franka_ros 0.10.1, franka_ros 0.8.2" in rej["message"] and "0" * 32 in rej["message"], rej


def test_targets_from_a_command_topic_and_gains_from_the_command_line(tmp_path):
    ts = store(2)
    n = 300
    times = [T0_NS + i * MS for i in range(n)]
    m = motion(n, 0.001)
    Array = ts.types["std_msgs/msg/Float64MultiArray"]
    layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    cmd = [(T0_NS + 50 * MS + i * 10 * MS, Array(layout=layout, data=m["q"][50 + 10 * i] + 0.02)) for i in range(25)]
    bag = write_ros2(tmp_path / "commanded", ts, [
        Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, m)),
        Topic("/joint_impedance_controller/commands", "std_msgs/msg/Float64MultiArray", cmd)])
    lake = tmp_path / "lake"
    code, (out,) = ingest(lake, str(bag), "--robot", "fr3", "--target-topic", "/joint_impedance_controller/commands",
                          "--kp", "600", "600", "600", "600", "250", "150", "50", "--kd", "30")
    assert code == 0, out["message"]
    f = frames(out["partition"])
    assert f["joint_target_valid"].to_pylist()[49:51] == [0, 1]
    assert f["q_target1"].to_pylist()[70] == m["q"][70, 0] + 0.02 and f["q_target1"].to_pylist()[49] is None
    assert f["K_joint5"].to_pylist()[0] == 250.0 and f["D_joint7"].to_pylist()[0] == 30.0
    assert f["controller"].to_pylist()[49:51] == [None, 2]  # joint impedance once targets exist
    row = run_row(out["partition"])
    assert row["target_topic"] == "/joint_impedance_controller/commands" and row["gains_source"].startswith("command line")
    before, during = intervals(lake)
    assert (before["controller"], before["end_reason"]) == (None, "mode_change")
    assert (during["seq_first"], during["seq_last"], during["controller"]) == (50, n - 1, 2)
    assert (during["K_joint"][4], during["D_joint"][6]) == (250.0, 30.0)
    code, (bad,) = ingest(lake, str(bag), "--robot", "fr3", "--run", "x", "--target-topic", "/nope")
    assert code == 1 and "/nope" in bad["message"] and "/joint_states" in bad["message"], bad


def test_a_malformed_message_is_refused_naming_topic_index_and_time(tmp_path):
    ts = store(1)
    n = 50
    times = [T0_NS + i * MS for i in range(n)]
    msgs = joint_states(ts, times, FR3, motion(n, 0.001))
    t, msg = msgs[17]
    msgs[17] = (t, dataclasses.replace(msg, position=msg.position[:6]))
    path = write_ros1(tmp_path / "short.bag", ts, [Topic("/joint_states", JOINT_STATE, msgs)])
    code, (out,) = ingest(tmp_path / "lake", str(path), "--robot", "fr3")
    assert code == 1 and out["status"] == "rejected", out
    assert f"topic /joint_states: message 17 (receive time {times[17]} ns)" in out["message"]
    assert "position has 6 values for 7 joint names" in out["message"]


JTC_STATE = "control_msgs/msg/JointTrajectoryControllerState"
JTC_MSG = """std_msgs/Header header
string[] joint_names
trajectory_msgs/JointTrajectoryPoint reference
trajectory_msgs/JointTrajectoryPoint feedback
trajectory_msgs/JointTrajectoryPoint error
trajectory_msgs/JointTrajectoryPoint output
"""  # the first fields of ros-controls/control_msgs' definition (the bag carries it)


def test_a_joint_trajectory_controller_state_gives_the_targets(tmp_path):
    ts = store(2)
    ts.register(get_types_from_msg(JTC_MSG, JTC_STATE))
    n = 200
    times = [T0_NS + i * MS for i in range(n)]
    m = motion(n, 0.001)
    Point = ts.types["trajectory_msgs/msg/JointTrajectoryPoint"]
    Duration = ts.types["builtin_interfaces/msg/Duration"]
    js = joint_states(ts, times, FR3, m)
    empty = Point(positions=np.zeros(0), velocities=np.zeros(0), accelerations=np.zeros(0),
                  effort=np.zeros(0), time_from_start=Duration(sec=0, nanosec=0))
    order = [6, 5, 4, 3, 2, 1, 0]  # joint_names in another order than J1..J7
    jtc = [(t, ts.types[JTC_STATE](header=msg.header, joint_names=[FR3[j] for j in order],
                                   reference=dataclasses.replace(empty, positions=msg.position[order] + 0.05,
                                                                 velocities=msg.velocity[order]),
                                   feedback=empty, error=empty, output=empty))
           for t, msg in js[::10]]  # 100 Hz
    bag = write_ros2(tmp_path / "jtc", ts, [Topic("/joint_states", JOINT_STATE, js),
                                            Topic("/joint_trajectory_controller/controller_state", JTC_STATE, jtc)],
                     mcap=True)
    code, (out,) = ingest(tmp_path / "lake", str(bag), "--robot", "fr3")
    assert code == 0, out["message"]
    f = frames(out["partition"])
    np.testing.assert_allclose(f["q_target2"].to_numpy()[::10], m["q"][::10, 1] + 0.05)
    assert f["q_target2"].to_pylist()[15] == m["q"][10, 1] + 0.05  # the latest at or before
    assert f["controller"].null_count == n  # no gains given: the control law is not known
    row = run_row(out["partition"])
    assert [(s["role"], s["messages"], round(s["rate_hz"])) for s in row["streams"]] == [
        ("primary", n, 1000), ("target", n // 10, 100)]
    streams = pq.read_table(Path(out["partition"]) / "streams.parquet")
    assert set(streams["kind"].to_pylist()) == {"target"} and streams.num_rows == n // 10
    (iv,) = intervals(tmp_path / "lake")
    assert (iv["frame_count"], iv["controller"]) == (n, None)
