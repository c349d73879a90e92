"""twinlake.catalog: the lake on disk and the DuckDB catalog over it.

Public API (stable; other folders use only these): `resolve_lake`, `open_lake`,
`lake_location`, `parse_location`, `LakeLocation`, `ObjectStorageLake`, `published_file`,
`current_version` (the commit log's latest version), `Lake`,
`publish_partition`, `PartitionExists`, `quarantine`, `sha256_file`, `atomic_write_bytes`,
`atomic_write_text`, `connect` (read-only by default: `ReadOnlyConnection`,
`ReadOnlyRefused`), `load_sql`, `clean_intervals` (the clean gap-free intervals of
sql/clean_intervals.sql), the selection of recorded data (`parse_selector`, `resolve_run`,
`run_intervals`, `pick_interval`, `run_frames`, `resolve_intervals`, `interval_frames`,
`IntervalRef`, `IntervalFrames`, `RunSelector`, `SelectionError`), plus the canonical schemas
`FRAME_SCHEMA`, `RUN_SCHEMA` and the ordered `SQL_FILES`.
"""

from ..contracts.lazy import lazy_exports
from .durable import atomic_write_bytes, atomic_write_text
from .lake import Lake, ObjectStorageLake, check_id, lake_location, open_lake, resolve_lake, sha256_file
from .location import LakeLocation, parse_location
from .publish import (
    PartitionExists,
    clean_staging,
    new_staging_dir,
    publish_partition,
    quarantine,
)
from .schema import FRAME_SCHEMA, JOINTS, RAW_FILE_TYPE, RUN_SCHEMA

# The DuckDB side (connect, the read-only connection, intervals, selection) is imported on
# first use (PEP 562): a process that only writes the lake (`twinlake ingest`) imports duckdb
# only to store a published run's intervals (catalog/stored_intervals.py), never pandas.
__getattr__, __dir__, _ = lazy_exports(__name__, globals(), {
    "read_only": ("ReadOnlyConnection", "ReadOnlyRefused"),
    "sql": ("SQL_FILES", "connect", "load_sql"),
    "intervals": ("clean_intervals", "prepare_run_intervals", "stage_run_intervals"),
    "local_log": ("current_version",),
    "object_publish": ("published_file",),
    "session": ("is_session",),
    "selection": ("IntervalFrames", "IntervalRef", "RunSelector", "SelectionError", "interval_frames",
                  "parse_selector", "pick_interval", "resolve_intervals", "resolve_run", "run_frames",
                  "run_intervals"),
})


__all__ = [
    "FRAME_SCHEMA",
    "IntervalFrames",
    "IntervalRef",
    "JOINTS",
    "Lake",
    "LakeLocation",
    "ObjectStorageLake",
    "PartitionExists",
    "RAW_FILE_TYPE",
    "RUN_SCHEMA",
    "prepare_run_intervals",
    "stage_run_intervals",
    "ReadOnlyConnection",
    "ReadOnlyRefused",
    "RunSelector",
    "SelectionError",
    "SQL_FILES",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_id",
    "clean_intervals",
    "clean_staging",
    "connect",
    "current_version",
    "interval_frames",
    "is_session",
    "lake_location",
    "load_sql",
    "new_staging_dir",
    "open_lake",
    "parse_location",
    "parse_selector",
    "pick_interval",
    "publish_partition",
    "published_file",
    "quarantine",
    "resolve_intervals",
    "resolve_lake",
    "resolve_run",
    "run_frames",
    "run_intervals",
    "sha256_file",
]
