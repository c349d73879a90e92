"""The bag's topics as streams twinlake reads, and the arms (runs) they belong to.

A stream is one topic of a known kind: `joint_state` (`sensor_msgs/msg/JointState`, any
topic), `robot_state` (franka_ros2 `franka_msgs/msg/FrankaRobotState`, franka_ros
`franka_msgs/FrankaState`), `target` (a `control_msgs/.../JointTrajectoryControllerState`,
or the `std_msgs/msg/Float64MultiArray` topic named with `--target-topic`). Every other topic
is listed as not ingested, with why.

Arms: a state stream's namespace is its topic's directory without the publishing node's name
(`/left/franka_robot_state_broadcaster/robot_state` → `left`, `/joint_states` → ``); a
JointState topic whose joint names carry two arms' prefixes (`left_fr3_joint1`,
`right_fr3_joint1`) gives one arm per prefix (`joint_state.arm_joints`). One arm, one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .definitions import ROBOT_STATE_ROS1, ROBOT_STATE_ROS2

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
JTC_STATES = ("control_msgs/msg/JointTrajectoryControllerState",)
ROBOT_STATES = (ROBOT_STATE_ROS2, ROBOT_STATE_ROS1)
STATE_NODES = frozenset({"franka_robot_state_broadcaster", "franka_state_controller",
                         "joint_state_broadcaster", "joint_state_publisher"})
"""Publishing nodes whose name is not part of an arm's namespace."""


@dataclass
class Stream:
    """One topic read as `kind`; `arm_keys` the arms it feeds (a JointState topic may feed
    several, each with its own joint columns)."""

    topic: str
    msgtype: str
    kind: str  # joint_state | robot_state | target
    connections: list[Any]
    count: int
    namespace: str
    arm_keys: list[str] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)  # arm key → joint-name arm key


def topic_namespace(topic: str) -> str:
    """`/left/franka_state_controller/joint_states` → `left`; `/joint_states` → ``."""
    parts = [p for p in topic.split("/") if p][:-1]
    while parts and parts[-1] in STATE_NODES:
        parts.pop()
    return "/".join(parts)


def classify(connections: list[Any], target_topic: str | None,
             undecodable: dict[str, str]) -> tuple[list[Stream], list[dict[str, str]]]:
    """(streams, not_ingested): each topic as a Stream, or a {topic, msgtype, reason} row."""
    by_topic: dict[str, list[Any]] = {}
    for c in connections:
        by_topic.setdefault(c.topic, []).append(c)
    streams, skipped = [], []
    for topic, conns in sorted(by_topic.items()):
        msgtype = conns[0].msgtype
        count = sum(c.msgcount for c in conns)
        kind = _kind(topic, msgtype, target_topic)
        if len({c.msgtype for c in conns}) > 1:
            skipped.append(_row(topic, msgtype, "several message types on one topic"))
        elif msgtype in undecodable:
            skipped.append(_row(topic, msgtype, f"unknown type: {undecodable[msgtype]}"))
        elif kind is None:
            skipped.append(_row(topic, msgtype, "not a stream twinlake reads"))
        elif not count:
            skipped.append(_row(topic, msgtype, "the bag's index lists no messages on it "
                                "(message_count 0)"))
        else:
            streams.append(Stream(topic, msgtype, kind, conns, count, topic_namespace(topic)))
    return streams, skipped


def _kind(topic: str, msgtype: str, target_topic: str | None) -> str | None:
    if msgtype == JOINT_STATE:
        return "joint_state"
    if msgtype in ROBOT_STATES:
        return "robot_state"
    if msgtype in JTC_STATES:
        return "target"
    if target_topic is not None and topic == target_topic and msgtype == FLOAT64_ARRAY:
        return "target"
    return None


def _row(topic: str, msgtype: str, reason: str) -> dict[str, str]:
    return {"topic": topic, "msgtype": msgtype, "reason": reason}


@dataclass
class Arm:
    """The streams of one run: the primary state stream (frames), the other state streams,
    and the target streams."""

    key: str
    primary: Stream
    others: list[Stream]
    targets: list[Stream]


def group_arms(streams: list[Stream]) -> dict[str, Arm]:
    """Arms by key; the primary is the arm's robot state (most messages), else its JointState
    topic with the most messages. Targets join the arm whose key starts their topic's
    namespace, else the only arm, else the root arm."""
    state: dict[str, list[Stream]] = {}
    for s in streams:
        if s.kind != "target":
            for key in s.arm_keys or [s.namespace]:
                state.setdefault(key, []).append(s)
    arms: dict[str, Arm] = {}
    for key, members in sorted(state.items()):
        primary = max(members, key=lambda s: (s.kind == "robot_state", s.count, s.topic))
        arms[key] = Arm(key, primary, [s for s in members if s is not primary], [])
    for s in streams:
        if s.kind == "target" and arms:
            ns = topic_namespace(s.topic)
            owner = next((k for k in sorted(arms, key=len, reverse=True) if k and
                          (ns == k or ns.startswith(k + "/"))), None)
            if owner is None:
                owner = next(iter(arms)) if len(arms) == 1 else ("" if "" in arms else None)
            if owner is not None:
                arms[owner].targets.append(s)
    return arms
