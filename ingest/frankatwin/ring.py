"""Cross-checks of a FrankaTwin 1 kHz ring log: sidecar `ring_log` summary vs frames vs
targets (FrankaTwin's 1 kHz ring log; docs/formats.md). Pure numpy over whole columns; loops only over gaps.

Findings are *flags* (the run is kept and the flag says what is off) except the ones that
make the run unusable, which are *reasons* to reject: `save_error`, and frames that name a
`target_idx` the targets file does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

TGT = ("tgt_px", "tgt_py", "tgt_pz", "tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw")
GAPS_TYPE = pa.list_(pa.struct([("seq_from", pa.int64()), ("seq_to", pa.int64())]))
"""run.parquet `recorded_gaps`: inclusive lost seq ranges (lake contract)."""


@dataclass
class RingCheck:
    """Outcome of `check_ring`: run fields, flags (kept, flagged) and reject reasons."""

    fields: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # short codes, e.g. ring_gap_not_in_frames
    notes: list[str] = field(default_factory=list)  # one sentence per finding
    reasons: list[str] = field(default_factory=list)  # reject reasons

    def flag(self, code: str, note: str) -> None:
        """Record a finding: its code once in `flags`, its sentence in `notes`."""
        if code not in self.flags:
            self.flags.append(code)
        self.notes.append(note)


def observed_gaps(seq: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive seq ranges missing between consecutive frames (`seq` sorted)."""
    if seq.size < 2:
        return []
    jumps = np.flatnonzero(np.diff(seq) > 1)
    return [(int(seq[i]) + 1, int(seq[i + 1]) - 1) for i in jumps]


def _recorded_gaps(ring: dict) -> tuple[list[tuple[int, int]], list[str]]:
    gaps, bad = [], []
    for g in ring.get("gaps") or []:
        if (isinstance(g, (list, tuple)) and len(g) == 2 and all(isinstance(v, int) for v in g)
                and g[0] <= g[1]):
            gaps.append((int(g[0]), int(g[1])))
        else:
            bad.append(f"ring_log.gaps entry {g!r} is not [seq_from, seq_to]")
    return gaps, bad


def _gap_matches(gap: tuple[int, int], seen: list[tuple[int, int]], first: int,
                 seq_start: int | None) -> bool:
    a, b = gap
    if any(oa <= a and b <= ob for oa, ob in seen):
        return True
    # lost on the first poll, before any frame was drained: the frames simply start later
    return b == first - 1 and (seq_start is None or a == seq_start + 1)


def check_gaps(seq: np.ndarray, ring: dict, out: RingCheck) -> None:
    """Recorded gaps vs seq jumps, and the summary counters vs the frames."""
    seen = observed_gaps(seq)
    recorded, bad = _recorded_gaps(ring)
    for note in bad:
        out.flag("ring_gaps_malformed", note)
    first = int(seq[0]) if seq.size else 0
    last = int(seq[-1]) if seq.size else 0
    seq_start = ring.get("seq_start") if isinstance(ring.get("seq_start"), int) else None
    for a, b in recorded:
        if not _gap_matches((a, b), seen, first, seq_start):
            out.flag("ring_gap_not_in_frames", f"ring_log gap [{a}, {b}] is recorded in the sidecar but the "
                             "frames show no seq jump there")
    for a, b in seen:
        if not any(ra <= a and b <= rb for ra, rb in recorded):
            out.flag("seq_jump_not_in_ring_log", f"frames jump over seq {a}..{b} but ring_log.gaps does not list it")
    expect = {"num_frames": int(seq.size), "seq_first": first, "seq_last": last}
    for key, value in expect.items():
        if isinstance(ring.get(key), int) and ring[key] != value:
            out.flag("ring_log_count_mismatch", f"ring_log.{key} is {ring[key]} but the frames give {value}")
    lost = sum(b - a + 1 for a, b in recorded)
    if isinstance(ring.get("dropped_frames"), int) and ring["dropped_frames"] != lost:
        out.flag("ring_log_count_mismatch", f"ring_log.dropped_frames is {ring['dropped_frames']} but the gaps "
                         f"cover {lost} frames")
    if seq.size > 1 and np.any(np.diff(seq) <= 0):
        out.flag("seq_not_increasing", "frames are not strictly increasing in seq (producer restart?)")
    if isinstance(ring.get("resets"), int) and ring["resets"] > 0:
        out.flag("ring_resets", f"ring_log.resets = {ring['resets']}: the producer restarted")
    # a typed scalar, so an empty list still has the contract type in run.parquet
    out.fields["recorded_gaps"] = pa.scalar([{"seq_from": a, "seq_to": b} for a, b in recorded],
                                            type=GAPS_TYPE)


