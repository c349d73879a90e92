"""Run statistics and flags computed from canonical frames (numpy over whole columns).

Everything here describes honest data; nothing is interpolated or dropped. Flags:
`seq_gaps`, `controller_switches`, `resets`, `gain_changes`, `nan_torque_sensor`,
`nonfinite`, `stale_rows`, `truncated`, `incomplete`. The sample flags (`SAMPLE_FLAGS`: a NaN
or ±inf value, or a stale repeated row, at some ticks) leave the verdict `ok`: the run as a
whole is sound, the intervals SQL excludes those ticks, and `nonfinite_frames` /
`stale_frames` say how many there are. Skipped ticks are `dropped` (flag `seq_gaps`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import FRAME_SCHEMA, JOINTS
from .tick_grid import tick_period_s

JOINT_IMPEDANCE = 2
_GAIN_COLS = ([f"K_joint{j}" for j in range(1, JOINTS + 1)]
              + [f"D_joint{j}" for j in range(1, JOINTS + 1)]
              + ["filter_alpha", "joint_use_friction"])
_TAU_J = [f"tau_J{j}" for j in range(1, JOINTS + 1)]
_FLOAT_COLUMNS = [f.name for f in FRAME_SCHEMA if pa.types.is_floating(f.type)]
SAMPLE_FLAGS = ("nan_torque_sensor", "nonfinite", "stale_rows")
"""Flags about single samples, not the run: they do not turn the verdict to `flagged`."""


def _np(frames: pa.Table, name: str, fill: float = np.nan) -> np.ndarray:
    col = frames.column(name)
    if col.null_count:
        col = pc.fill_null(col, fill if pa.types.is_floating(col.type) else -1)
    return col.to_numpy()


def frame_stats(frames: pa.Table) -> dict[str, Any]:
    """Counts, seq range, gaps, rates, controllers, gains and resets for run.parquet."""
    seq = _np(frames, "seq")
    t = _np(frames, "t_s")
    step = np.diff(seq)
    dt = np.diff(t)
    period = frames.column("control_period_s").drop_null().to_numpy()
    out: dict[str, Any] = {
        "frame_count": int(len(seq)),
        "seq_first": int(seq[0]),
        "seq_last": int(seq[-1]),
        "gap_count": int(np.count_nonzero(step > 1)),
        "dropped": int(np.sum(step[step > 1] - 1)),
        "duration_s": float(t[-1] - t[0]),
        "rate_hz": float(1.0 / np.median(dt)) if dt.size and np.median(dt) > 0 else None,
        "tick_period_s": tick_period_s(seq, t),
        "stale_frames": int(pc.sum(frames.column("stale")).as_py() or 0),
        "control_period_median_s": float(np.median(period)) if period.size else None,
        "control_period_max_s": float(period.max()) if period.size else None,
    }
    out.update(_controller_stats(frames))
    out.update(_gain_stats(frames))
    masks = _nonfinite_masks(frames)  # one pass over the float columns for all three
    out["nan_tau_J"] = _rows_any(masks, _TAU_J)
    out["_non_finite_other"] = _rows_any(masks, [c for c in masks if c not in _TAU_J])
    out["nonfinite_frames"] = [{"column": name, "frames": count}
                               for name, (count, _) in masks.items()]
    return out


def nonfinite_counts(frames: pa.Table) -> list[dict[str, Any]]:
    """`[{column, frames}]`: for each canonical float column holding NaN or ±inf (null is
    "not recorded" and does not count), the number of frames where it does; canonical
    column order, columns without any left out."""
    return [{"column": name, "frames": count}
            for name, (count, _) in _nonfinite_masks(frames).items()]


def _nonfinite_masks(frames: pa.Table) -> dict[str, tuple[int, pa.ChunkedArray]]:
    """Canonical float column → (frames holding NaN or ±inf, that row mask; null → False),
    for the columns holding any, in canonical order."""
    masks = {}
    for name in _FLOAT_COLUMNS:
        col = frames.column(name)
        if col.null_count == len(col):
            continue
        bad = pc.invert(pc.is_finite(col))
        count = int(pc.sum(bad).as_py() or 0)
        if count:
            masks[name] = (count, pc.fill_null(bad, False))
    return masks


def _rows_any(masks: dict[str, tuple[int, pa.ChunkedArray]], names: list[str]) -> int:
    """Rows where any of `names` holds a non-finite value (`masks` of _nonfinite_masks)."""
    bad = None
    for name in names:
        if name in masks:
            bad = masks[name][1] if bad is None else pc.or_(bad, masks[name][1])
    return 0 if bad is None else int(pc.sum(bad).as_py() or 0)


def _controller_stats(frames: pa.Table) -> dict[str, Any]:
    ctrl = _np(frames, "controller")
    switch_at = np.flatnonzero(ctrl[1:] != ctrl[:-1]) + 1
    seen = [int(ctrl[0])] + [int(c) for c in ctrl[switch_at]]
    order = [c for c in dict.fromkeys(seen) if c >= 0]
    ji = ctrl == JOINT_IMPEDANCE
    resets = int(np.count_nonzero(ji[switch_at]))  # each entry into joint impedance
    if frames.column("joint_reset_count").null_count < frames.num_rows:
        resets += _changes(_np(frames, "joint_reset_count"), np.flatnonzero(ji))
    return {"controllers": order, "controller_switches": int(switch_at.size), "resets": resets}


def _changes(values: np.ndarray, rows: np.ndarray) -> int:
    """Consecutive pairs of `rows` (adjacent ticks only) whose value differs."""
    if rows.size < 2:
        return 0
    v = values[rows]
    return int(np.count_nonzero((v[1:] != v[:-1]) & (np.diff(rows) == 1)))


def _gain_stats(frames: pa.Table) -> dict[str, Any]:
    ji = np.flatnonzero(_np(frames, "controller") == JOINT_IMPEDANCE)
    if ji.size == 0 or frames.column("K_joint1").null_count == frames.num_rows:
        return {"K_joint": None, "D_joint": None, "filter_alpha": None,
                "joint_use_friction": None, "gain_changes": 0}
    first = [frames.column(c)[int(ji[0])].as_py() for c in _GAIN_COLS]
    changed = np.zeros(max(ji.size - 1, 0), bool)
    for name in _GAIN_COLS:
        lo_hi = pc.min_max(frames.column(name))
        if lo_hi["min"].as_py() == lo_hi["max"].as_py():
            continue  # constant wherever present: no change (the common case)
        v = _np(frames, name)[ji]
        changed |= (v[1:] != v[:-1]) & (np.diff(ji) == 1)
    friction = first[-1]
    return {"K_joint": [float(x) for x in first[:JOINTS]],
            "D_joint": [float(x) for x in first[JOINTS:2 * JOINTS]],
            "filter_alpha": first[-2],
            "joint_use_friction": None if friction is None else bool(friction),
            "gain_changes": int(np.count_nonzero(changed))}


def flags_for(stats: dict[str, Any], complete: bool | None) -> list[str]:
    """Flag names for imperfect-but-honest data, in a fixed order."""
    flags = []
    if stats["gap_count"]:
        flags.append("seq_gaps")
    if stats["controller_switches"]:
        flags.append("controller_switches")
    if stats["resets"]:
        flags.append("resets")
    if stats["gain_changes"]:
        flags.append("gain_changes")
    if stats["nan_tau_J"]:
        flags.append("nan_torque_sensor")
    if stats["_non_finite_other"]:
        flags.append("nonfinite")
    if stats.get("stale_frames"):
        flags.append("stale_rows")
    if complete is False:
        flags.append("incomplete")
    return flags


def verdict_for(flags: list[str], complete: bool | None) -> str:
    """`partial` (known incomplete), `flagged` (a flag about the run, not only about
    samples, see `SAMPLE_FLAGS`), else `ok`."""
    if complete is False:
        return "partial"
    return "flagged" if any(f not in SAMPLE_FLAGS for f in flags) else "ok"
