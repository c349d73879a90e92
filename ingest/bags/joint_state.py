"""`sensor_msgs/msg/JointState` → joint columns of one or more arms, a batch at a time.

Joints are matched to J1..J7 by name: `<prefix>joint<j>` or `<prefix>joint_<j>` with j in
1..7 (`fr3_joint1`, `panda_joint1`, `fer_joint1`, `left/fr3_joint1`, `left_fr3_joint1`,
`arm_joint1`). The prefix, without a trailing robot model (`fr3`, `panda`, `fer`) and
separators, is the arm key (`left_fr3_` → `left`, `fr3_` → ``). A prefix naming at least
three of J1..J7 is an arm (a gripper's `fr3_finger_joint1/2` is not); joints an arm does not
name are null columns (not recorded).

position → q, velocity → dq, effort → tau_J (the link-side torques the driver reports). An
empty velocity or effort array is "not recorded" (null). A non-empty array whose length is
not the number of names is a malformed message: refused naming topic, index and time.
"""

from __future__ import annotations

import re
from operator import attrgetter

import numpy as np

JOINTS = 7
JOINT_RE = re.compile(r"^(?P<prefix>.*?)joint_?(?P<j>[1-7])$")
MODELS = ("fr3", "panda", "fer")
MIN_ARM_JOINTS = 3
FIELDS = ("position", "velocity", "effort")
COLUMNS = {"position": "q", "velocity": "dq", "effort": "tau_J"}


def arm_key(prefix: str) -> str:
    """`left_fr3_` → `left`, `fr3_` → ``, `left/panda_` → `left`, `arm_` → `arm`."""
    key = prefix.strip("_/")
    for model in MODELS:
        if key == model:
            return ""
        for sep in ("_", "/"):
            if key.endswith(sep + model):
                return key[: -len(model) - 1].strip("_/")
    return key


def arm_joints(names: tuple[str, ...]) -> dict[str, list[int]]:
    """Arm key → index in `names` of J1..J7 (-1 where not named), arms with at least
    `MIN_ARM_JOINTS` joints only."""
    arms: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        m = JOINT_RE.match(name)
        if m:
            slots = arms.setdefault(arm_key(m["prefix"]), [-1] * JOINTS)
            j = int(m["j"]) - 1
            if slots[j] < 0:
                slots[j] = i
    return {k: v for k, v in arms.items() if sum(i >= 0 for i in v) >= MIN_ARM_JOINTS}


def duplicate_joints(names: tuple[str, ...]) -> str | None:
    """The first arm joint name (`<prefix>joint<j>`) that `names` holds twice, else None: a
    message naming a joint twice has no one value for it."""
    seen: set[tuple[str, int]] = set()
    for name in names:
        m = JOINT_RE.match(name)
        if m:
            key = (arm_key(m["prefix"]), int(m["j"]))
            if key in seen:
                return name
            seen.add(key)
    return None


def getter(ros: int) -> attrgetter:
    """One C call per message: (sec, nanosec, seq, name, position, velocity, effort)."""
    seq = "header.seq" if ros == 1 else "header.stamp.sec"  # ROS 2 has no seq: ignored
    return attrgetter("header.stamp.sec", "header.stamp.nanosec", seq, "name", *FIELDS)


class Malformed(ValueError):
    """A message of the batch that cannot be read: `index` (in the batch) and why."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index = index


def batch_columns(rows: list[tuple], wanted: dict[str, str]) -> dict[str, dict[str, np.ndarray]]:
    """One batch of getter rows → for each wanted arm (arm key → joint-name arm key): `q`,
    `dq`, `tau_J` (n, 7) float64 and their `*_valid` (n, 7) bool, plus `sec`, `nanosec`,
    `seq` (n,) int64 shared by all arms."""
    n = len(rows)
    cols = list(zip(*rows))
    head = {k: np.asarray(cols[i], dtype=np.int64) for i, k in enumerate(("sec", "nanosec", "seq"))}
    out = {key: {f"{c}{s}": (np.zeros((n, JOINTS), bool) if s else np.full((n, JOINTS), np.nan))
                 for c in COLUMNS.values() for s in ("", "_valid")} for key in wanted}
    names = [tuple(x) for x in cols[3]]
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(names):
        groups.setdefault(key, []).append(i)
    for key, idx in groups.items():
        index = np.asarray(idx)
        joints = _group_joints(key, wanted, idx[0])
        for f, fi in zip(FIELDS, (4, 5, 6)):
            full, matrix = _field_matrix([cols[fi][i] for i in idx], len(key), f, idx)
            rows_full = index[full]
            for arm, jkey in wanted.items():
                slots = joints.get(jkey)
                if slots is None or not rows_full.size:
                    continue
                have = np.asarray([s >= 0 for s in slots])
                pick = np.asarray([max(s, 0) for s in slots])
                col = COLUMNS[f]
                out[arm][col][np.ix_(rows_full, have)] = matrix[:, pick[have]]
                out[arm][f"{col}_valid"][np.ix_(rows_full, have)] = True
    for arm in out.values():
        arm.update(head)
    return out


def _group_joints(names: tuple, wanted: dict[str, str], first: int) -> dict[str, list[int]]:
    """`arm_joints(names)`, or Malformed (at batch index `first`) when `names` holds a joint
    twice or names none of a wanted arm's joints (the topic's names changed part-way: its
    values would be lost)."""
    twice = duplicate_joints(names)
    if twice is not None:
        raise Malformed(first, f"names {twice} twice (names {list(names)}): expected each joint once")
    joints = arm_joints(names)
    missing = sorted(arm or "(no prefix)" for arm, jkey in wanted.items() if jkey not in joints)
    if missing:
        raise Malformed(first, f"names {list(names)}: none of the joints of arm "
                        f"{', '.join(missing)} that the topic's first messages name")
    return joints


def _field_matrix(values: list, width: int, field: str,
                  idx: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(full, matrix): which of these messages (same names) recorded the field, and their
    (n_full, width) values. An empty array is "not recorded"; any length other than 0 or
    `width` is Malformed."""
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    bad = np.flatnonzero((lengths != width) & (lengths != 0))
    if bad.size:
        i = int(bad[0])
        raise Malformed(idx[i], f"{field} has {lengths[i]} values for {width} joint names")
    full = lengths == width
    if not full.any():
        return full, np.empty((0, width))
    chosen = values if full.all() else [v for v, ok in zip(values, full) if ok]
    return full, np.stack(chosen).astype(np.float64, copy=False)