def check_targets(frames: pa.Table, targets: pa.Table, out: RingCheck) -> None:
    """Frames' `target_idx` vs the targets file, and the setpoint values they carry."""
    idx = frames["target_idx"].to_numpy(zero_copy_only=False)
    t_idx = targets["target_idx"].to_numpy(zero_copy_only=False)
    order = np.argsort(t_idx, kind="stable")
    sorted_idx = t_idx[order]
    used = idx[idx >= 0]
    pos = np.searchsorted(sorted_idx, used)
    pos_c = np.minimum(pos, max(sorted_idx.size - 1, 0))
    known = (sorted_idx.size > 0) & (sorted_idx[pos_c] == used) if used.size else np.array([], bool)
    if used.size and not np.all(known):
        missing = np.unique(used[~known])
        out.reasons.append(f"frames use target_idx {missing[:5].tolist()} "
                           f"({missing.size} distinct) that the targets file does not have")
    unused = np.setdiff1d(t_idx, np.unique(used))
    out.fields["targets_unused"] = int(unused.size)
    if unused.size:
        out.flag("targets_unused", f"targets file has {unused.size} target_idx no frame uses "
                         f"(first: {unused[:5].tolist()}; a later write at the same head wins)")
    if np.unique(t_idx).size != t_idx.size:
        out.flag("targets_repeated_idx", "targets file repeats a target_idx")
    head = targets["head"].to_numpy(zero_copy_only=False)
    eff = targets["seq_effective"].to_numpy(zero_copy_only=False)
    if np.any(eff != head + 1):
        out.flag("targets_seq_effective_mismatch", f"{int(np.sum(eff != head + 1))} targets have seq_effective != head + 1")
    if used.size and np.all(known):
        rows = order[pos_c]
        mask = idx >= 0
        bad = 0
        for col in TGT:
            f_val = frames[col].to_numpy(zero_copy_only=False)[mask]
            t_val = targets[col].to_numpy(zero_copy_only=False)[rows]
            bad += int(np.sum(~np.isclose(f_val, t_val, rtol=0, atol=5e-9, equal_nan=True)))
        if bad:
            out.flag("targets_value_mismatch", f"{bad} frame setpoint values differ from their targets row")


def check_ring(frames: pa.Table, targets: pa.Table, ring: dict | None) -> RingCheck:
    """All ring-log checks. `ring` is the sidecar's `ring_log` block (None: flagged)."""
    out = RingCheck()
    seq = frames["seq"].to_numpy(zero_copy_only=False)
    if not isinstance(ring, dict):
        out.flag("no_ring_log", "sidecar has no ring_log block: gaps/drops/resets not recorded")
        ring = {}
    if ring.get("error"):
        out.reasons.append(f"ring_log.error: {ring['error']}")
    if ring.get("save_error"):
        out.reasons.append(f"ring_log.save_error: {ring['save_error']}")
    check_gaps(seq, ring, out)
    check_targets(frames, targets, out)
    for key in ("num_frames", "seq_start", "seq_first", "seq_last", "num_targets",
                "dropped_frames", "resets", "log_id"):
        value = ring.get(key)
        out.fields[f"ring_{key}"] = value if isinstance(value, int) else None
    out.fields["ring_poll_hz"] = (float(ring["poll_hz"]) if isinstance(ring.get("poll_hz"),
                                  (int, float)) else None)
    out.fields["ring_consistent"] = not out.flags and not out.reasons
    return out
