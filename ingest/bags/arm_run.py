"""One arm's decoded streams → the run's tables: `frames` (one row per message of the primary
state stream), `streams` (every other stream's messages, one row each), and run fields.

Time: a stream's time is its messages' `header.stamp` when every stamp is set (non-zero),
else the bag's receive time (`time_source`, per stream and for the run: the primary's).
`t_s` is seconds since the primary stream's first time, in every table, so tables join by
`t_s` (sql/bag_streams.sql). Stamps that go backwards or jump stay as recorded, in bag order:
`control_period_s` is the step of `t_s` (null on the first row), and the interval rules split
there. `seq` is ROS 1's `header.seq` when it strictly increases (a lost message is a seq gap),
else the message's index in its topic (`seq_source`).

These are decided from the streams' stamps, seqs and receive times (`decoding.Decoded`, in
memory); the frames are then built `CHUNK_MESSAGES` at a time from the spilled columns and
handed to the pipeline as chunks (`IngestUnit.more_frames`), the bytes of one whole table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .decoding import Decoded
from .spill import SpillDir
from .joint_state import JOINTS
from .topics import Arm

POSE = ("px", "py", "pz", "qx", "qy", "qz", "qw")


CHUNK_MESSAGES = 32_768
"""Frames built, and handed to the pipeline, this many messages at a time."""


def time_of(stamp_ns: np.ndarray, receive_ns: np.ndarray) -> tuple[np.ndarray, str]:
    """(time ns int64, 'header.stamp' | 'receive_time')."""
    if stamp_ns.size and (stamp_ns > 0).all():
        return stamp_ns, "header.stamp"
    return receive_ns, "receive_time"


def seq_recorded(seq: np.ndarray, ros: int) -> bool:
    """Whether the frames' seq is ROS 1's `header.seq` (it strictly increases), else the
    message's index in its topic."""
    return bool(ros == 1 and seq.size > 1 and (np.diff(seq) > 0).all())


def rate_hz(t_s: np.ndarray) -> float | None:
    steps = np.diff(t_s)
    steps = steps[steps > 0]
    return float(1.0 / np.median(steps)) if steps.size else None


def _joint_arrays(prefix: str, values: np.ndarray, valid: np.ndarray | None = None) -> dict:
    return {f"{prefix}{j + 1}": pa.array(values[:, j], pa.float64(),
                                         mask=None if valid is None else ~valid[:, j])
            for j in range(values.shape[1])}


def _state_columns(kind: str, columns: dict, arm_key: str) -> dict[str, pa.Array]:
    """The columns a state stream gives (joint_state or robot_state), from `Decoded.columns`."""
    if kind == "joint_state":
        c = columns[arm_key]
        out = {}
        for name in ("q", "dq", "tau_J"):
            out |= _joint_arrays(name, c[name], c[f"{name}_valid"])
        return out
    c = columns
    out = {}
    for name in ("q", "dq", "tau_J", "tau_cmd"):
        out |= _joint_arrays(name, c[name])
    pose = np.column_stack([c["ee_pos"], c["ee_quat"]])
    out |= {f"ee_{s}": pa.array(pose[:, i]) for i, s in enumerate(POSE)}
    out["robot_time_s"] = pa.array(c["robot_time_s"])
    for name in ("q_d", "dq_d", "tau_ext"):
        out |= _joint_arrays(name, c[name])
    out["robot_mode"] = pa.array(c["robot_mode"], pa.int8())
    return out


@dataclass
class ArmRun:
    """One arm's run: its frames (the first chunk, the rest from `more_frames`), the
    `streams` table's chunks (None without other streams; each chunk with the table's whole
    schema) and the run fields."""

    frames: pa.Table
    more_frames: Iterator[pa.Table]
    streams: Iterator[pa.Table] | None
    fields: dict[str, Any]


