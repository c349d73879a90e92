"""The validation partition `<lake>/validations/validation=<id>/`: its record and its one writer.

Files (the lake contract, docs/architecture.md):

- `validation.parquet`: one row with at least `VALIDATION_COLUMNS` (the columns the
  `validations` view and `fit show` read), then the source's own columns;
- `metrics.json`: FrankaTwin's metrics document, byte for byte as given;
- `trajectory.parquet` (when the source has samples): t_s, recorded and simulated q / dq.

Every validation, scored here (`twinlake fit validate`, `fit/trust/validate.py`) or imported from
FrankaTwin (`twinlake.fit.records.frankatwin_import`), is a `ValidationRecord` published by
`publish_validation_record`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import RecordError
from ...catalog import Lake, publish_partition

VALIDATION_COLUMNS = pa.schema([
    ("validation_source", pa.string()), ("created_utc", pa.string()), ("robot", pa.string()),
    ("run", pa.string()), ("fit", pa.string()), ("sim_label", pa.string()), ("num_samples", pa.int64()),
    ("duration_s", pa.float64()), ("ee_pos_rmse_3d_m", pa.float64()), ("ee_ori_rmse_rad", pa.float64()),
    ("q_rmse_all_rad", pa.float64()), ("dq_rmse_all_rad_s", pa.float64()), ("q_rmse_rad", pa.list_(pa.float64())),
    ("verdict", pa.string()), ("thresholds_json", pa.string()), ("metrics_json", pa.string()),
])
"""Columns every validation.parquet has (units in the names; `verdict` null when nothing was
declared, as for an import)."""


@dataclass
class ValidationRecord:
    """One validation as stored: `row` is validation.parquet (one row, `VALIDATION_COLUMNS`
    and the source's own columns), `metrics_json` the bytes of metrics.json, `trajectory`
    trajectory.parquet or None."""

    validation_id: str
    row: pa.Table
    metrics_json: bytes
    trajectory: pa.Table | None = None

    def check(self) -> None:
        """ValueError naming what is wrong when `row` breaks the validation.parquet contract."""
        where = f"validation {self.validation_id}: validation.parquet"
        if self.row.num_rows != 1:
            raise RecordError(f"{where}: expected one row, got {self.row.num_rows}")
        for want in VALIDATION_COLUMNS:
            index = self.row.schema.get_field_index(want.name)
            if index < 0:
                raise RecordError(f"{where}: missing column {want.name!r}")
            if self.row.schema.field(index).type != want.type:
                raise RecordError(f"{where}: column {want.name!r} is {self.row.schema.field(index).type}, "
                                 f"expected {want.type}")


def write_validation_files(directory: Path, rec: ValidationRecord) -> None:
    """Write validation.parquet, metrics.json and trajectory.parquet (if any) into `directory`."""
    pq.write_table(rec.row, directory / "validation.parquet")
    (directory / "metrics.json").write_bytes(rec.metrics_json)
    if rec.trajectory is not None:
        pq.write_table(rec.trajectory, directory / "trajectory.parquet")


def publish_validation_record(lake: Lake | str | Path, rec: ValidationRecord, *,
                              replace: bool = False) -> Path:
    """Check `rec` and publish it atomically as `<lake>/validations/validation=<id>/`; returns
    the partition path. `PartitionExists` when it is there and not `replace`."""
    rec.check()
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    rel = f"validations/validation={rec.validation_id}"
    return publish_partition(lk, rel, lambda d: write_validation_files(d, rec), replace=replace)


__all__ = ["VALIDATION_COLUMNS", "ValidationRecord", "publish_validation_record", "write_validation_files"]
