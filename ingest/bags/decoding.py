"""One pass over the bag: every wanted stream's messages deserialised by rosbags and turned
into column arrays a batch at a time.

Per message there is the library's deserialisation, one `attrgetter` call (C) picking the
fields, and two list appends; every `BATCH_MESSAGES` messages the batch's rows become numpy
arrays (`np.stack` of the library's arrays, one per field). No Python loop per field.
Each stream keeps its stamps, seqs and receive times in memory (the run's time base is
decided from them) and appends its other columns to a `spill.Spill`, read back a chunk of
messages at a time: the memory of a reading does not grow with the bag's values.
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
from .spill import Spill, SpillDir
from .topics import Stream

BATCH_MESSAGES = 8192


HEAD = ("sec", "nanosec", "seq")
"""The per-message fields every stream's batch columns hold (a JointState stream's in each
arm's columns: the same arrays)."""


@dataclass
class Decoded:
    """A stream's messages: `receive_ns`, `stamp_ns` (the header stamp, 0 where unset) and
    `seq` (n,) int64 in memory, the rest in `spill`; `columns(lo, hi)` reads those rows (for
    a JointState stream: arm key → columns; otherwise the columns)."""

    stream: Stream
    receive_ns: np.ndarray
    stamp_ns: np.ndarray
    seq: np.ndarray
    spill: Spill

    @property
    def count(self) -> int:
        return int(self.receive_ns.size)

    def columns(self, lo: int = 0, hi: int | None = None) -> dict[str, Any]:
        return self.spill.rows(lo, self.count if hi is None else hi)


@dataclass
class _Collector:
    stream: Stream
    decode: Callable[[bytes], Any]
    get: Callable[[Any], tuple]
    finish: Callable[[list[tuple]], dict]
    rows: list = field(default_factory=list)
    recv: list = field(default_factory=list)
    spill: Spill | None = None
    heads: list = field(default_factory=list)
    recv_parts: list = field(default_factory=list)
    done: int = 0

    def flush(self, path: Path) -> None:
        if not self.rows:
            return
        try:
            self.heads.append(_split_head(self.finish(self.rows), self.spill))
        except Malformed as exc:
            i = self.done + exc.index
            raise IngestError(path, f"topic {self.stream.topic}: message {i} (receive time "
                              f"{self.recv[exc.index]} ns) is malformed: {exc}",
                              field=self.stream.topic) from None
        self.recv_parts.append(np.asarray(self.recv, dtype=np.int64))
        self.done += len(self.rows)
        self.rows, self.recv = [], []


def decode_streams(bag: OpenBag, streams: list[Stream], spills: SpillDir) -> dict[str, Decoded]:
    """Topic → Decoded for every stream, in one pass over the bag, the values in `spills`."""
    collectors = {s.topic: _collector(bag, s) for s in streams}
    for k, c in enumerate(collectors.values()):
        c.spill = spills.spill(f"stream{k}")
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
        c.spill.finish()
        stamp, seq = (_concat([h[k] for h in c.heads]) for k in (0, 1))
        out[topic] = Decoded(c.stream, _concat(c.recv_parts), stamp, seq, c.spill)
    return out


def _split_head(batch: dict[str, Any], spill: Spill) -> tuple[np.ndarray, np.ndarray]:
    """(stamp_ns, seq) of a batch's columns; the rest appended to `spill`."""
    nested = [v for v in batch.values() if isinstance(v, dict)]
    head = nested[0] if nested else batch
    stamp = head["sec"].astype(np.int64) * 1_000_000_000 + head["nanosec"].astype(np.int64)
    seq = head["seq"].astype(np.int64)
    if nested:
        spill.append({k: {c: v for c, v in arm.items() if c not in HEAD} for k, arm in batch.items()})
    else:
        spill.append({c: v for c, v in batch.items() if c not in HEAD})
    return stamp, seq


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
