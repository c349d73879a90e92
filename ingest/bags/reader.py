"""The bag reader (`ros_bag`): ROS 1 and ROS 2 bags, read with rosbags, one run per arm.

`detect` matches a rosbag2 directory, a lone `.mcap` or `.db3`, or a ROS 1 `.bag` by content
(`bagfile.bag_kind`). `run_selections` names the bag's arms (one run each: `--robot-map
ns=id` names their robots); `read` reads one arm (`ReadOptions.select`). Topics it cannot use
are listed in the run (`topics_not_ingested`, flag `topics_not_ingested`); a robot-state topic
it cannot decode refuses the bag (its data would be missing from the run without notice).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pyarrow as pa

from ..registry import Detection, IngestError, IngestUnit, ReadOptions, register
from .arm_run import build_arm_run
from .bagfile import OpenBag, bag_files, bag_kind
from .decoding import decode_streams
from .definitions import versions_tried
from .joint_state import arm_joints, duplicate_joints
from .spill import SpillDir
from .topics import ROBOT_STATES, Arm, Stream, classify, group_arms

SOURCE_FORMAT = "ros_bag"


class BagReader:
    """ROS 1 / ROS 2 bags (rosbags)."""

    name = SOURCE_FORMAT

    def detect(self, path: Path) -> Detection:
        kind, why = bag_kind(path)
        return Detection(True, why) if kind else Detection.no(why)

    def run_selections(self, path: Path, options: ReadOptions) -> list[ReadOptions]:
        """One ReadOptions per arm, `select` set to its key, robot and run ids chosen."""
        with _open(path) as bag:
            arms, _ = _arms(bag, options)
        _check_robot_map(path, options, arms)
        chosen = [dataclasses.replace(options, select=key, robot=_robot(options, key),
                                      run=_run_id(path, options, key, len(arms)))
                  for key in arms]
        _check_distinct(path, chosen)
        return chosen

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        """One arm's run; its frames come a chunk at a time (`IngestUnit.more_frames`)."""
        kind, _ = bag_kind(path)
        spills = SpillDir()
        try:
            with _open(path) as bag:
                arms, skipped = _arms(bag, options)
                arm = _chosen(path, arms, options.select)
                decoded = decode_streams(bag, [arm.primary, *arm.others, *arm.targets], spills)
                _check_counts(bag, decoded)
                built = build_arm_run(arm, decoded, bag.ros, _values(options.kp),
                                      _values(options.kd), spills)
                fields = built.fields | {
                    "source_format": SOURCE_FORMAT, "source_version": bag.ros,
                    "source_file": path.name, "bag_storage": bag.storage,
                    "bag_compression": bag.compression, "arm_namespace": arm.key,
                    "definitions": [{"msgtype": t, "origin": s.origin}
                                    for t, s in sorted(bag.types.items())],
                    "topics_not_ingested": skipped}
        except BaseException:
            spills.cleanup()
            raise
        reasons, flags = _notes(skipped, fields, arm)
        fields = _typed(fields)
        robot = options.robot if options.select is not None else _robot(options, arm.key)
        run = options.run if options.select is not None else _run_id(path, options, arm.key, 1)
        streams = built.streams
        return IngestUnit(robot=robot, run=run, frames=built.frames, raw_files=bag_files(path, kind),
                          run_fields=fields, reasons=reasons, flags=flags,
                          extra_chunks={"streams": streams} if streams is not None else {},
                          more_frames=built.more_frames)


_STR = pa.string()
FIELD_TYPES: dict[str, pa.DataType] = {
    "bag_storage": _STR, "bag_compression": _STR, "arm_namespace": _STR, "primary_topic": _STR,
    "target_topic": _STR, "time_source": _STR, "seq_source": _STR, "gains_source": _STR,
    "time_origin_ns": pa.int64(),
    "streams": pa.list_(pa.struct([("topic", _STR), ("kind", _STR), ("role", _STR),
                                   ("msgtype", _STR), ("messages", pa.int64()),
                                   ("rate_hz", pa.float64()), ("time_source", _STR)])),
    "definitions": pa.list_(pa.struct([("msgtype", _STR), ("origin", _STR)])),
    "topics_not_ingested": pa.list_(pa.struct([("topic", _STR), ("msgtype", _STR), ("reason", _STR)])),
}
"""The run fields of a bag run, typed (an empty list or a null keeps its type, so every bag
run's run.parquet has the same schema)."""


