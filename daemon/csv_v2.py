"""fr3_stack CSV v2: the 80-column 1 kHz recording format (fr3_stack `src/ring_log_writer.cpp`, docs/formats.md) and its batch formatter.

A frame is one row of 80 float64 values in CSV column order (`FRAME_WIDTH`); integer columns
(`seq`, `controller`, `schema_version`, `joint_target_valid`, `joint_use_friction`,
`joint_reset_count`) hold exact integers. `format_rows` turns an (n, 80) array into text with
one C-level formatting call per batch: doubles as `%.12g` (NaN → `nan`), integers as integers.
A column that holds one value throughout the batch (gains, filter, schema, ...) is formatted
once and written into the row template as text, so only the changing columns cost a conversion.
`format_rows_bytes` writes the same bytes with a compiled formatter (csv_text.py), no Python
per value: the offline recorder's.
"""

from __future__ import annotations

import numpy as np

from ..contracts.csv_v2 import COLUMNS, SCHEMA_VERSION
from ..contracts.csv_v2 import INTEGER_COLUMNS as INT_COLUMNS

FRAME_WIDTH = len(COLUMNS)
HEADER = ",".join(COLUMNS) + "\n"
_SPECS = tuple("%d" if c in INT_COLUMNS else "%.12g" for c in COLUMNS)
_ROW_FORMAT = ",".join(_SPECS) + "\n"


def _slice(first: str, n: int = 1) -> slice:
    start = COLUMNS.index(first)
    return slice(start, start + n)


# Column groups of a frame row (slices into the 80 values).
SEQ = _slice("seq")
T_S = _slice("t_s")
Q = _slice("q0", 7)
DQ = _slice("dq0", 7)
TAU_J = _slice("tau_J0", 7)
TAU_CMD = _slice("tau_cmd0", 7)
EE_POSE = _slice("ee_px", 7)
TGT_POSE = _slice("tgt_px", 7)
CONTROLLER = _slice("controller")
SCHEMA = _slice("schema_version")
JOINT_TARGET_VALID = _slice("joint_target_valid")
Q_TARGET = _slice("q_target0", 7)
Q_TARGET_FILTERED = _slice("q_target_filtered0", 7)
K_JOINT = _slice("K_joint0", 7)
D_JOINT = _slice("D_joint0", 7)
FILTER_ALPHA = _slice("filter_alpha")
JOINT_USE_FRICTION = _slice("joint_use_friction")
JOINT_RESET_COUNT = _slice("joint_reset_count")
ROBOT_TIME_S = _slice("robot_time_s")
CONTROL_PERIOD_S = _slice("control_period_s")
_INT_INDEX = np.array([COLUMNS.index(c) for c in sorted(INT_COLUMNS)])


def format_rows(rows: np.ndarray) -> str:
    """Format an (n, 80) float64 frame array as CSV v2 lines (no header), `%.12g` doubles.

    The whole batch goes through one `%` operation; raises ValueError on a wrong shape or a
    non-finite value in an integer column.
    """
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != FRAME_WIDTH:
        raise ValueError(f"CSV v2 frames: expected shape (n, {FRAME_WIDTH}), got {rows.shape}")
    if rows.shape[0] == 0:
        return ""
    if not np.isfinite(rows[:, _INT_INDEX]).all():
        raise ValueError("CSV v2 frames: integer column holds a non-finite value")
    if rows.shape[0] == 1:
        return _ROW_FORMAT % tuple(rows[0].tolist())
    first = rows[0]
    # NaN never compares equal (such columns stay per row); −0.0 == 0.0 but prints differently
    constant = ((rows == first) & (np.signbit(rows) == np.signbit(first))).all(axis=0)
    template = ",".join((spec % value) if same else spec
                        for spec, value, same in zip(_SPECS, first.tolist(), constant.tolist())) + "\n"
    varying = rows[:, ~constant] if constant.any() else rows
    return (template * rows.shape[0]) % tuple(varying.ravel().tolist())


_INT_MASK = np.zeros(FRAME_WIDTH, dtype=bool)
_INT_MASK[_INT_INDEX] = True
_INT_LIMIT = 2.0 ** 63


def format_rows_bytes(rows: np.ndarray) -> bytes:
    """`format_rows(rows).encode()`, byte for byte, from the compiled formatter (csv_text.py).

    Raises ValueError as format_rows does (wrong shape, non-finite integer column), and on an
    integer column beyond ±2^63."""
    from .csv_text import format_rows_bytes as compiled

    return compiled(_checked(rows), _INT_MASK)


def text_bytes_needed(rows: np.ndarray) -> int:
    """An upper bound of the bytes `format_rows_into` writes for rows (n, 80)."""
    from .csv_text import text_bytes_needed as needed

    return needed(rows)


def format_rows_into(rows: np.ndarray, out: np.ndarray) -> int:
    """format_rows_bytes(rows) into out (uint8, ≥ text_bytes_needed(rows)) → bytes written;
    the compiled formatter runs without the GIL. Raises as format_rows_bytes."""
    from .csv_text import format_rows_into as compiled

    return compiled(_checked(rows), _INT_MASK, out)


def _checked(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != FRAME_WIDTH:
        raise ValueError(f"CSV v2 frames: expected shape (n, {FRAME_WIDTH}), got {rows.shape}")
    ints = rows[:, _INT_INDEX]
    if not np.isfinite(ints).all():
        raise ValueError("CSV v2 frames: integer column holds a non-finite value")
    if ints.size and np.abs(ints).max() >= _INT_LIMIT:
        raise ValueError("CSV v2 frames: integer column holds a value beyond ±2^63")
    return rows


def empty_frames(n: int) -> np.ndarray:
    """An (n, 80) frame array of zeros with `schema_version` = 2 set."""
    frames = np.zeros((n, FRAME_WIDTH), dtype=np.float64)
    frames[:, SCHEMA] = SCHEMA_VERSION
    return frames
