"""Hostile bags, each written by rosbags' own writer: every one is refused with one line naming
the file, the topic, the message and what was expected, or published whole; never a
traceback, never a value lost or wrong without notice."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest


from bag_writers import JOINT_STATE, T0_NS, Topic, joint_states, motion, store, write_ros2
from ingest_helpers import frames_of, refused_one_line, runs_of
from twinlake.ingest.bags import arm_run

N = 1000
NAMES = [f"fr3_joint{j}" for j in range(1, 8)]
TS = store(2)


def _times(n: int = N) -> list[int]:
    return [T0_NS + i * 1_000_000 for i in range(n)]


def _states(names=NAMES, n: int = N) -> list:
    return joint_states(TS, _times(n), names, motion(n, 0.001))


def _write_raw(path: Path, topic: str, messages: list, *, mcap: bool = False) -> Path:
    """A rosbag2 bag of one JointState topic whose messages are objects or raw CDR bytes."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    plugin = StoragePlugin.MCAP if mcap else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conn = w.add_connection(topic, JOINT_STATE, typestore=TS)
        for t, msg in messages:
            w.write(conn, t, msg if isinstance(msg, bytes) else TS.serialize_cdr(msg, JOINT_STATE))
    return path


GARBAGE = b"\x00\x01\x00\x00" + bytes(range(7))


@pytest.mark.parametrize("mcap", [False, True], ids=["sqlite3", "mcap"])
def test_a_first_message_that_does_not_decode_is_refused_naming_it(tmp_path, lake, ingest, mcap):
    msgs = _states()
    msgs[0] = (msgs[0][0], GARBAGE)
    bag = _write_raw(tmp_path / "bag", "/joint_states", msgs, mcap=mcap)
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "bag", "topic /joint_states", "message 0",
             f"receive time {T0_NS} ns", "does not decode as sensor_msgs/msg/JointState")


def _cut_last_byte(db3: Path) -> None:
    with db3.open("r+b") as fh:
        fh.truncate(db3.stat().st_size - 1)


def test_a_truncated_sqlite3_bag_is_refused_not_published_with_garbage(tmp_path, lake, ingest):
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, _states())])
    (db3,) = bag.glob("*.db3")
    _cut_last_byte(db3)
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "bag:", f"storage file {db3.name} is damaged",
             "not a whole number", "pages (truncated)")
    lone = tmp_path / "lone.db3"
    shutil.copy(db3, lone)
    shutil.rmtree(lake.root)
    refused_one_line(ingest(lone, "--robot", "fr3"), lake, "lone.db3:", "SQLite storage file is damaged")


def test_namespaces_that_become_the_same_id_are_refused_naming_both(tmp_path, lake, ingest):
    a, b = _states(), joint_states(TS, _times(700), NAMES, motion(700, 0.001, seed=1))
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/a-b/joint_states", JOINT_STATE, a),
                                            Topic("/a/b/joint_states", JOINT_STATE, b)])
    refused_one_line(ingest(bag), lake, "arms 'a-b' and 'a/b' both become run a-b/bag-a-b", "--robot-map")
    res = ingest(bag, "--robot-map", "a-b=left", "--robot-map", "a/b=right")
    assert res.exit_code == 0, res.output
    assert sorted((r["robot"], r["frame_count"]) for r in runs_of(lake)) == [("left", 1000), ("right", 700)]


def test_a_split_listed_twice_in_metadata_isrefused_one_line(tmp_path, lake, ingest):
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, _states())])
    meta = bag / "metadata.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("  - bag.db3\n", "  - bag.db3\n  - bag.db3\n", 1))
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "metadata.yaml lists bag.db3 more than once")


def test_a_message_count_unlike_the_storage_isrefused_one_line(tmp_path, lake, ingest):
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, _states())])
    meta = bag / "metadata.yaml"
    meta.write_text(meta.read_text().replace(f"message_count: {N}", f"message_count: {N - 10}"))
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "topic /joint_states",
             f"metadata.yaml lists {N - 10} messages, the storage holds {N}")


def test_a_topic_listed_with_no_messages_is_named_with_why(tmp_path, lake, ingest):
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, _states())])
    meta = bag / "metadata.yaml"
    meta.write_text(meta.read_text().replace(f"message_count: {N}", "message_count: 0"))
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "/joint_states: the bag's index lists no "
             "messages on it (message_count 0)")


@pytest.mark.parametrize("names, twice", [
    (["fr3_joint3", *NAMES], "fr3_joint3"),
    (["fr3_joint1", "fr3_joint1", *NAMES[2:]], "fr3_joint1"),
], ids=["joint3-first", "joint1-twice-no-joint2"])
def test_a_joint_named_twice_isrefused_one_line(tmp_path, lake, ingest, names, twice):
    m = {k: v[:, [2, *range(7)]][:, :len(names)] for k, v in motion(N, 0.001).items()}
    m["q"][:, 0] += 1.0  # the first fr3_joint3 is another value than the second
    msgs = joint_states(TS, _times(), names, m)
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, msgs)])
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "topic /joint_states", "message 0",
             f"names {twice} twice", "expected each joint once")


def test_joint_names_that_change_part_way_are_refused_naming_the_message(tmp_path, lake, ingest):
    msgs = _states()
    other = joint_states(TS, _times(), [f"arm_j{j}" for j in range(1, 8)], motion(N, 0.001))
    msgs[500:] = other[500:]
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, msgs)])
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "topic /joint_states", "message 500",
             f"receive time {T0_NS + 500 * 1_000_000} ns", "arm_j1", "none of the joints")


def test_a_first_message_without_names_is_refused_naming_it_not_the_topic(tmp_path, lake, ingest):
    msgs = _states()
    empty = joint_states(TS, _times(1), [], {k: np.zeros((1, 0)) for k in ("q", "dq", "tau")})
    msgs[0] = empty[0]
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, msgs)])
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "topic /joint_states", "message 0",
             "names []", "none of the joints")


def test_a_namespace_mapped_twice_is_a_usage_error(tmp_path, lake, ingest):
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/left/joint_states", JOINT_STATE, _states())])
    res = ingest(bag, "--robot-map", "left=a", "--robot-map", "left=b")
    assert res.exit_code == 2 and "'left' is given more than once" in res.output
    assert not lake.runs_dir.exists() and frames_of is not None


@pytest.mark.parametrize("frame", [10, 700])
def test_a_value_refused_in_a_bag_names_its_frame_and_time(tmp_path, lake, ingest, monkeypatch, frame):
    monkeypatch.setattr(arm_run, "CHUNK_MESSAGES", 256)  # frame 700 is in the third chunk
    m = motion(N, 0.001)
    m["q"][frame, 3] = 9.0  # far outside J4's range
    msgs = joint_states(TS, _times(), NAMES, m)
    bag = write_ros2(tmp_path / "bag", TS, [Topic("/joint_states", JOINT_STATE, msgs)])
    refused_one_line(ingest(bag, "--robot", "fr3"), lake, "field 'q4'", "outside the joint's physical limits",
             f"at frame {frame} (t_s {frame / 1000:.6f} s)")
