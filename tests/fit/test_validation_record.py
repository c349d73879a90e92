"""The one writer of validations: `publish_validation_record` checks the common columns and
publishes atomically; `fit validate` and the FrankaTwin import both go through it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from twinlake.catalog import Lake, PartitionExists, connect
from twinlake.fit.records.frankatwin_import import VALIDATION_SCHEMA as IMPORT_SCHEMA
from twinlake.fit.trust.validate import VALIDATION_SCHEMA
from twinlake.fit.records.validation_record import VALIDATION_COLUMNS, ValidationRecord, publish_validation_record


def _row(**changes) -> pa.Table:
    row = {f.name: None for f in VALIDATION_COLUMNS} | {"validation_source": "test", "run": "r1",
                                                         "q_rmse_rad": [0.1] * 7, "num_samples": 10}
    row |= changes
    return pa.Table.from_pylist([row], schema=VALIDATION_COLUMNS)


def test_every_validation_schema_has_the_common_columns():
    for schema in (VALIDATION_SCHEMA, IMPORT_SCHEMA):
        assert all(schema.field(f.name).type == f.type for f in VALIDATION_COLUMNS)


def test_publish_checks_the_row_and_refuses_to_overwrite(tmp_path):
    lake = Lake(tmp_path / "lake")
    traj = pa.table({"t_s": [0.0, 0.001]})
    path = publish_validation_record(lake, ValidationRecord("v1", _row(), b'{"a": 1}\n', traj))
    assert path == lake.validations_dir / "validation=v1"
    assert (path / "metrics.json").read_bytes() == b'{"a": 1}\n'
    assert sorted(p.name for p in path.iterdir()) == ["metrics.json", "trajectory.parquet", "validation.parquet"]
    assert connect(lake).execute("SELECT validation, run, num_samples FROM validations").fetchall() == [("v1", "r1", 10)]
    with pytest.raises(PartitionExists):
        publish_validation_record(lake, ValidationRecord("v1", _row(), b"{}"))
    publish_validation_record(lake, ValidationRecord("v1", _row(run="r2"), b"{}"), replace=True)
    assert not (path / "trajectory.parquet").exists()
    with pytest.raises(ValueError, match="missing column 'verdict'"):
        publish_validation_record(lake, ValidationRecord("v2", _row().drop_columns(["verdict"]), b"{}"))
    bad = _row().set_column(6, "num_samples", pa.array(["10"]))
    with pytest.raises(ValueError, match="column 'num_samples' is string, expected int64"):
        publish_validation_record(lake, ValidationRecord("v2", bad, b"{}"))
    with pytest.raises(ValueError, match="expected one row, got 2"):
        publish_validation_record(lake, ValidationRecord("v2", pa.concat_tables([_row(), _row()]), b"{}"))
    assert not (lake.validations_dir / "validation=v2").exists()
