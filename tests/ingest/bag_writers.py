"""Bags for the tests, written by real writers: rosbags' rosbag2 (sqlite3, MCAP) and rosbag1
writers, and the independent `mcap` + `mcap-ros2-support` writer.

A topic is `Topic(name, msgtype, [(receive_ns, message), ...])`; messages are rosbags
message objects built with `state_messages` / `joint_states` (a smooth 7-joint motion).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.base import Nodetype

from twinlake.ingest.bags.definitions import KEPT

ROS2_STATE = "franka_msgs/msg/FrankaRobotState"
ROS1_STATE = "franka_msgs/msg/FrankaState"
JOINT_STATE = "sensor_msgs/msg/JointState"
T0_NS = 1_700_000_000_000_000_000
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


@dataclass
class Topic:
    name: str
    msgtype: str
    messages: list  # [(receive_ns, message)]


def store(ros: int, kept: str | None = None):
    """rosbags' store of the ROS version plus a kept franka_msgs version (label)."""
    ts = get_typestore(Stores.ROS1_NOETIC if ros == 1 else Stores.ROS2_HUMBLE)
    label = kept or ("franka_ros 0.10.1" if ros == 1 else "franka_ros2 0.1.13")
    ts.register(next(k for k in KEPT if k.label == label).types())
    return ts


def zero(ts, msgtype: str):
    """A message of `msgtype` with every field zero / empty (fixed arrays of zeros)."""
    cls = ts.types[msgtype]
    values = {}
    for name, (node, desc) in ts.fielddefs[msgtype][1]:
        values[name] = _zero_field(ts, node, desc)
    return cls(**values)


def _zero_field(ts, node, desc):
    if node == Nodetype.NAME:
        return zero(ts, desc)
    if node == Nodetype.BASE:
        return "" if desc[0] == "string" else (False if desc[0] == "bool" else 0)
    inner, size = desc
    if node == Nodetype.ARRAY:
        if inner[0] == Nodetype.BASE and inner[1][0] not in ("string", "bool"):
            return np.zeros(size, dtype=inner[1][0] if inner[1][0] != "float64" else np.float64)
        return [_zero_field(ts, *inner) for _ in range(size)]
    if inner[0] == Nodetype.BASE and inner[1][0] not in ("string", "bool"):
        return np.zeros(0, dtype=np.float64 if inner[1][0] == "float64" else inner[1][0])
    return []


def motion(n: int, period_s: float, seed: int = 0) -> dict[str, np.ndarray]:
    """q, dq, tau (n, 7): sines of different frequencies about the FR3's home pose."""
    t = np.arange(n)[:, None] * period_s
    f = 0.2 + 0.1 * np.arange(7)[None, :] + 0.01 * seed
    return {"q": HOME + 0.3 * np.sin(2 * np.pi * f * t), "dq": 0.6 * np.pi * f * np.cos(2 * np.pi * f * t),
            "tau": 2.0 * np.sin(2 * np.pi * f * t + 0.5)}


