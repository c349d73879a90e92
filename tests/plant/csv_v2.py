"""The test plant's own writer of fr3_stack's 1 kHz recording CSV v2 and its stop status.

Layout as fr3_stack's `ring_log_writer.cpp` documents it: one header line (no preamble),
commas, no quoting, no trailing comma, `\\n` line ends; 80 columns = the 45 legacy ones
(`seq, t_s, q0..6, dq0..6, tau_J0..6, tau_cmd0..6, ee_px..ee_qw, tgt_px..tgt_qw, controller`)
then 35 appended (`schema_version` (= 2), `joint_target_valid`, `q_target0..6`,
`q_target_filtered0..6`, `K_joint0..6`, `D_joint0..6`, `filter_alpha`, `joint_use_friction`,
`joint_reset_count`, `robot_time_s`, `control_period_s`). Suffixes 0..6 are J1..J7. Doubles
print as `%.12g`, integers as plain decimals. The file is created exclusively (fr3_stack
opens it with mode `"wx"`), so an existing file is never overwritten.

The status is the 11-key object fr3_stack's `fr3-recording stop` prints
(`recording_id, path, active, ok, finished, complete, written, discarded, dropped, error,
error_code`), written beside the CSV as `<stem>.status.json`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

_J = range(7)
_POSE = ("px", "py", "pz", "qx", "qy", "qz", "qw")

LEGACY_COLUMNS: tuple[str, ...] = (
    ("seq", "t_s")
    + tuple(f"{name}{j}" for name in ("q", "dq", "tau_J", "tau_cmd") for j in _J)
    + tuple(f"ee_{p}" for p in _POSE)
    + tuple(f"tgt_{p}" for p in _POSE)
    + ("controller",)
)
APPENDED_COLUMNS: tuple[str, ...] = (
    ("schema_version", "joint_target_valid")
    + tuple(f"{name}{j}" for name in ("q_target", "q_target_filtered", "K_joint", "D_joint")
            for j in _J)
    + ("filter_alpha", "joint_use_friction", "joint_reset_count", "robot_time_s",
       "control_period_s")
)
COLUMNS: tuple[str, ...] = LEGACY_COLUMNS + APPENDED_COLUMNS
INTEGER_COLUMNS = frozenset({"seq", "controller", "schema_version", "joint_target_valid",
                             "joint_use_friction", "joint_reset_count"})
STATUS_KEYS = ("recording_id", "path", "active", "ok", "finished", "complete", "written",
               "discarded", "dropped", "error", "error_code")
_RECORDING_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_BLOCK_ROWS = 4096

assert len(LEGACY_COLUMNS) == 45 and len(APPENDED_COLUMNS) == 35


def column_index(name: str) -> int:
    """0-based position of a CSV column."""
    return COLUMNS.index(name)


def joint_columns(prefix: str) -> slice:
    """The 7 columns `<prefix>0..6` as a slice of a row."""
    start = column_index(f"{prefix}0")
    return slice(start, start + 7)


def header_line() -> str:
    return ",".join(COLUMNS) + "\n"


def row_format() -> str:
    """printf-style format of one row: `%d` for the integer columns, `%.12g` for doubles."""
    return ",".join("%d" if c in INTEGER_COLUMNS else "%.12g" for c in COLUMNS) + "\n"


def write_csv_v2(path: str | Path, rows: np.ndarray) -> Path:
    """Write `rows` (T, 80), columns in `COLUMNS` order (integer columns hold whole numbers),
    to a new file `path`; FileExistsError if it exists."""
    path = Path(path)
    rows = np.asarray(rows, dtype=float)
    if rows.ndim != 2 or rows.shape[1] != len(COLUMNS):
        raise ValueError(f"{path}: expected rows of shape (T, {len(COLUMNS)}), got {rows.shape}")
    ints = [column_index(c) for c in sorted(INTEGER_COLUMNS)]
    if not np.all(np.isfinite(rows[:, ints])) or np.any(rows[:, ints] != np.rint(rows[:, ints])):
        raise ValueError(f"{path}: integer columns must hold whole numbers")
    fmt = row_format()
    with open(path, "x", encoding="ascii", newline="\n") as fh:
        fh.write(header_line())
        for start in range(0, len(rows), _BLOCK_ROWS):
            block = rows[start:start + _BLOCK_ROWS].tolist()
            fh.write("".join(fmt % tuple(row) for row in block))
    return path


def check_recording_id(recording_id: str) -> str:
    """fr3_stack's ID rule: 1-128 characters from [A-Za-z0-9_-]."""
    if not isinstance(recording_id, str) or not _RECORDING_ID.match(recording_id):
        raise ValueError(f"recording_id: expected 1-128 characters from [A-Za-z0-9_-], got "
                         f"{recording_id!r}")
    return recording_id


def complete_status(csv_path: str | Path, rows: int, recording_id: str) -> dict:
    """The status of a healthy stop: not active, ok, finished, complete, `written` = rows,
    nothing discarded or dropped, no error."""
    return {"recording_id": check_recording_id(recording_id),
            "path": str(Path(csv_path).resolve()), "active": False, "ok": True,
            "finished": True, "complete": True, "written": int(rows), "discarded": 0,
            "dropped": 0, "error": "", "error_code": 0}


def status_path(csv_path: str | Path) -> Path:
    return Path(csv_path).with_suffix(".status.json")


def meta_path(csv_path: str | Path) -> Path:
    return Path(csv_path).with_suffix(".meta.json")


def write_status(csv_path: str | Path, status: dict) -> Path:
    """`<stem>.status.json`: one JSON line, keys in fr3_stack's order (exclusive create)."""
    missing = [k for k in STATUS_KEYS if k not in status]
    if missing:
        raise ValueError(f"status: missing keys {missing}")
    out = status_path(csv_path)
    with open(out, "x", encoding="utf-8") as fh:
        fh.write(json.dumps({k: status[k] for k in STATUS_KEYS}) + "\n")
    return out


def write_meta(csv_path: str | Path, meta: dict) -> Path:
    """`<stem>.meta.json`: experiment metadata (indent 2, sorted keys, no NaN)."""
    out = meta_path(csv_path)
    with open(out, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(meta, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return out
