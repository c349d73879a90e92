"""The Franka robot-state messages → columns, a batch at a time.

franka_ros2 `franka_msgs/msg/FrankaRobotState` (franka_robot_state_broadcaster) and franka_ros
ROS 1 `franka_msgs/FrankaState` (franka_state_controller/franka_states), as libfranka's
`RobotState` names them:

| canonical / extra column | FrankaRobotState (ROS 2) | FrankaState (ROS 1) |
|---|---|---|
| `q`, `dq`, `tau_J` | `measured_joint_state.position/velocity/effort` | `q`, `dq`, `tau_J` |
| `q_d`, `dq_d` (extra) | `desired_joint_state.position/velocity` | `q_d`, `dq_d` |
| `tau_cmd` | `desired_joint_state.effort` (tau_J_d) | `tau_J_d` |
| `tau_ext` (extra) | `tau_ext_hat_filtered.effort` | `tau_ext_hat_filtered` |
| `ee_p*`, `ee_q*` | `o_t_ee.pose` | `O_T_EE` (4x4 column-major → position, xyzw) |
| `robot_time_s` | `time` | `time` |
| `robot_mode` (extra) | `robot_mode` | `robot_mode` |

`tau_J_d` is libfranka's desired link-side torque without gravity: what the controller
commanded, hence `tau_cmd`. All arrays are 7 long; any other length is a malformed message.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from .definitions import ROBOT_STATE_ROS1
from .joint_state import Malformed

ROS2_PATHS = ("header.stamp.sec", "header.stamp.nanosec", "header.stamp.sec",
              "measured_joint_state.position", "measured_joint_state.velocity",
              "measured_joint_state.effort", "desired_joint_state.position",
              "desired_joint_state.velocity", "desired_joint_state.effort",
              "tau_ext_hat_filtered.effort",
              "o_t_ee.pose.position.x", "o_t_ee.pose.position.y", "o_t_ee.pose.position.z",
              "o_t_ee.pose.orientation.x", "o_t_ee.pose.orientation.y",
              "o_t_ee.pose.orientation.z", "o_t_ee.pose.orientation.w",
              "time", "robot_mode")
ROS1_PATHS = ("header.stamp.sec", "header.stamp.nanosec", "header.seq",
              "q", "dq", "tau_J", "q_d", "dq_d", "tau_J_d", "tau_ext_hat_filtered",
              "O_T_EE", "time", "robot_mode")
JOINT_FIELDS = ("q", "dq", "tau_J", "q_d", "dq_d", "tau_cmd", "tau_ext")


def getter(msgtype: str) -> attrgetter:
    """One C call per message returning every field read, in the order of *_PATHS."""
    return attrgetter(*(ROS1_PATHS if msgtype == ROBOT_STATE_ROS1 else ROS2_PATHS))


def batch_columns(rows: list[tuple], msgtype: str) -> dict[str, np.ndarray]:
    """One batch of getter rows → `sec`, `nanosec`, `seq` (n,) int64; `q`, `dq`, `tau_J`,
    `q_d`, `dq_d`, `tau_cmd`, `tau_ext` (n, 7); `ee_pos` (n, 3) [m]; `ee_quat` (n, 4) xyzw;
    `robot_time_s` (n,) [s]; `robot_mode` (n,) int8."""
    cols = list(zip(*rows))
    out = {k: np.asarray(cols[i], dtype=np.int64) for i, k in enumerate(("sec", "nanosec", "seq"))}
    for name, col in zip(JOINT_FIELDS, cols[3:10]):
        out[name] = _stack(col, 7, name)
    if msgtype == ROBOT_STATE_ROS1:
        pose = _stack(cols[10], 16, "O_T_EE")
        out["ee_pos"] = pose[:, 12:15]
        out["ee_quat"] = quaternion_xyzw(pose[:, [0, 1, 2, 4, 5, 6, 8, 9, 10]].reshape(-1, 3, 3)
                                         .transpose(0, 2, 1))
        rest = cols[11:]
    else:
        out["ee_pos"] = np.column_stack([np.asarray(c, np.float64) for c in cols[10:13]])
        out["ee_quat"] = np.column_stack([np.asarray(c, np.float64) for c in cols[13:17]])
        rest = cols[17:]
    out["robot_time_s"] = np.asarray(rest[0], dtype=np.float64)
    out["robot_mode"] = np.asarray(rest[1], dtype=np.int8)
    return out


def _stack(values: tuple, width: int, name: str) -> np.ndarray:
    try:
        matrix = np.stack(values)
    except ValueError:
        matrix = None
    if matrix is None or matrix.shape[1:] != (width,):
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        i = int(np.flatnonzero(lengths != width)[0])
        raise Malformed(i, f"{name} has {lengths[i]} values, expected {width}")
    return matrix.astype(np.float64, copy=False)


def quaternion_xyzw(rot: np.ndarray) -> np.ndarray:
    """(n, 3, 3) rotation matrices → (n, 4) unit quaternions xyzw (w >= 0), vectorised
    (the largest of the four diagonal combinations picks the stable formula per row)."""
    m = rot
    t = np.stack([1 + m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2], 1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2],
                  1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2], 1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2]], 1)
    best = np.argmax(t, axis=1)
    s = 2.0 * np.sqrt(np.maximum(t[np.arange(len(m)), best], 1e-300))
    q = np.empty((len(m), 4))
    d21, d02, d10 = m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]
    s01, s02, s12 = m[:, 0, 1] + m[:, 1, 0], m[:, 0, 2] + m[:, 2, 0], m[:, 1, 2] + m[:, 2, 1]
    cases = [  # (w, x, y, z) when w, x, y or z is the largest
        (s / 4, d21 / s, d02 / s, d10 / s),
        (d21 / s, s / 4, s01 / s, s02 / s),
        (d02 / s, s01 / s, s / 4, s12 / s),
        (d10 / s, s02 / s, s12 / s, s / 4),
    ]
    for k, (qw, qx, qy, qz) in enumerate(cases):
        sel = best == k
        q[sel] = np.column_stack([qx, qy, qz, qw])[sel]
    q[q[:, 3] < 0] *= -1
    return q
