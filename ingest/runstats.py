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
from .run_medians import RunMedians

JOINT_IMPEDANCE = 2
_GAIN_COLS = ([f"K_joint{j}" for j in range(1, JOINTS + 1)]
              + [f"D_joint{j}" for j in range(1, JOINTS + 1)]
              + ["filter_alpha", "joint_use_friction"])
_TAU_J = [f"tau_J{j}" for j in range(1, JOINTS + 1)]
_FLOAT_COLUMNS = [f.name for f in FRAME_SCHEMA if pa.types.is_floating(f.type)]
_JUDGED = ["seq", "controller", "joint_reset_count", *_GAIN_COLS]
"""The columns a chunk is judged with beside the last row of the chunk before it."""
SAMPLE_FLAGS = ("nan_torque_sensor", "nonfinite", "stale_rows")
"""Flags about single samples, not the run: they do not turn the verdict to `flagged`."""


def _np(frames: pa.Table, name: str, fill: float = np.nan) -> np.ndarray:
    col = frames.column(name)
    if col.null_count:
        col = pc.fill_null(col, fill if pa.types.is_floating(col.type) else -1)
    return numpy_of(col)


def numpy_of(col: pa.ChunkedArray) -> np.ndarray:
    """A column without nulls as numpy: a view of its one chunk's buffer (no copy), else a
    concatenation."""
    if col.num_chunks == 1:
        return col.chunk(0).to_numpy(zero_copy_only=False)
    return col.to_numpy()


def frame_stats(frames: pa.Table) -> dict[str, Any]:
    """Counts, seq range, gaps, rates, controllers, gains and resets for run.parquet."""
    stats = FrameStats()
    stats.add(frames)
    return stats.result()


class FrameStats:
    """`frame_stats` of a run's frames given in row order a chunk at a time (`add`), the same
    numbers as over the whole table: per-row counts add up, and each chunk is judged with the
    last row of the chunk before it prepended, so a change across a boundary (a seq gap, a
    controller switch, a gain change) counts once. The medians keep 17 bytes a row
    (`run_medians.RunMedians`), nothing else grows with the run."""

    def __init__(self) -> None:
        self._medians = RunMedians()
        self._period_max: float | None = None  # NaN once any period is NaN, as ndarray.max
        self._ends: list[tuple[int, float]] = []  # (seq, t_s) of the first and the last row
        self._carry: pa.Table | None = None  # the last row so far (the columns judged here)
        self._rows = 0
        self._counts = dict.fromkeys(("gap_count", "dropped", "stale_frames", "controller_switches",
                                      "resets", "nan_tau_J", "_non_finite_other"), 0)
        self._controllers: dict[int, None] = {}
        self._nonfinite = dict.fromkeys(_FLOAT_COLUMNS, 0)
        self._gains = _GainChanges()

    def add(self, frames: pa.Table) -> None:
        """Count the next `frames` (canonical columns, rows after those added before)."""
        if frames.num_rows == 0:
            return
        narrow = frames.select(_JUDGED)
        ext = narrow if self._carry is None else pa.concat_tables([self._carry, narrow])
        skip = 0 if self._carry is None else 1  # ext row `skip` is this chunk's first
        seq, t = _np(frames, "seq"), _np(frames, "t_s")
        period = frames.column("control_period_s").drop_null().to_numpy()
        self._medians.add(seq, t, period)
        if period.size:
            top = period.max()
            self._period_max = float(top if self._period_max is None
                                     else np.maximum(self._period_max, top))
        self._ends[1:] = [(int(seq[-1]), float(t[-1]))]
        if len(self._ends) == 1:
            self._ends.insert(0, (int(seq[0]), float(t[0])))
        step = np.diff(_np(ext, "seq"))
        c = self._counts
        c["gap_count"] += int(np.count_nonzero(step > 1))
        c["dropped"] += int(np.sum(step[step > 1] - 1))
        c["stale_frames"] += int(pc.sum(frames.column("stale")).as_py() or 0)
        self._add_controllers(ext, skip)
        self._gains.add(ext, self._rows - skip)
        masks = _nonfinite_masks(frames)  # one pass over the float columns for all three
        for name, (count, _) in masks.items():
            self._nonfinite[name] += count
        c["nan_tau_J"] += _rows_any(masks, _TAU_J)
        c["_non_finite_other"] += _rows_any(masks, [m for m in masks if m not in _TAU_J])
        self._rows += frames.num_rows
        self._carry = narrow.slice(narrow.num_rows - 1, 1)

    def _add_controllers(self, ext: pa.Table, skip: int) -> None:
        ctrl = _np(ext, "controller")
        switch_at = np.flatnonzero(ctrl[1:] != ctrl[:-1]) + 1
        seen = ([int(ctrl[0])] if not skip else []) + [int(x) for x in ctrl[switch_at]]
        self._controllers.update(dict.fromkeys(seen))
        ji = ctrl == JOINT_IMPEDANCE
        self._counts["controller_switches"] += int(switch_at.size)
        # each entry into joint impedance, and each change of the reset count within it
        self._counts["resets"] += int(np.count_nonzero(ji[switch_at])) + _changes(
            _np(ext, "joint_reset_count"), np.flatnonzero(ji))

    def result(self) -> dict[str, Any]:
        (seq_first, t_first), (seq_last, t_last) = self._ends
        medians = self._medians.result()
        out: dict[str, Any] = {
            "frame_count": self._rows, "seq_first": seq_first, "seq_last": seq_last,
            "gap_count": self._counts["gap_count"], "dropped": self._counts["dropped"],
            "duration_s": float(t_last - t_first),
            "rate_hz": medians["rate_hz"],
            "tick_period_s": medians["tick_period_s"],
            "stale_frames": self._counts["stale_frames"],
            "control_period_median_s": medians["control_period_median_s"],
            "control_period_max_s": self._period_max,
            "controllers": [c for c in self._controllers if c >= 0],
            "controller_switches": self._counts["controller_switches"],
            "resets": self._counts["resets"],
        }
        out.update(self._gains.result())
        out["nan_tau_J"] = self._counts["nan_tau_J"]
        out["_non_finite_other"] = self._counts["_non_finite_other"]
        out["nonfinite_frames"] = [{"column": name, "frames": count}
                                   for name, count in self._nonfinite.items() if count]
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
        if col.null_count == len(col) or _all_finite(col):
            continue
        bad = pc.invert(pc.is_finite(col))
        count = int(pc.sum(bad).as_py() or 0)
        if count:
            masks[name] = (count, pc.fill_null(bad, False))
    return masks


