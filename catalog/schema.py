"""Canonical Arrow schemas of the lake's run partition files.

`FRAME_SCHEMA`: `frames.parquet`, one row per control tick (docs/architecture.md, canonical
frame columns). `RUN_SCHEMA`: `run.parquet`, one row per run. `robot` and `run` are Hive
partition columns taken from the path, never stored in the files. A column a source did
not record is null, never zero. Sources may append their own extra columns.
"""

from __future__ import annotations

import pyarrow as pa

JOINTS = 7
POSE_SUFFIXES = ("px", "py", "pz", "qx", "qy", "qz", "qw")


def _joint_cols(prefix: str) -> list[str]:
    return [f"{prefix}{j}" for j in range(1, JOINTS + 1)]


def _frame_fields() -> list[pa.Field]:
    f64 = pa.float64()
    fields = [pa.field("seq", pa.int64(), nullable=False), pa.field("t_s", f64)]
    for prefix in ("q", "dq", "tau_J", "tau_cmd"):
        fields += [pa.field(c, f64) for c in _joint_cols(prefix)]
    fields += [pa.field(f"ee_{s}", f64) for s in POSE_SUFFIXES]
    fields += [pa.field(f"tgt_{s}", f64) for s in POSE_SUFFIXES]
    fields += [
        pa.field("controller", pa.int32()),
        pa.field("schema_version", pa.int32()),
        pa.field("joint_target_valid", pa.int8()),
    ]
    for prefix in ("q_target", "q_target_filtered", "K_joint", "D_joint"):
        fields += [pa.field(c, f64) for c in _joint_cols(prefix)]
    fields += [
        pa.field("filter_alpha", f64),
        pa.field("joint_use_friction", pa.int8()),
        pa.field("joint_reset_count", pa.int64()),
        pa.field("robot_time_s", f64),
        pa.field("control_period_s", f64),
    ]
    # desired joint velocity and the robot's external torque estimate (libfranka's dq_d and
    # tau_ext_hat_filtered: mapped logs, bags); null where a source did not record them
    for prefix in ("dq_target", "tau_ext"):
        fields += [pa.field(c, f64) for c in _joint_cols(prefix)]
    fields += [
        # a stale repeat: q, dq and tau_J identical to the row before while the arm moves
        # (set by ingest for every source, ingest/tick_grid.py; never interpolated)
        pa.field("stale", pa.bool_()),
    ]
    return fields


FRAME_SCHEMA: pa.Schema = pa.schema(_frame_fields())
"""Canonical `frames.parquet` columns (95), in this order; see docs/lake.md for units."""

RAW_FILE_TYPE = pa.struct(
    [
        pa.field("name", pa.string()),  # original file name
        pa.field("role", pa.string()),  # "recording", "status", "metadata", ...
        pa.field("sha256", pa.string()),  # of the original bytes
        pa.field("size_bytes", pa.int64()),
        pa.field("stored_as", pa.string()),  # path inside the partition, e.g. raw/x.csv.zst
    ]
)

NONFINITE_COUNT_TYPE = pa.struct([pa.field("column", pa.string()), pa.field("frames", pa.int64())])
"""Frames of one canonical column holding NaN or ±inf (stored as recorded, never null)."""

RECORDED_GAP_TYPE = pa.struct([pa.field("seq_from", pa.int64()), pa.field("seq_to", pa.int64())])
"""One lost seq range a source recorded (FrankaTwin ring log `gaps`), inclusive."""

RUN_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("source_format", pa.string()),  # e.g. "fr3_stack_csv"
        pa.field("source_version", pa.int32()),  # e.g. 2 for CSV v2
        pa.field("source_file", pa.string()),  # name of the primary raw file
        pa.field("raw_sha256", pa.string()),  # SHA-256 of the primary raw file
        pa.field("raw_files", pa.list_(RAW_FILE_TYPE)),
        pa.field("recording_id", pa.string()),
        pa.field("frame_count", pa.int64()),
        pa.field("seq_first", pa.int64()),
        pa.field("seq_last", pa.int64()),
        pa.field("gap_count", pa.int64()),  # number of seq jumps > 1
        pa.field("dropped", pa.int64()),  # ticks missing from the seq range (sum of jumps)
        pa.field("resets", pa.int64()),  # joint_reset_count increments inside the run
        pa.field("duration_s", pa.float64()),  # last t_s - first t_s
        pa.field("rate_hz", pa.float64()),  # 1 / median(diff(t_s))
        pa.field("tick_period_s", pa.float64()),  # median t_s step per seq step: the run's tick
        pa.field("tick_grid", pa.string()),  # "recorded" (source's seq) | "rebuilt" (from t_s)
        pa.field("stale_frames", pa.int64()),  # frames flagged `stale` (repeated rows)
        pa.field("control_period_median_s", pa.float64()),
        pa.field("control_period_max_s", pa.float64()),
        pa.field("controllers", pa.list_(pa.int32())),  # distinct, in order of appearance
        pa.field("controller_switches", pa.int64()),
        pa.field("K_joint", pa.list_(pa.float64())),  # first applied under joint impedance
        pa.field("D_joint", pa.list_(pa.float64())),
        pa.field("filter_alpha", pa.float64()),
        pa.field("joint_use_friction", pa.bool_()),
        pa.field("gain_changes", pa.int64()),  # rows where K/D/alpha/friction changed (JI)
        pa.field("nan_tau_J", pa.int64()),  # rows with a non-finite torque-sensor value
        # per canonical column with NaN/±inf: how many frames (only such columns, in order)
        pa.field("nonfinite_frames", pa.list_(NONFINITE_COUNT_TYPE)),
        pa.field("complete", pa.bool_()),  # null when no status file says so
        pa.field("completion_confirmed", pa.bool_()),  # a status file confirmed completion
        pa.field("status_written", pa.int64()),
        pa.field("status_discarded", pa.int64()),
        pa.field("status_dropped", pa.int64()),
        pa.field("status_error", pa.string()),
        pa.field("robot_id", pa.string()),  # from companion metadata, if any
        pa.field("payload_kg", pa.float64()),
        pa.field("metadata_json", pa.string()),  # companion metadata, verbatim JSON
        pa.field("fit_eligible", pa.bool_()),  # 1 kHz data a fit may use (null: source did not say)
        pa.field("recorded_gaps", pa.list_(RECORDED_GAP_TYPE)),  # lost seq ranges a source recorded
        pa.field("verdict", pa.string()),  # "ok" | "flagged" | "partial"
        pa.field("reasons", pa.list_(pa.string())),
        pa.field("flags", pa.list_(pa.string())),  # seq_gaps, controller_switches, resets, ...
        pa.field("twinlake_version", pa.string()),
    ]
)
"""Canonical `run.parquet` columns (one row per run)."""
