"""Bag ingest throughput: `twinlake ingest BAG` vs rosbags alone iterating and deserialising
the same messages.

Writes a rosbag2 bag (MCAP by default, `--storage sqlite3` for a .db3) of `--minutes` of
franka_ros2 `franka_msgs/msg/FrankaRobotState` at 1 kHz (600 000 messages for the default 10
minutes) with rosbags' writer. The messages are one serialised template (rosbags'
`serialize_cdr`) whose joint arrays, pose, robot time and stamp are rewritten per message
with numpy (same layout: every message has the same names and array lengths), so the bag
is built in seconds rather than the ~hour serialising 600 000 nested messages one by one
takes on a busy machine. Then, in the same process and the same run, alternating:

  rosbags   Reader(bag).messages() and Typestore.deserialize_cdr of every message
            (the peer: the library's own per-message decoding, nothing else)
  twinlake  the whole `ingest_paths` pipeline on the bag: detection, rosbags reading and
            deserialising, columns from batches, canonical form, pandera validation, run
            stats, SHA-256 + zstd copy of the bag, Parquet, atomic publish

Each `--repeat` times; the best wall time of each is reported with messages/s, and the ratio
twinlake / rosbags in throughput (target >= 0.5) and in process CPU seconds. The 1-minute
load average is printed before and after (the machine may be shared).

    python bench/ingest_bag.py [--minutes 10] [--repeat 1] [--storage mcap|sqlite3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.base import Nodetype

from twinlake.catalog import Lake
from twinlake.ingest.bags.definitions import KEPT, ROBOT_STATE_ROS2
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions

TOPIC = "/franka_robot_state_broadcaster/robot_state"
T0_NS = 1_700_000_000_000_000_000
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
CHUNK = 50_000


def franka_store():
    ts = get_typestore(Stores.ROS2_HUMBLE)
    ts.register(next(k for k in KEPT if k.msgtype == ROBOT_STATE_ROS2).types())
    return ts


def _zero(ts, msgtype):
    vals = {}
    for name, (node, desc) in ts.fielddefs[msgtype][1]:
        if node == Nodetype.NAME:
            vals[name] = _zero(ts, desc)
        elif node == Nodetype.BASE:
            vals[name] = "" if desc[0] == "string" else (False if desc[0] == "bool" else 0)
        elif node == Nodetype.ARRAY and desc[0][0] == Nodetype.BASE and desc[0][1][0] == "float64":
            vals[name] = np.zeros(desc[1])
        elif node == Nodetype.ARRAY:
            vals[name] = [_zero(ts, desc[0][1]) if desc[0][0] == Nodetype.NAME else 0] * desc[1]
        else:
            vals[name] = np.zeros(0) if desc[0][0] == Nodetype.BASE and desc[0][1][0] == "float64" else []
    return ts.types[msgtype](**vals)


def template(ts) -> tuple[bytes, dict[str, int]]:
    """A serialised robot state with recognisable values, and the byte offset of each field
    rewritten per message (found by searching the serialised sentinels)."""
    base = _zero(ts, ROBOT_STATE_ROS2)
    names = [f"fr3_joint{j}" for j in range(1, 8)]
    mark = {k: np.arange(7) + 1e6 * (i + 1) + 0.5 for i, k in enumerate(("q", "dq", "tau", "qd", "dqd", "taud", "ext"))}
    js = lambda p, v, e: dataclasses.replace(base.measured_joint_state, name=names, position=p, velocity=v, effort=e)  # noqa: E731
    stamp = dataclasses.replace(base.header.stamp, sec=0x12345678, nanosec=0x0ABCDEF0)
    pos = dataclasses.replace(base.o_t_ee.pose.position, x=9.25e7, y=0.0, z=9.5e7)
    msg = dataclasses.replace(
        base, header=dataclasses.replace(base.header, stamp=stamp),
        measured_joint_state=js(mark["q"], mark["dq"], mark["tau"]),
        desired_joint_state=js(mark["qd"], mark["dqd"], mark["taud"]),
        tau_ext_hat_filtered=js(np.zeros(0), np.zeros(0), mark["ext"]),
        o_t_ee=dataclasses.replace(base.o_t_ee, pose=dataclasses.replace(
            base.o_t_ee.pose, position=pos, orientation=dataclasses.replace(base.o_t_ee.pose.orientation, w=1.0))),
        time=8.75e7, robot_mode=2)
    raw = bytes(ts.serialize_cdr(msg, ROBOT_STATE_ROS2))
    where = {k: raw.index(v.tobytes()) for k, v in mark.items()}
    where["stamp"] = raw.index(struct.pack("<iI", 0x12345678, 0x0ABCDEF0))
    for k, v in (("x", 9.25e7), ("z", 9.5e7), ("time", 8.75e7)):
        where[k] = raw.index(struct.pack("<d", v))
    return raw, where


def messages(raw: bytes, where: dict[str, int], start: int, n: int) -> np.ndarray:
    """(n, len(raw)) uint8: the template with messages start..start+n's values."""
    block = np.tile(np.frombuffer(raw, np.uint8), (n, 1))
    i = np.arange(start, start + n)
    t = i[:, None] * 1e-3
    f = 0.2 + 0.1 * np.arange(7)[None, :]
    q = HOME + 0.3 * np.sin(2 * np.pi * f * t)
    dq = 0.6 * np.pi * f * np.cos(2 * np.pi * f * t)
    tau = 2.0 * np.sin(2 * np.pi * f * t + 0.5)

    def put(key, values):
        values = np.ascontiguousarray(values, np.float64).reshape(n, -1)
        block[:, where[key]:where[key] + values.shape[1] * 8] = values.view(np.uint8)

    for key, values in (("q", q), ("dq", dq), ("tau", tau), ("qd", q + 0.01), ("dqd", dq),
                        ("taud", 0.5 * tau), ("ext", 0.1 * tau), ("x", 0.3 + 0.01 * q[:, 0]),
                        ("z", np.full(n, 0.5)), ("time", i * 1e-3)):
        put(key, values)
    stamp_ns = T0_NS + i * 1_000_000
    stamps = np.empty((n, 2), "<u4")
    stamps[:, 0], stamps[:, 1] = stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000
    block[:, where["stamp"]:where["stamp"] + 8] = stamps.view(np.uint8)
    return block


