"""Commanded joint targets from a bag, a batch at a time.

- `control_msgs/msg/JointTrajectoryControllerState` (a joint trajectory controller's state):
  `reference` (ROS 2 control_msgs >= 4; `desired` in older ones and ROS 1) positions →
  `q_target`, velocities → `dq_target`, joints matched by `joint_names` as for JointState.
- the `std_msgs/msg/Float64MultiArray` topic named with `--target-topic`: `data` (7 values,
  J1..J7, rad) → `q_target`; it has no header, so its time is the bag's receive time.

The frames get the latest target at or before each frame's time (`q_target1..7`,
`joint_target_valid` 1 once a target exists); every target message is also a row of the
run's `streams` table.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from .joint_state import JOINTS, Malformed, arm_joints
from .topics import FLOAT64_ARRAY


def getter(msgtype: str, fieldnames: list[str]) -> attrgetter:
    """One C call per message (sec, nanosec, joint names, positions, velocities)."""
    if msgtype == FLOAT64_ARRAY:
        return attrgetter("data", "data", "data", "data", "data")
    point = "reference" if "reference" in fieldnames else "desired"
    return attrgetter("header.stamp.sec", "header.stamp.nanosec", "joint_names",
                      f"{point}.positions", f"{point}.velocities")


def batch_columns(rows: list[tuple], msgtype: str, joint_key: str) -> dict[str, np.ndarray]:
    """`sec`, `nanosec`, `seq` (n,) int64 (zero without a header), `q_target`, `dq_target`
    (n, 7) [rad, rad/s], NaN where a joint or the velocities are absent."""
    n = len(rows)
    cols = list(zip(*rows))
    q = np.full((n, JOINTS), np.nan)
    dq = np.full((n, JOINTS), np.nan)
    if msgtype == FLOAT64_ARRAY:
        lengths = np.fromiter(map(len, cols[0]), dtype=np.int64, count=n)
        bad = np.flatnonzero(lengths != JOINTS)
        if bad.size:
            raise Malformed(int(bad[0]), f"data has {lengths[bad[0]]} values, expected 7 (J1..J7)")
        q[:] = np.stack(cols[0])
        zeros = np.zeros(n, np.int64)
        return {"sec": zeros, "nanosec": zeros, "seq": zeros, "q_target": q, "dq_target": dq}
    groups: dict[tuple, list[int]] = {}
    for i, names in enumerate(cols[2]):
        groups.setdefault(tuple(names), []).append(i)
    for names, idx in groups.items():
        arms = arm_joints(names)
        slots = arms.get(joint_key) or (next(iter(arms.values())) if len(arms) == 1 else None)
        if slots is None:
            continue
        for target, col in ((q, 3), (dq, 4)):
            values = [cols[col][i] for i in idx]
            if not all(len(v) == len(names) for v in values):
                if target is dq and not any(len(v) for v in values):
                    continue
                raise Malformed(idx[0], f"{len(names)} joint names but another count of values")
            matrix = np.stack(values)
            for j, s in enumerate(slots):
                if s >= 0:
                    target[idx, j] = matrix[:, s]
    seq = np.zeros(n, np.int64)
    return {"sec": np.asarray(cols[0], np.int64), "nanosec": np.asarray(cols[1], np.int64),
            "seq": seq, "q_target": q, "dq_target": dq}