def _typed(fields: dict) -> dict:
    return {k: pa.scalar(v, type=FIELD_TYPES[k]) if k in FIELD_TYPES else v for k, v in fields.items()}


def _open(path: Path) -> OpenBag:
    kind, why = bag_kind(path)
    if kind is None:
        raise IngestError(path, why)
    return OpenBag(path, kind)


def _arms(bag: OpenBag, options: ReadOptions) -> tuple[dict[str, Arm], list[dict[str, str]]]:
    """The bag's arms and the topics not ingested; refuses a bag whose robot-state topic
    cannot be decoded, a --target-topic it lacks, or a bag with no state stream."""
    streams, skipped = classify(bag.connections, options.target_topic, bag.undecodable)
    for row in skipped:
        if row["msgtype"] in ROBOT_STATES:
            raise IngestError(bag.path, f"topic {row['topic']}: {row['msgtype']} cannot be decoded "
                              f"({bag.undecodable.get(row['msgtype'], row['reason'])}; kept "
                              f"versions: {versions_tried(row['msgtype'], bag.ros)})",
                              field=row["topic"])
    if options.target_topic and not any(s.topic == options.target_topic for s in streams):
        have = ", ".join(f"{c.topic} ({c.msgtype})" for c in bag.connections)
        raise IngestError(bag.path, f"--target-topic {options.target_topic}: no such "
                          f"std_msgs/msg/Float64MultiArray topic in the bag (topics: {have})")
    usable = []
    for s in streams:
        if s.kind == "joint_state" and not _joint_arms(bag, s):
            skipped.append({"topic": s.topic, "msgtype": s.msgtype,
                            "reason": "names no arm joints (<prefix>joint1..7)"})
            continue
        usable.append(s)
    arms = group_arms(usable)
    if not arms:
        have = ", ".join(f"{c.topic} ({c.msgtype})" for c in bag.connections) or "none"
        why = "".join(f"; {r['topic']}: {r['reason']}" for r in skipped)
        raise IngestError(bag.path, "no robot state stream: expected a sensor_msgs/msg/JointState "
                          "topic naming arm joints or a franka_msgs robot state (topics: "
                          f"{have}{why})")
    attached = {id(s) for a in arms.values() for s in [a.primary, *a.others, *a.targets]}
    skipped += [{"topic": s.topic, "msgtype": s.msgtype, "reason": "belongs to no arm"}
                for s in usable if id(s) not in attached]
    return arms, skipped


def _joint_arms(bag: OpenBag, s: Stream) -> bool:
    """Set the arm keys of a JointState stream from the names of its first message that names
    arm joints (among its first `NAMING_MESSAGES`): a first message that names none is then
    refused by the decoding, naming it, rather than the whole topic being left out."""
    decode = bag.decoder(s.msgtype)
    joints: dict[str, list[int]] = {}
    for i, (_, t, raw) in enumerate(bag.messages(s.connections)):
        try:
            names = tuple(decode(raw).name)
        except Exception as exc:  # the library's SerdeError
            raise IngestError(bag.path, f"topic {s.topic}: message {i} (receive time {t} ns) "
                              f"does not decode as {s.msgtype}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}",
                              field=s.topic) from None
        duplicated = duplicate_joints(names)
        if duplicated:
            raise IngestError(bag.path, f"topic {s.topic}: message {i} (receive time {t} ns) "
                              f"names {duplicated} twice (names {list(names)}): expected each "
                              "joint once", field=s.topic)
        joints = arm_joints(names)
        if joints or i + 1 >= NAMING_MESSAGES:
            break
    if len(joints) == 1:
        s.arm_keys, s.prefixes = [s.namespace], {s.namespace: next(iter(joints))}
    else:
        s.prefixes = {"/".join(p for p in (s.namespace, j) if p): j for j in sorted(joints)}
        s.arm_keys = list(s.prefixes)
    return bool(joints)