def write_bag(path: Path, n: int, storage: str) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = franka_store()
    raw, where = template(ts)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conn = w.add_connection(TOPIC, ROBOT_STATE_ROS2, typestore=ts)
        for start in range(0, n, CHUNK):
            block = messages(raw, where, start, min(CHUNK, n - start))
            for k, row in enumerate(block):
                w.write(conn, T0_NS + (start + k) * 1_000_000, row.tobytes())


def rosbags_alone(path: Path) -> int:
    """The peer: iterate and deserialise every message with rosbags, nothing else."""
    from rosbags.rosbag2 import Reader

    ts = franka_store()
    count = 0
    with Reader(path) as reader:
        for conn, _, raw in reader.messages():
            ts.deserialize_cdr(raw, conn.msgtype)
            count += 1
    return count


def twinlake_ingest(path: Path, lake_dir: Path) -> int:
    shutil.rmtree(lake_dir, ignore_errors=True)
    (out,) = ingest_paths(Lake(lake_dir), [path], ReadOptions(robot="fr3", run="bench"))
    assert out.status == "published", out.message
    return out.frame_count


def timed(fn, *args):
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn(*args)
    return time.perf_counter() - w0, time.process_time() - c0, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    ap.add_argument("--keep", type=Path, default=None, help="Keep the bag and lake here.")
    args = ap.parse_args()
    n = int(args.minutes * 60_000)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-bag-"))
    work.mkdir(parents=True, exist_ok=True)
    bag = work / f"robot_state_{n}"
    print(f"load (1 min) before: {os.getloadavg()[0]:.1f}")
    if not bag.exists():
        w, _, _ = timed(write_bag, bag, n, args.storage)
        print(f"wrote {n} messages ({args.storage}, {sum(p.stat().st_size for p in bag.iterdir()) / 1e6:.0f} MB) in {w:.1f} s")
    best = {"rosbags": (float("inf"), 0.0), "twinlake": (float("inf"), 0.0)}
    for r in range(args.repeat):
        for name, fn, fargs in (("rosbags", rosbags_alone, (bag,)),
                                ("twinlake", twinlake_ingest, (bag, work / "lake"))):
            wall, cpu, count = timed(fn, *fargs)
            assert count == n, (name, count, n)
            print(f"round {r}: {name:8s} {wall:7.1f} s wall, {cpu:7.1f} s CPU, {n / wall:9.0f} messages/s")
            if wall < best[name][0]:
                best[name] = (wall, cpu)
    (pw, pc), (tw, tc) = best["rosbags"], best["twinlake"]
    print(f"ratio twinlake/rosbags (throughput, best wall): {pw / tw:.2f}x; CPU: {pc / tc:.2f}x "
          f"(target >= 0.5)")
    print(f"load (1 min) after: {os.getloadavg()[0]:.1f}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
