"""The franka_msgs robot-state definitions kept in the project, and the proof that one fits.

franka_ros2's `franka_msgs/msg/FrankaRobotState` and franka_ros's `franka_msgs/FrankaState` are
in none of rosbags' type stores. A bag that carries its definitions (MCAP, rosbag2 sqlite from
Iron on, every ROS 1 bag) is decoded with those. For one that does not (a Humble-era `.db3`),
the `.msg` texts of the public packages are kept in `msgdefs/<package>-<version>/` (their
sources: msgdefs/SOURCES.md), and a kept version is used only where it provably matches:

- ROS 1: the connection's MD5 equals the MD5 of the kept definition (`ros1_match`);
- ROS 2: every message decodes to exactly its length (the reader checks each one with
  `cdr_decoder(..., exact=True)`; a kept version is tried on the first messages first,
  `ros2_candidates`).

Otherwise the topic is refused naming the type and the versions tried (`versions_tried`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from rosbags.typesys import get_types_from_msg

ROBOT_STATE_ROS1 = "franka_msgs/msg/FrankaState"
ROBOT_STATE_ROS2 = "franka_msgs/msg/FrankaRobotState"


@dataclass(frozen=True)
class KeptDefinition:
    """One kept version of a franka_msgs package: `folder` under msgdefs/, `ros` 1 or 2, the
    robot-state type it defines and the other .msg files it needs."""

    package: str  # "franka_ros" | "franka_ros2"
    version: str
    folder: str
    ros: int
    msgtype: str
    messages: tuple[str, ...]  # .msg file stems in the folder, the robot state first

    @property
    def label(self) -> str:
        return f"{self.package} {self.version}"

    def types(self) -> dict:
        """The rosbags type dictionary of every message in the folder."""
        root = resources.files(__package__) / "msgdefs" / self.folder
        typs: dict = {}
        for stem in self.messages:
            text = (root / f"{stem}.msg").read_text(encoding="utf-8")
            typs.update(get_types_from_msg(text, f"franka_msgs/msg/{stem}"))
        return typs


KEPT: tuple[KeptDefinition, ...] = (
    KeptDefinition("franka_ros", "0.10.1", "franka_ros-0.10.1", 1, ROBOT_STATE_ROS1,
                   ("FrankaState", "Errors")),
    KeptDefinition("franka_ros", "0.8.2", "franka_ros-0.8.2", 1, ROBOT_STATE_ROS1,
                   ("FrankaState", "Errors")),
    KeptDefinition("franka_ros2", "0.1.13", "franka_ros2-0.1.13", 2, ROBOT_STATE_ROS2,
                   ("FrankaRobotState", "Errors", "Elbow", "CollisionIndicators")),
)
"""Newest first per ROS version."""


def kept_for(msgtype: str, ros: int) -> list[KeptDefinition]:
    """The kept versions defining `msgtype` for ROS `ros` (1 or 2), newest first."""
    return [k for k in KEPT if k.msgtype == msgtype and k.ros == ros]


def versions_tried(msgtype: str, ros: int) -> str:
    """'franka_ros 0.10.1, franka_ros 0.8.2' (or 'none kept') for an error message."""
    found = kept_for(msgtype, ros)
    return ", ".join(k.label for k in found) if found else "none kept"


def store_with(kept: KeptDefinition, store):
    """`store` (a fresh rosbags store of kept.ros's version) with `kept` registered."""
    store.register(kept.types())
    return store


def ros1_match(msgtype: str, md5sum: str) -> KeptDefinition | None:
    """The kept ROS 1 version whose MD5 is the connection's `md5sum`, else None."""
    from rosbags.typesys import Stores, get_typestore

    for kept in kept_for(msgtype, 1):
        store = store_with(kept, get_typestore(Stores.ROS1_NOETIC))
        if store.generate_msgdef(kept.msgtype, ros_version=1)[1] == md5sum:
            return kept
    return None
