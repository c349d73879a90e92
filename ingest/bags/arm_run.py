"""One arm's decoded streams → the run's tables: `frames` (one row per message of the primary
state stream), `streams` (every other stream's messages, one row each), and run fields.

Time: a stream's time is its messages' `header.stamp` when every stamp is set (non-zero),
else the bag's receive time (`time_source`, per stream and for the run: the primary's).
`t_s` is seconds since the primary stream's first time, in every table, so tables join by
`t_s` (sql/bag_streams.sql). Stamps that go backwards or jump stay as recorded, in bag order:
`control_period_s` is the step of `t_s` (null on the first row), and the interval rules split
there. `seq` is ROS 1's `header.seq` when it strictly increases (a lost message is a seq gap),
else the message's index in its topic (`seq_source`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .decoding import Decoded
from .joint_state import JOINTS
from .topics import Arm

POSE = ("px", "py", "pz", "qx", "qy", "qz", "qw")


def time_of(cols: dict[str, np.ndarray], receive_ns: np.ndarray) -> tuple[np.ndarray, str]:
    """(time ns int64, 'header.stamp' | 'receive_time')."""
    stamp = cols["sec"].astype(np.int64) * 1_000_000_000 + cols["nanosec"].astype(np.int64)
    if stamp.size and (stamp > 0).all():
        return stamp, "header.stamp"
    return receive_ns, "receive_time"


def seq_of(cols: dict[str, np.ndarray], ros: int) -> tuple[np.ndarray, str]:
    seq = cols["seq"]
    if ros == 1 and seq.size > 1 and (np.diff(seq) > 0).all():
        return seq.astype(np.int64), "header.seq"
    return np.arange(seq.size, dtype=np.int64), "message index"


def rate_hz(t_s: np.ndarray) -> float | None:
    steps = np.diff(t_s)
    steps = steps[steps > 0]
    return float(1.0 / np.median(steps)) if steps.size else None


def _joint_arrays(prefix: str, values: np.ndarray, valid: np.ndarray | None = None) -> dict:
    return {f"{prefix}{j + 1}": pa.array(values[:, j], pa.float64(),
                                         mask=None if valid is None else ~valid[:, j])
            for j in range(values.shape[1])}


def _state_columns(d: Decoded, arm_key: str) -> dict[str, pa.Array]:
    """The columns a state stream gives (joint_state or robot_state)."""
    if d.stream.kind == "joint_state":
        c = d.columns[arm_key]
        out = {}
        for name in ("q", "dq", "tau_J"):
            out |= _joint_arrays(name, c[name], c[f"{name}_valid"])
        return out
    c = d.columns
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


def _head(d: Decoded, arm_key: str) -> dict:
    return d.columns[arm_key] if d.stream.kind == "joint_state" else d.columns


def build_arm_run(arm: Arm, decoded: dict[str, Decoded], ros: int, kp: list[float] | None,
                  kd: list[float] | None) -> tuple[pa.Table, pa.Table | None, dict[str, Any]]:
    """(frames, streams table or None, run fields) of one arm."""
    prim = decoded[arm.primary.topic]
    head = _head(prim, arm.key)
    time_ns, time_source = time_of(head, prim.receive_ns)
    origin = int(time_ns[0])
    t_s = (time_ns - origin) / 1e9
    seq, seq_source = seq_of(head, ros)
    cols: dict[str, pa.Array] = {"seq": pa.array(seq), "t_s": pa.array(t_s)}
    cols |= _state_columns(prim, arm.key)
    period = np.empty_like(t_s)
    period[1:] = np.diff(t_s)
    cols["control_period_s"] = pa.array(period, mask=np.arange(t_s.size) == 0)
    cols["stamp_ns"] = pa.array(head["sec"] * 1_000_000_000 + head["nanosec"], pa.int64())
    cols["receive_ns"] = pa.array(prim.receive_ns, pa.int64())
    rates = [_stream_row(prim, arm.key, origin, "primary")]
    tables = []
    for s in arm.others + arm.targets:
        table, row = _stream_table(decoded[s.topic], arm.key, origin)
        tables.append(table)
        rates.append(row)
    have_target = np.zeros(t_s.size, bool)
    if arm.targets:
        target_cols, have_target = _targets_at(decoded[arm.targets[0].topic], t_s, origin)
        cols |= target_cols
    cols |= _gains(kp, kd, have_target, cols)
    streams = _uniform(pa.concat_tables(tables, promote_options="default")) if tables else None
    fields = {"time_source": time_source, "seq_source": seq_source,
              "primary_topic": arm.primary.topic, "streams": rates,
              "time_origin_ns": origin,
              "target_topic": arm.targets[0].topic if arm.targets else None,
              "gains_source": "command line (--kp/--kd)" if kp is not None else None}
    return pa.table(cols), streams, fields


STREAM_JOINT_COLUMNS = ("q", "dq", "tau_J", "q_target", "dq_target")
"""Every streams table has these J1..J7 columns (null where a stream has none), so the
views over it bind whatever streams a lake holds."""


def _uniform(table: pa.Table) -> pa.Table:
    for prefix in STREAM_JOINT_COLUMNS:
        for j in range(1, JOINTS + 1):
            if f"{prefix}{j}" not in table.column_names:
                table = table.append_column(f"{prefix}{j}", pa.nulls(table.num_rows, pa.float64()))
    return table


def _stream_row(d: Decoded, arm_key: str, origin: int, role: str) -> dict[str, Any]:
    time_ns, source = time_of(_head(d, arm_key), d.receive_ns)
    return {"topic": d.stream.topic, "kind": d.stream.kind, "role": role,
            "msgtype": d.stream.msgtype, "messages": int(time_ns.size),
            "rate_hz": rate_hz((time_ns - origin) / 1e9), "time_source": source}


def _stream_table(d: Decoded, arm_key: str, origin: int) -> tuple[pa.Table, dict[str, Any]]:
    """A secondary stream as rows of the `streams` table: topic, kind, seq (index in the
    topic), t_s (same origin as frames), stamp_ns, receive_ns, then its columns."""
    head = _head(d, arm_key)
    time_ns, _ = time_of(head, d.receive_ns)
    n = time_ns.size
    cols = {"topic": pa.array([d.stream.topic] * n, pa.string()),
            "kind": pa.array([d.stream.kind] * n, pa.string()),
            "seq": pa.array(np.arange(n, dtype=np.int64)),
            "t_s": pa.array((time_ns - origin) / 1e9),
            "stamp_ns": pa.array(head["sec"] * 1_000_000_000 + head["nanosec"], pa.int64()),
            "receive_ns": pa.array(d.receive_ns, pa.int64())}
    if d.stream.kind == "target":
        cols |= _joint_arrays("q_target", d.columns["q_target"])
        cols |= _joint_arrays("dq_target", d.columns["dq_target"])
    else:
        cols |= _state_columns(d, arm_key)
    role = "target" if d.stream.kind == "target" else "secondary"
    return pa.table(cols), _stream_row(d, arm_key, origin, role)


def _targets_at(d: Decoded, t_s: np.ndarray, origin: int) -> tuple[dict[str, pa.Array], np.ndarray]:
    """The latest target at or before each frame time: q_target1..7 (null before the first
    target), and which frames have one."""
    time_ns, _ = time_of(d.columns, d.receive_ns)
    tt = (time_ns - origin) / 1e9
    if (np.diff(tt) < 0).any():  # targets out of order: the bag's receive order is monotonic
        tt = (d.receive_ns - origin) / 1e9
    idx = np.searchsorted(tt, t_s, side="right") - 1
    have = idx >= 0
    q = d.columns["q_target"][np.maximum(idx, 0)]
    valid = np.repeat(have[:, None], JOINTS, axis=1) & np.isfinite(q)
    return _joint_arrays("q_target", q, valid), have


def _gains(kp: list[float] | None, kd: list[float] | None, have_target: np.ndarray,
           cols: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """K_joint/D_joint constants from --kp/--kd. With both, the frames that have a target are
    joint impedance (controller 2, joint_target_valid 1), the target applied as received
    (q_target_filtered = q_target, filter_alpha 1: a bag records no target filter); the others
    are not known to be (controller null, joint_target_valid 0): the lake's rule is
    joint_target_valid = 1 exactly under joint impedance."""
    n = have_target.size
    out: dict[str, pa.Array] = {}
    for name, values in (("K_joint", kp), ("D_joint", kd)):
        if values is not None:
            out |= _joint_arrays(name, np.tile(np.asarray(values, np.float64), (n, 1)))
    if kp is not None and kd is not None and have_target.any():
        out["controller"] = pa.array(np.full(n, 2, np.int32), mask=~have_target)
        out["joint_target_valid"] = pa.array(have_target.astype(np.int8))
        out["filter_alpha"] = pa.array(np.ones(n), mask=~have_target)
        out |= {f"q_target_filtered{j}": cols[f"q_target{j}"] for j in range(1, JOINTS + 1)}
    return out
