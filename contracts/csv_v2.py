"""fr3_stack CSV v2's columns: the one definition the daemon (writer) and ingest (reader) share.

fr3_stack's `src/ring_log_writer.cpp` writes a 1 kHz recording as CSV: 45 legacy columns (v1),
then, from schema version 2, 35 appended ones (docs/formats.md has each column's meaning and
unit). Joint columns are 0-based (`q0` … `q6`).
"""

from __future__ import annotations

SCHEMA_VERSION = 2
JOINTS = 7
_J = range(JOINTS)
_POSE = ("px", "py", "pz", "qx", "qy", "qz", "qw")

LEGACY_COLUMNS: tuple[str, ...] = (
    ("seq", "t_s")
    + tuple(f"{p}{j}" for p in ("q", "dq", "tau_J", "tau_cmd") for j in _J)
    + tuple(f"ee_{s}" for s in _POSE)
    + tuple(f"tgt_{s}" for s in _POSE)
    + ("controller",)
)
"""The 45 legacy (v1) columns, in file order."""

APPENDED_COLUMNS: tuple[str, ...] = (
    ("schema_version", "joint_target_valid")
    + tuple(f"{p}{j}" for p in ("q_target", "q_target_filtered", "K_joint", "D_joint") for j in _J)
    + ("filter_alpha", "joint_use_friction", "joint_reset_count", "robot_time_s", "control_period_s")
)
"""The 35 columns schema version 2 appends, in file order."""

COLUMNS: tuple[str, ...] = LEGACY_COLUMNS + APPENDED_COLUMNS
"""The 80 columns of CSV v2, in file order."""

INTEGER_COLUMNS = frozenset(
    {"seq", "controller", "schema_version", "joint_target_valid", "joint_use_friction", "joint_reset_count"}
)
"""Columns that hold exact integers (written without a decimal point)."""

assert len(LEGACY_COLUMNS) == 45 and len(COLUMNS) == 80

__all__ = ["APPENDED_COLUMNS", "COLUMNS", "INTEGER_COLUMNS", "JOINTS", "LEGACY_COLUMNS", "SCHEMA_VERSION"]