def _stamp(ts, t_ns: int):
    Time = ts.types["builtin_interfaces/msg/Time"]
    return Time(sec=int(t_ns // 1_000_000_000), nanosec=int(t_ns % 1_000_000_000))


def joint_states(ts, times_ns: list[int], names: list[str], m: dict, *, stamp: bool = True,
                 seq0: int = 0) -> list:
    """[(receive_ns, JointState)]; `names` of 7 joints (or 14: two arms, m of 14 columns)."""
    Header = ts.types["std_msgs/msg/Header"]
    cls = ts.types[JOINT_STATE]
    out = []
    for i, t in enumerate(times_ns):
        hdr = {"stamp": _stamp(ts, t if stamp else 0), "frame_id": ""}
        if "seq" in {f for f, _ in ts.fielddefs["std_msgs/msg/Header"][1]}:
            hdr["seq"] = seq0 + i
        out.append((t, cls(header=Header(**hdr), name=list(names), position=m["q"][i].copy(),
                           velocity=m["dq"][i].copy(), effort=m["tau"][i].copy())))
    return out


def robot_states(ts, msgtype: str, times_ns: list[int], m: dict, seq: list[int] | None = None) -> list:
    """[(receive_ns, FrankaRobotState | FrankaState)] with q, dq, tau_J, q_d, tau_J_d,
    tau_ext, pose and robot time set from `m`."""
    out = []
    base = zero(ts, msgtype)
    for i, t in enumerate(times_ns):
        msg = dataclasses.replace(base)
        hdr = dataclasses.replace(base.header, stamp=_stamp(ts, t))
        if msgtype == ROS1_STATE:
            hdr = dataclasses.replace(hdr, seq=seq[i] if seq else i)
            pose = np.eye(4)
            pose[:3, 3] = [0.3 + 0.01 * m["q"][i, 0], 0.0, 0.5]
            msg = dataclasses.replace(msg, header=hdr, q=m["q"][i].copy(), dq=m["dq"][i].copy(),
                                      tau_J=m["tau"][i].copy(), q_d=m["q"][i] + 0.01,
                                      tau_J_d=m["tau"][i] * 0.5, tau_ext_hat_filtered=m["tau"][i] * 0.1,
                                      O_T_EE=pose.T.reshape(-1).copy(), time=i * 0.001, robot_mode=2)
        else:
            js = lambda p, v, e: dataclasses.replace(base.measured_joint_state, position=p, velocity=v, effort=e)  # noqa: E731
            pose = dataclasses.replace(base.o_t_ee, pose=dataclasses.replace(
                base.o_t_ee.pose, position=dataclasses.replace(base.o_t_ee.pose.position,
                                                               x=0.3 + 0.01 * float(m["q"][i, 0]), z=0.5),
                orientation=dataclasses.replace(base.o_t_ee.pose.orientation, w=1.0)))
            msg = dataclasses.replace(
                msg, header=hdr, measured_joint_state=js(m["q"][i].copy(), m["dq"][i].copy(), m["tau"][i].copy()),
                desired_joint_state=js(m["q"][i] + 0.01, m["dq"][i].copy(), m["tau"][i] * 0.5),
                tau_ext_hat_filtered=js(np.zeros(0), np.zeros(0), m["tau"][i] * 0.1),
                o_t_ee=pose, time=i * 0.001, robot_mode=2)
        out.append((t, msg))
    return out


def write_ros2(path: Path, ts, topics: list[Topic], *, mcap: bool = False,
               definitions: bool = True, compression: str | None = None,
               split_every: int | None = None) -> Path:
    """A rosbag2 directory by rosbags' writer (version 9). `definitions=False` writes no
    message definitions (as Humble's writer did; the type hash stays). `split_every`: a new
    bag directory part every N messages, merged into one directory with one metadata.yaml."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    plugin = StoragePlugin.MCAP if mcap else StoragePlugin.SQLITE3
    if split_every:
        return _write_split(path, ts, topics, plugin, split_every)
    with _open_writer(Writer, path, plugin, compression, CompressionMode, CompressionFormat) as w:
        conns = {t.name: _connection(w, ts, t, definitions) for t in topics}
        for t_ns, name, msg, msgtype in _merged(topics):
            w.write(conns[name], t_ns, ts.serialize_cdr(msg, msgtype))
    return path


def _open_writer(Writer, path, plugin, compression, CompressionMode, CompressionFormat):
    w = Writer(path, version=9, storage_plugin=plugin)
    if compression:
        w.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
    return w


def _connection(w, ts, t: Topic, definitions: bool):
    if definitions:
        return w.add_connection(t.name, t.msgtype, typestore=ts)
    return w.add_connection(t.name, t.msgtype, msgdef="", rihs01=ts.hash_rihs01(t.msgtype))


def _merged(topics: list[Topic]):
    rows = [(t_ns, k, t.name, msg, t.msgtype) for k, t in enumerate(topics) for t_ns, msg in t.messages]
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(r[0], r[2], r[3], r[4]) for r in rows]


def _write_split(path: Path, ts, topics: list[Topic], plugin, every: int) -> Path:
    """Split files as `ros2 bag record --max-bag-size` leaves them: one directory, files
    `<name>_0.db3`, `<name>_1.db3`, ..., one metadata.yaml listing them all (written by
    rosbags into parts, then gathered; the metadata is rosbags' with the files merged)."""
    from rosbags.rosbag2 import Writer
    from ruamel.yaml import YAML

    rows = _merged(topics)
    path.mkdir()
    infos = []
    for part, start in enumerate(range(0, len(rows), every)):
        sub = path.parent / f"{path.name}.part{part}"
        with Writer(sub, version=9, storage_plugin=plugin) as w:
            conns = {t.name: w.add_connection(t.name, t.msgtype, typestore=ts) for t in topics}
            for t_ns, name, msg, msgtype in rows[start:start + every]:
                w.write(conns[name], t_ns, ts.serialize_cdr(msg, msgtype))
        yaml = YAML(typ="safe")
        info = yaml.load((sub / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        (only,) = info["relative_file_paths"]
        new = f"{path.name}_{part}{Path(only).suffix}"
        (sub / only).rename(path / new)
        info["relative_file_paths"] = [new]
        info["files"][0]["path"] = new
        infos.append(info)
        (sub / "metadata.yaml").unlink()
        sub.rmdir()
    merged = infos[0]
    merged["relative_file_paths"] = [i["relative_file_paths"][0] for i in infos]
    merged["files"] = [i["files"][0] for i in infos]
    merged["message_count"] = sum(i["message_count"] for i in infos)
    for k, topic in enumerate(merged["topics_with_message_count"]):
        topic["message_count"] = sum(i["topics_with_message_count"][k]["message_count"] for i in infos)
    yaml = YAML()
    with (path / "metadata.yaml").open("w") as fh:
        yaml.dump({"rosbag2_bagfile_information": merged}, fh)
    return path


def write_ros1(path: Path, ts, topics: list[Topic], *, compression: str | None = None) -> Path:
    """A ROS 1 bag by rosbags' rosbag1 writer (definitions and MD5 from `ts`)."""
    from rosbags.rosbag1 import Writer

    w = Writer(path)
    if compression:
        w.set_compression(Writer.CompressionFormat[compression.upper()])
    with w:
        conns = {t.name: w.add_connection(t.name, t.msgtype, typestore=ts) for t in topics}
        for t_ns, name, msg, msgtype in _merged(topics):
            w.write(conns[name], t_ns, ts.serialize_ros1(msg, msgtype))
    return path


def write_mcap_independent(path: Path, ts, topics: list[Topic]) -> Path:
    """A lone .mcap by `mcap` + `mcap-ros2-support` (the schema text from rosbags' msg
    generator; messages encoded by mcap_ros2 from plain dicts)."""
    from mcap_ros2.writer import Writer

    with path.open("wb") as fh:
        w = Writer(fh)
        schemas = {t.msgtype: w.register_msgdef(t.msgtype, ts.generate_msgdef(t.msgtype, ros_version=2)[0])
                   for t in topics}
        for t_ns, name, msg, msgtype in _merged(topics):
            w.write_message(name, schemas[msgtype], _as_dict(msg), log_time=t_ns, publish_time=t_ns)
        w.finish()
    return path


def _as_dict(msg):
    if dataclasses.is_dataclass(msg):
        return {f.name: _as_dict(getattr(msg, f.name)) for f in dataclasses.fields(msg)
                if f.name != "__msgtype__"}
    if isinstance(msg, np.ndarray):
        return msg.tolist()
    if isinstance(msg, list):
        return [_as_dict(x) for x in msg]
    return msg


def write_state_bag(path: Path, n: int, msgtype: str = ROS2_STATE, *, mcap: bool = True,
                    copies: int = 1) -> Path:
    """A rosbag2 bag of `n` franka_ros2 robot states (or JointStates) at 1 kHz by rosbags'
    writer, quickly: one message serialised by rosbags (`robot_states`, `joint_states`), its
    stamp and measured positions rewritten per message in the serialised bytes (found by
    their values), so 100 000 messages take a second rather than the minute serialising
    each object takes. `copies` > 1: the same messages also on `/joint_state_publisher/..`
    topics of the same arm (the run's other streams)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = store(2)
    mark = {"q": np.arange(7) + 1e6 + 0.5, "dq": np.zeros(7), "tau": np.full(7, 0.25)}
    mark = {k: v[None, :] for k, v in mark.items()}
    stamp_ns = T0_NS + 0x1234_5678 * 1_000_000_000 + 0x0ABC_DEF0
    if msgtype == JOINT_STATE:
        ((_, msg),) = joint_states(ts, [stamp_ns], [f"fr3_joint{j}" for j in range(1, 8)], mark)
        topic = "/joint_states"
    else:
        ((_, msg),) = robot_states(ts, msgtype, [stamp_ns], mark)
        topic = "/franka_robot_state_broadcaster/robot_state"
    raw = bytes(ts.serialize_cdr(msg, msgtype))
    at_q = raw.index(mark["q"][0].tobytes())
    at_stamp = raw.index(np.array([stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000], "<u4").tobytes())
    block = np.tile(np.frombuffer(raw, np.uint8), (n, 1))
    times = T0_NS + np.arange(n, dtype=np.int64) * 1_000_000
    stamps = np.column_stack([times // 1_000_000_000, times % 1_000_000_000]).astype("<u4")
    block[:, at_stamp:at_stamp + 8] = stamps.view(np.uint8)
    q = motion(n, 0.001)["q"]
    block[:, at_q:at_q + 56] = np.ascontiguousarray(q).view(np.uint8)
    plugin = StoragePlugin.MCAP if mcap else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conns = [w.add_connection(topic if k == 0 else f"/joint_state_publisher{topic}_{k}",
                                  msgtype, typestore=ts) for k in range(copies)]
        for t, row in zip(times.tolist(), block):
            for conn in conns:
                w.write(conn, t, row.tobytes())
    return path