NAMING_MESSAGES = 16
"""How many first messages of a JointState topic are searched for its arms' joint names."""


def _chosen(path: Path, arms: dict[str, Arm], select: str | None) -> Arm:
    if select is None and len(arms) == 1:
        return next(iter(arms.values()))
    if select in arms:
        return arms[select]
    raise IngestError(path, f"the bag holds arms {', '.join(repr(k) for k in arms)}; "
                      f"{'choose one' if select is None else f'not {select!r}'} (one run per arm)")


def _check_counts(bag: OpenBag, decoded: dict) -> None:
    """Refuse a stream whose messages are not as many as the bag's index says (a rosbag2
    directory: its metadata.yaml; a split file listed twice, or missing messages)."""
    for topic, d in decoded.items():
        if len(d.receive_ns) != d.stream.count:
            where = "metadata.yaml" if bag.kind == "rosbag2_dir" else "the bag's index"
            raise IngestError(bag.path, f"topic {topic}: {where} lists {d.stream.count} "
                              f"messages, the storage holds {len(d.receive_ns)}: expected the "
                              "same (a split file listed twice or missing, or a damaged bag)",
                              field=topic)


def _check_distinct(path: Path, chosen: list[ReadOptions]) -> None:
    """Refuse arms whose namespaces become the same robot/run ids (`/a-b` and `/a/b`): the
    second would be taken for the first, already ingested."""
    seen: dict[tuple, str] = {}
    for o in chosen:
        key = (o.robot, o.run)
        if key in seen:
            raise IngestError(path, f"arms {seen[key]!r} and {o.select!r} both become run "
                              f"{o.robot}/{o.run}: name them apart with --robot-map NS=ID",
                              kind="usage")
        seen[key] = o.select


def _check_robot_map(path: Path, options: ReadOptions, arms: dict[str, Arm]) -> None:
    names = [ns for ns, _ in options.robot_map]
    twice = sorted({ns for ns in names if names.count(ns) > 1})
    if twice:
        raise IngestError(path, f"--robot-map names {', '.join(map(repr, twice))} more than once: "
                          "expected one NS=ID per arm", kind="usage")
    unknown = [ns for ns, _ in options.robot_map if ns not in arms]
    if unknown:
        raise IngestError(path, f"--robot-map names {', '.join(map(repr, unknown))}; the bag's "
                          f"arms (namespaces) are {', '.join(repr(k) for k in arms)}",
                          kind="usage")


def _robot(options: ReadOptions, key: str) -> str | None:
    mapped = dict(options.robot_map).get(key)
    if mapped is not None:
        return mapped
    if options.robot is not None or not key:
        return options.robot
    return _safe_id(key)


def _run_id(path: Path, options: ReadOptions, key: str, arms: int) -> str:
    base = options.run or (path.name if path.is_dir() else path.stem)
    return f"{base}-{_safe_id(key)}" if arms > 1 and key else base


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.") or "arm"


def _values(values: tuple[float, ...] | None) -> list[float] | None:
    return list(values) if values else None


def _notes(skipped: list[dict[str, str]], fields: dict, arm: Arm) -> tuple[list[str], list[str]]:
    """Reasons (sentences) and flags of the run."""
    reasons = [f"topic {r['topic']} ({r['msgtype']}) not ingested: {r['reason']}" for r in skipped]
    reasons.append(f"time from {fields['time_source']} of {arm.primary.topic}; seq from "
                   f"{fields['seq_source']}")
    flags = ["topics_not_ingested"] if skipped else []
    return reasons, flags


register(BagReader())