def _all_finite(col: pa.ChunkedArray) -> bool:
    """True when every non-null value of a float column is finite, from one sum (a sum is
    finite only if every term is; an overflow to ±inf of finite terms answers False, and
    the caller counts exactly)."""
    values = numpy_of(col if not col.null_count else pc.fill_null(col, 0.0))
    return bool(np.isfinite(np.add.reduce(values)))


def _rows_any(masks: dict[str, tuple[int, pa.ChunkedArray]], names: list[str]) -> int:
    """Rows where any of `names` holds a non-finite value (`masks` of _nonfinite_masks)."""
    bad = None
    for name in names:
        if name in masks:
            bad = masks[name][1] if bad is None else pc.or_(bad, masks[name][1])
    return 0 if bad is None else int(pc.sum(bad).as_py() or 0)


def _changes(values: np.ndarray, rows: np.ndarray) -> int:
    """Consecutive pairs of `rows` (adjacent ticks only) whose value differs."""
    if rows.size < 2:
        return 0
    v = values[rows]
    return int(np.count_nonzero((v[1:] != v[:-1]) & (np.diff(rows) == 1)))


class _GainChanges:
    """The gains at the first joint-impedance tick and the ticks where any gain changed
    between adjacent joint-impedance ticks, over chunks (row `offset` of `add`'s table is the
    run's row `offset`; its row 0 may be the previous chunk's last). A gain column whose
    values are one constant over the whole run counts no change (`min_max` over the run)."""

    def __init__(self) -> None:
        self.first: list | None = None
        self.k_recorded = False
        self.lows: dict[str, list] = {name: [] for name in _GAIN_COLS}
        self.highs: dict[str, list] = {name: [] for name in _GAIN_COLS}
        self.changed: dict[str, list[np.ndarray]] = {name: [] for name in _GAIN_COLS}

    def add(self, ext: pa.Table, offset: int) -> None:
        ji = np.flatnonzero(_np(ext, "controller") == JOINT_IMPEDANCE)
        self.k_recorded |= ext.column("K_joint1").null_count < ext.num_rows
        if ji.size and self.first is None:
            self.first = [ext.column(c)[int(ji[0])].as_py() for c in _GAIN_COLS]
        adjacent = np.diff(ji) == 1
        for name in _GAIN_COLS:
            low, high, plain = _min_max(ext.column(name))
            self.lows[name].append(low)
            self.highs[name].append(high)
            if ji.size < 2 or (plain and low == high):  # one value here and the row before
                continue
            v = _np(ext, name)[ji]
            rows = ji[1:][(v[1:] != v[:-1]) & adjacent]
            if rows.size:
                self.changed[name].append(rows + offset)

    def result(self) -> dict[str, Any]:
        if self.first is None or not self.k_recorded:
            return {"K_joint": None, "D_joint": None, "filter_alpha": None,
                    "joint_use_friction": None, "gain_changes": 0}
        changed: set[int] = set()
        for name in _GAIN_COLS:
            low, high = pc.min(pa.array(self.lows[name])), pc.max(pa.array(self.highs[name]))
            if low.as_py() == high.as_py() or not self.changed[name]:
                continue  # constant wherever present: no change (the common case)
            changed.update(np.concatenate(self.changed[name]).tolist())
        first, friction = self.first, self.first[-1]
        return {"K_joint": [float(x) for x in first[:JOINTS]],
                "D_joint": [float(x) for x in first[JOINTS:2 * JOINTS]],
                "filter_alpha": first[-2],
                "joint_use_friction": None if friction is None else bool(friction),
                "gain_changes": len(changed)}


def _min_max(col: pa.ChunkedArray) -> tuple[Any, Any, bool]:
    """(min, max, plain) of a column's non-null values as `pc.min_max` gives them (Python
    values, None when all null); numpy's on a column without nulls or NaN (the same
    numbers), `plain` then True."""
    if not col.null_count and len(col):
        values = numpy_of(col)
        low, high = values.min(), values.max()
        if values.dtype.kind != "f" or not (np.isnan(low) or np.isnan(high)):
            return low.item(), high.item(), True
    lo_hi = pc.min_max(col)
    return lo_hi["min"].as_py(), lo_hi["max"].as_py(), False


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
