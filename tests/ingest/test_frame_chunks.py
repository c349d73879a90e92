"""A CSV v2 ingested a chunk at a time (`recording_csv.frame_chunks`, `frame_stream`) gives the
bytes and the run row of the same file ingested whole: stale repeats, seq gaps, controller
switches and gain changes across chunk boundaries count once; a line the compiled reader
declines mid-file, and an error there, are read and named as in a whole read. The same for a
mapped CSV read in blocks and a bag built a chunk of messages at a time."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from bag_writers import (JOINT_STATE, ROS1_STATE, ROS2_STATE, T0_NS, Topic, joint_states, motion,
                         robot_states, store, write_ros1, write_ros2)
from twinlake.catalog import Lake
from twinlake.ingest import decimal_csv, frame_stream
from twinlake.ingest.fr3_stack import recording_csv
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions
from twinlake.ingest.samples import SampleSpec, write_sample

ROWS = 2000
FR3 = [f"fr3_joint{j}" for j in range(1, 8)]
REPEATED = [f"{p}{j}" for p in ("q", "dq", "tau_J") for j in range(7)]


def _recording(path, *, stale_every: int = 37, gain_at: int = 1277):
    """A sample with gaps, an idle lead-in, NaN torques, a stale repeat every `stale_every`
    rows (q, dq, tau_J of the row before) and one gain change."""
    write_sample(path, SampleSpec(rows=ROWS, seed=5, gap_at=(400, 1500), idle_rows=120,
                                  nan_tau_rows=(9, 1822)))
    lines = path.read_text().split("\n")
    header = lines[0].split(",")
    cols = [header.index(c) for c in REPEATED]
    k = header.index("K_joint2")
    for i in range(2, ROWS + 1):
        cells = lines[i].split(",")
        if i % stale_every == 0:
            before = lines[i - 1].split(",")
            for c in cols:
                cells[c] = before[c]
        if i >= gain_at + 1 and float(cells[k]) > 0:
            cells[k] = "123.5"
        lines[i] = ",".join(cells)
    path.write_text("\n".join(lines))
    return path


def _ingest(path, lake_dir, monkeypatch, chunk_bytes: int, group_rows: int):
    decimal_csv.kernels()  # the compiled reader is loaded: frame_chunks uses it
    monkeypatch.setattr(recording_csv, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(frame_stream, "ROW_GROUP_ROWS", group_rows)
    return list(ingest_paths(Lake(lake_dir), [path], ReadOptions(robot="r")))


def _run_dir(lake_dir, run):
    return lake_dir / "runs" / "robot=r" / f"run={run}"


def test_chunks_give_the_whole_read_bytes_and_run_row(tmp_path, monkeypatch):
    path = _recording(tmp_path / "rec.csv")
    [whole] = _ingest(path, tmp_path / "whole", monkeypatch, 1 << 30, 700)
    [chunked] = _ingest(path, tmp_path / "chunked", monkeypatch, 1 << 16, 700)
    assert whole.status == chunked.status == "published", (whole.message, chunked.message)
    a, b = _run_dir(tmp_path / "whole", "rec"), _run_dir(tmp_path / "chunked", "rec")
    assert (a / "frames.parquet").read_bytes() == (b / "frames.parquet").read_bytes()
    assert pq.read_metadata(b / "frames.parquet").num_row_groups == 3
    row_a, row_b = (pq.read_table(d / "run.parquet").to_pylist()[0] for d in (a, b))
    assert row_a == row_b
    assert row_a["stale_frames"] > 0 and row_a["gap_count"] == 2 and row_a["gain_changes"] == 1
    assert row_a["controller_switches"] == 1 and row_a["nan_tau_J"] == 2


def test_a_line_the_compiled_reader_declines_mid_file_is_read_the_general_way(tmp_path, monkeypatch):
    path = _recording(tmp_path / "rec.csv")
    lines = path.read_text().split("\n")
    cells = lines[1700].split(",")
    cells[lines[0].split(",").index("dq3")] = "1e-300"  # beyond the compiled reader's exact range
    lines[1700] = ",".join(cells)
    path.write_text("\n".join(lines))
    [whole] = _ingest(path, tmp_path / "whole", monkeypatch, 1 << 30, 700)
    [chunked] = _ingest(path, tmp_path / "chunked", monkeypatch, 1 << 16, 700)
    assert chunked.status == "published", chunked.message
    a, b = _run_dir(tmp_path / "whole", "rec"), _run_dir(tmp_path / "chunked", "rec")
    assert (a / "frames.parquet").read_bytes() == (b / "frames.parquet").read_bytes()


@pytest.mark.parametrize("chunk_bytes", [1 << 30, 1 << 16])
def test_an_error_late_in_the_file_names_its_line(tmp_path, monkeypatch, chunk_bytes):
    path = _recording(tmp_path / "rec.csv")
    lines = path.read_text().split("\n")
    cells = lines[1900].split(",")
    cells[6] = "abc"
    lines[1900] = ",".join(cells)
    path.write_text("\n".join(lines))
    [out] = _ingest(path, tmp_path / "lake", monkeypatch, chunk_bytes, 700)
    assert out.status == "rejected" and "rec.csv:1901:" in out.message, out.message
    assert not (tmp_path / "lake" / "runs").exists()


def test_a_mapped_csv_in_blocks_gives_the_whole_read_bytes_and_run_row(tmp_path, monkeypatch):
    """The mapped reader's blocks (time column first, for the grid's median period): the same
    frames.parquet and run row as one read, an empty cell named once with its first line."""
    from twinlake.ingest.mapped import reader as mapped

    path = _recording(tmp_path / "rec.csv")
    lines = path.read_text().split("\n")
    header = lines[0].split(",")
    for i in (700, 1600):
        cells = lines[i].split(",")
        cells[header.index("dq2")] = ""
        lines[i] = ",".join(cells)
    path.write_text("\n".join(lines))
    mapping = tmp_path / "map.toml"
    mapping.write_text('[time]\ncolumn = "t_s"\nunit = "s"\n\n[columns]\nq = "q{i}"\n'
                       'dq = "dq{i}"\ntau_measured = "tau_J{i}"\n')
    outcomes = []
    for name, block in (("whole", 1 << 30), ("blocks", 1 << 16)):
        monkeypatch.setattr(mapped, "CHUNK_BYTES", block)
        monkeypatch.setattr(frame_stream, "ROW_GROUP_ROWS", 700)
        outcomes += ingest_paths(Lake(tmp_path / name), [path], ReadOptions(robot="r", mapping=mapping))
    assert [o.status for o in outcomes] == ["published"] * 2, [o.message for o in outcomes]
    a, b = _run_dir(tmp_path / "whole", "rec"), _run_dir(tmp_path / "blocks", "rec")
    assert (a / "frames.parquet").read_bytes() == (b / "frames.parquet").read_bytes()
    row_a, row_b = (pq.read_table(d / "run.parquet").to_pylist()[0] for d in (a, b))
    assert row_a == row_b and row_a["tick_grid"] == "rebuilt"
    assert "column 'dq2': 2 empty cells, first at line 701, stored as null (not recorded)" in row_a["reasons"]


def _bag(tmp_path, ros: int):
    """A robot-state bag with a JointState beside it, a stale repeat at message 600, a NaN
    torque; ROS 1: a lost message (a seq gap); ROS 2: a command topic from message 50."""
    n, lost = 1500, 1234
    keep = [i for i in range(n) if ros == 2 or i != lost]
    times = [T0_NS + i * 1_000_000 for i in keep]
    m = {k: v[keep].copy() for k, v in motion(n, 0.001).items()}
    for k in m:
        m[k][600] = m[k][599]
    m["tau"][400, 2] = np.nan
    ts = store(ros)
    state = ROS1_STATE if ros == 1 else ROS2_STATE
    topics = [Topic("/franka_state_controller/franka_states" if ros == 1 else
                    "/franka_robot_state_broadcaster/robot_state", state,
                    robot_states(ts, state, times, m, seq=keep if ros == 1 else None)),
              Topic("/joint_states", JOINT_STATE, joint_states(ts, times, FR3, m))]
    if ros == 1:
        return write_ros1(tmp_path / "rec.bag", ts, topics)
    Array = ts.types["std_msgs/msg/Float64MultiArray"]
    layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    topics.append(Topic("/cmd", "std_msgs/msg/Float64MultiArray",
                        [(times[i], Array(layout=layout, data=m["q"][i] + 0.02)) for i in range(50, n - 5, 10)]))
    return write_ros2(tmp_path / "rec", ts, topics, mcap=True)


@pytest.mark.parametrize("ros", [1, 2])
def test_a_bag_in_chunks_gives_the_whole_read_bytes_and_run_row(tmp_path, monkeypatch, ros):
    """A bag's frames built a chunk of messages at a time from the spilled columns
    (`bags.arm_run`): the bytes of frames.parquet, streams.parquet and run.parquet of one
    whole chunk."""
    from twinlake.ingest.bags import arm_run, decoding

    bag = _bag(tmp_path, ros)
    options = ReadOptions(robot="r", target_topic=None if ros == 1 else "/cmd",
                          kp=(600.0,) * 7, kd=(30.0,) * 7)
    monkeypatch.setattr(frame_stream, "ROW_GROUP_ROWS", 700)
    outs = []
    for chunk, batch in ((1 << 30, 8192), (300, 128)):
        monkeypatch.setattr(arm_run, "CHUNK_MESSAGES", chunk)
        monkeypatch.setattr(decoding, "BATCH_MESSAGES", batch)
        outs += ingest_paths(Lake(tmp_path / f"lake{chunk}"), [bag], options)
    assert [o.status for o in outs] == ["published"] * 2, [o.message for o in outs]
    a, b = (_run_dir(tmp_path / f"lake{c}", "rec") for c in (1 << 30, 300))
    for name in ("frames.parquet", "streams.parquet", "run.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    row = pq.read_table(a / "run.parquet").to_pylist()[0]
    assert row["stale_frames"] == 1 and row["nan_tau_J"] == 1
    assert row["gap_count"] == (1 if ros == 1 else 0)
    assert row["seq_source"] == ("header.seq" if ros == 1 else "message index")
    if ros == 2:  # joint impedance from the first command on
        frames = pq.read_table(a / "frames.parquet", columns=["controller", "q_target1"])
        assert frames["controller"].null_count == 50 and frames["q_target1"].null_count == 50
