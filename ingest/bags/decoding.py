"""One pass over the bag: every wanted stream's messages deserialised by rosbags and turned
into column arrays a batch at a time.

Per message there is the library's deserialisation, one `attrgetter` call (C) picking the
fields, and two list appends; every `BATCH_MESSAGES` messages the batch's rows become numpy
arrays (`np.stack` of the library's arrays, one per field). No Python loop per field.
A message that does not decode, or a malformed one, is an IngestError naming the topic, the
message's index in it and its receive time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..registry import IngestError
from . import franka_state, joint_state, targets
from .bagfile import OpenBag
from .joint_state import Malformed
from .topics import Stream

BATCH_MESSAGES = 8192


@dataclass
class Decoded:
    """A stream's messages as arrays: `receive_ns` (n,) int64, and `columns` (for a
    JointState stream: arm key → columns; otherwise the columns)."""

    stream: Stream
    receive_ns: np.ndarray
    columns: dict[str, Any]


@dataclass
class _Collector:
    stream: Stream
    decode: Callable[[bytes], Any]
    get: Callable[[Any], tuple]
    finish: Callable[[list[tuple]], dict]
    rows: list = field(default_factory=list)
    recv: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    recv_parts: list = field(default_factory=list)
    done: int = 0

    def flush(self, path: Path) -> None:
        if not self.rows:
            return
        try:
            self.parts.append(self.finish(self.rows))
        except Malformed as exc:
            i = self.done + exc.index
            raise IngestError(path, f"topic {self.stream.topic}: message {i} (receive time "
                              f"{self.recv[exc.index]} ns) is malformed: {exc}",
                              field=self.stream.topic) from None
        self.recv_parts.append(np.asarray(self.recv, dtype=np.int64))
        self.done += len(self.rows)
        self.rows, self.recv = [], []


def decode_streams(bag: OpenBag, streams: list[Stream]) -> dict[str, Decoded]:
    """Topic → Decoded for every stream, in one pass over the bag."""
    collectors = {s.topic: _collector(bag, s) for s in streams}
    by_conn = {c.id: collectors[s.topic] for s in streams for c in s.connections}
    path = bag.path
    col, t = None, 0
    try:
        for conn, t, raw in bag.messages([c for s in streams for c in s.connections]):
            col = by_conn[conn.id]
            col.rows.append(col.get(col.decode(raw)))
            col.recv.append(t)
            if len(col.rows) >= BATCH_MESSAGES:
                col.flush(path)
    except IngestError:
        raise
    except Exception as exc:  # the library's SerdeError, or a field the message lacks
        s = col.stream if col is not None else None
        where = f"topic {s.topic}: message {col.done + len(col.rows)} (receive time {t} ns)" if s else "a message"
        raise IngestError(path, f"{where} does not decode as {s.msgtype if s else '?'}: "
                          f"{type(exc).__name__}: {exc}", field=s.topic if s else None) from None
    out = {}
    for topic, c in collectors.items():
        c.flush(path)
        out[topic] = Decoded(c.stream, _concat(c.recv_parts), _merge(c.parts))
    return out


def _collector(bag: OpenBag, s: Stream) -> _Collector:
    decode = bag.decoder(s.msgtype)
    if s.kind == "joint_state":
        wanted = dict(s.prefixes) or {k: "" for k in s.arm_keys}
        return _Collector(s, decode, joint_state.getter(bag.ros),
                          lambda rows: joint_state.batch_columns(rows, wanted))
    if s.kind == "robot_state":
        return _Collector(s, decode, franka_state.getter(s.msgtype),
                          lambda rows: franka_state.batch_columns(rows, s.msgtype))
    names = [f[0] for f in bag.store.fielddefs[s.msgtype][1]]
    key = s.prefixes.get(s.namespace, "") if s.prefixes else ""
    return _Collector(s, decode, targets.getter(s.msgtype, names),
                      lambda rows: targets.batch_columns(rows, s.msgtype, key))


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _merge(parts: list[dict]) -> dict:
    """Batch dicts (possibly nested one level) → one dict of concatenated arrays."""
    if not parts:
        return {}
    out = {}
    for key, value in parts[0].items():
        if isinstance(value, dict):
            out[key] = _merge([p[key] for p in parts])
        else:
            out[key] = np.concatenate([p[key] for p in parts]) if len(parts) > 1 else value
    return out
