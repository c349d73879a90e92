"""twinlake.catalog: the lake on disk and the DuckDB catalog over it.

Public API (stable; other folders use only these): `resolve_lake`, `Lake`,
`publish_partition`, `PartitionExists`, `quarantine`, `sha256_file`, `connect`, `load_sql`,
`clean_intervals` (the clean gap-free intervals of sql/clean_intervals.sql),
plus the canonical schemas `FRAME_SCHEMA`, `RUN_SCHEMA` and the ordered `SQL_FILES`.
"""

from twinlake.catalog.lake import Lake, check_id, resolve_lake, sha256_file
from twinlake.catalog.publish import (
    PartitionExists,
    atomic_write_bytes,
    atomic_write_text,
    clean_staging,
    new_staging_dir,
    publish_partition,
    quarantine,
)
from twinlake.catalog.schema import FRAME_SCHEMA, JOINTS, RAW_FILE_TYPE, RUN_SCHEMA
from twinlake.catalog.read_only import ReadOnlyConnection, ReadOnlyRefused
from twinlake.catalog.sql import SQL_FILES, connect, load_sql
from twinlake.catalog.intervals import clean_intervals

__all__ = [
    "FRAME_SCHEMA",
    "JOINTS",
    "Lake",
    "PartitionExists",
    "RAW_FILE_TYPE",
    "RUN_SCHEMA",
    "ReadOnlyConnection",
    "ReadOnlyRefused",
    "SQL_FILES",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_id",
    "clean_intervals",
    "clean_staging",
    "connect",
    "load_sql",
    "new_staging_dir",
    "publish_partition",
    "quarantine",
    "resolve_lake",
    "sha256_file",
]