def build_arm_run(arm: Arm, decoded: dict[str, Decoded], ros: int, kp: list[float] | None,
                  kd: list[float] | None, spills: SpillDir) -> ArmRun:
    """One arm's run; its frames and streams are built `CHUNK_MESSAGES` at a time from the
    spilled columns, and `spills` is removed once the last chunk of both is built."""
    prim = decoded[arm.primary.topic]
    time_ns, time_source = time_of(prim.stamp_ns, prim.receive_ns)
    origin = int(time_ns[0])
    others = [decoded[s.topic] for s in arm.others + arm.targets]
    rates = [_stream_row(prim, origin, "primary")]
    rates += [_stream_row(d, origin, "target" if d.stream.kind == "target" else "secondary")
              for d in others]
    spills.users = 2 if others else 1
    streams = _streams_chunks(others, arm.key, origin, spills) if others else None
    recorded = seq_recorded(prim.seq, ros)
    plan = _FramePlan(prim, arm.key, time_ns, origin, recorded,
                      decoded[arm.targets[0].topic] if arm.targets else None, kp, kd)
    chunks = _frame_chunks(plan, spills)
    fields = {"time_source": time_source,
              "seq_source": "header.seq" if recorded else "message index",
              "primary_topic": arm.primary.topic, "streams": rates,
              "time_origin_ns": origin,
              "target_topic": arm.targets[0].topic if arm.targets else None,
              "gains_source": "command line (--kp/--kd)" if kp is not None else None}
    return ArmRun(next(chunks), chunks, streams, fields)


@dataclass
class _FramePlan:
    """What every chunk of an arm's frames is built from: the primary stream, its time
    (`time_ns` (n,), stamps or receive times) and origin, whether its seq is recorded, the
    target stream and its times (`target_t_s`, on the frames' time base), the gains."""

    prim: Decoded
    arm_key: str
    time_ns: np.ndarray
    origin: int
    seq_recorded: bool
    target: Decoded | None
    kp: list[float] | None
    kd: list[float] | None
    target_t_s: np.ndarray | None = None
    joint_impedance: bool = False

    def __post_init__(self) -> None:
        if self.target is not None:
            self.target_t_s = _target_times(self.target, self.origin)
        # some frame has a target: its time is at or after the first target's
        self.joint_impedance = (self.kp is not None and self.kd is not None and
                                self.target_t_s is not None and
                                self.t_s(self.time_ns.max()) >= self.target_t_s[0])

    def t_s(self, time_ns: np.ndarray) -> np.ndarray:
        return (time_ns - self.origin) / 1e9


def _frame_chunks(plan: _FramePlan, spills: SpillDir) -> Iterator[pa.Table]:
    try:
        n = plan.time_ns.size
        for lo in range(0, max(n, 1), CHUNK_MESSAGES):
            yield _frames(plan, lo, min(lo + CHUNK_MESSAGES, n))
    finally:
        spills.release()


def _frames(plan: _FramePlan, lo: int, hi: int) -> pa.Table:
    """The frames of the primary's messages [lo, hi) (each value as the whole run's table
    would have it: `t_s` and its steps element by element from the same times)."""
    t_s = plan.t_s(plan.time_ns[lo:hi])
    seq = plan.prim.seq[lo:hi] if plan.seq_recorded else np.arange(lo, hi, dtype=np.int64)
    cols: dict[str, pa.Array] = {"seq": pa.array(seq), "t_s": pa.array(t_s)}
    cols |= _state_columns(plan.prim.stream.kind, plan.prim.columns(lo, hi), plan.arm_key)
    before = plan.t_s(plan.time_ns[lo - 1:hi - 1]) if lo else np.concatenate([[0.0], t_s[:-1]])
    cols["control_period_s"] = pa.array(t_s - before, mask=np.arange(lo, hi) == 0)
    cols["stamp_ns"] = pa.array(plan.prim.stamp_ns[lo:hi], pa.int64())
    cols["receive_ns"] = pa.array(plan.prim.receive_ns[lo:hi], pa.int64())
    have_target = np.zeros(hi - lo, bool)
    if plan.target is not None:
        index = np.searchsorted(plan.target_t_s, t_s, side="right") - 1
        target_cols, have_target = _targets_at(plan.target, index)
        cols |= target_cols
    cols |= _gains(plan, have_target, cols)
    return pa.table(cols)


STREAM_JOINT_COLUMNS = ("q", "dq", "tau_J", "q_target", "dq_target")
"""Every streams table has these J1..J7 columns (null where a stream has none), so the
views over it bind whatever streams a lake holds."""


def _streams_chunks(streams: list[Decoded], arm_key: str, origin: int,
                    spills: SpillDir) -> Iterator[pa.Table]:
    """The `streams` table's rows, stream after stream, `CHUNK_MESSAGES` at a time, each chunk
    with the whole table's columns (those of every stream, in order of first appearance, then
    `STREAM_JOINT_COLUMNS`; null where a stream has none)."""
    try:
        schema = _uniform(pa.unify_schemas([_stream_rows(d, arm_key, origin, 0, 0).schema
                                            for d in streams]))
        for d in streams:
            for lo in range(0, d.count, CHUNK_MESSAGES):
                rows = _stream_rows(d, arm_key, origin, lo, min(lo + CHUNK_MESSAGES, d.count))
                yield pa.table([rows.column(f.name) if f.name in rows.column_names else
                                pa.nulls(rows.num_rows, f.type) for f in schema], schema=schema)
    finally:
        spills.release()


def _uniform(schema: pa.Schema) -> pa.Schema:
    for prefix in STREAM_JOINT_COLUMNS:
        for j in range(1, JOINTS + 1):
            if f"{prefix}{j}" not in schema.names:
                schema = schema.append(pa.field(f"{prefix}{j}", pa.float64()))
    return schema


def _stream_row(d: Decoded, origin: int, role: str) -> dict[str, Any]:
    time_ns, source = time_of(d.stamp_ns, d.receive_ns)
    return {"topic": d.stream.topic, "kind": d.stream.kind, "role": role,
            "msgtype": d.stream.msgtype, "messages": int(time_ns.size),
            "rate_hz": rate_hz((time_ns - origin) / 1e9), "time_source": source}


def _stream_rows(d: Decoded, arm_key: str, origin: int, lo: int, hi: int) -> pa.Table:
    """Messages [lo, hi) of a secondary stream as rows of the `streams` table: topic, kind,
    seq (index in the topic), t_s (same origin as frames), stamp_ns, receive_ns, then its
    columns."""
    time_ns, _ = time_of(d.stamp_ns, d.receive_ns)
    n = hi - lo
    cols = {"topic": pa.array([d.stream.topic] * n, pa.string()),
            "kind": pa.array([d.stream.kind] * n, pa.string()),
            "seq": pa.array(np.arange(lo, hi, dtype=np.int64)),
            "t_s": pa.array((time_ns[lo:hi] - origin) / 1e9),
            "stamp_ns": pa.array(d.stamp_ns[lo:hi], pa.int64()),
            "receive_ns": pa.array(d.receive_ns[lo:hi], pa.int64())}
    values = d.columns(lo, hi)
    if d.stream.kind == "target":
        cols |= _joint_arrays("q_target", values["q_target"])
        cols |= _joint_arrays("dq_target", values["dq_target"])
    else:
        cols |= _state_columns(d.stream.kind, values, arm_key)
    return pa.table(cols)


def _target_times(d: Decoded, origin: int) -> np.ndarray:
    """The target messages' times on the frames' time base [s], in order (each frame gets
    the latest at or before its time)."""
    time_ns, _ = time_of(d.stamp_ns, d.receive_ns)
    tt = (time_ns - origin) / 1e9
    if (np.diff(tt) < 0).any():  # targets out of order: the bag's receive order is monotonic
        tt = (d.receive_ns - origin) / 1e9
    return tt


def _targets_at(d: Decoded, index: np.ndarray) -> tuple[dict[str, pa.Array], np.ndarray]:
    """q_target1..7 of the frames whose latest target is `index` (null before the first
    target), and which frames have one."""
    have = index >= 0
    if have.any():
        lo, hi = int(index[have].min()), int(index.max()) + 1
        q = d.columns(lo, hi)["q_target"][np.maximum(index - lo, 0)]
    else:
        q = np.full((index.size, JOINTS), np.nan)
    valid = np.repeat(have[:, None], JOINTS, axis=1) & np.isfinite(q)
    return _joint_arrays("q_target", q, valid), have


def _gains(plan: _FramePlan, have_target: np.ndarray, cols: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """K_joint/D_joint constants from --kp/--kd. With both, the frames that have a target are
    joint impedance (controller 2, joint_target_valid 1), the target applied as received
    (q_target_filtered = q_target, filter_alpha 1: a bag records no target filter); the others
    are not known to be (controller null, joint_target_valid 0): the lake's rule is
    joint_target_valid = 1 exactly under joint impedance. (Whether those columns exist is
    the run's: `plan.joint_impedance`, some frame of the run has a target.)"""
    n = have_target.size
    out: dict[str, pa.Array] = {}
    for name, values in (("K_joint", plan.kp), ("D_joint", plan.kd)):
        if values is not None:
            out |= _joint_arrays(name, np.tile(np.asarray(values, np.float64), (n, 1)))
    if plan.joint_impedance:
        out["controller"] = pa.array(np.full(n, 2, np.int32), mask=~have_target)
        out["joint_target_valid"] = pa.array(have_target.astype(np.int8))
        out["filter_alpha"] = pa.array(np.ones(n), mask=~have_target)
        out |= {f"q_target_filtered{j}": cols[f"q_target{j}"] for j in range(1, JOINTS + 1)}
    return out
