"""The one-query judgement of canonical frames (`validate.passes_rules`) agrees with pandera
on valid and invalid frames, and a violation still raises an error naming the file line
and field (pandera, run only then, names it)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from twinlake.ingest.fr3_stack.recording_csv import FORMAT, read_header
from twinlake.ingest.registry import IngestError, ReadOptions, readers
from twinlake.ingest.samples import SampleSpec, write_sample
from twinlake.ingest.tick_grid import frames_on_grid
from twinlake.catalog import FRAME_SCHEMA
from twinlake.ingest.validate import frame_schema, passes_rules, validate_frames


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> pa.Table:
    path = write_sample(tmp_path_factory.mktemp("v") / "run.csv",
                        SampleSpec(rows=300, seed=5, nan_tau_rows=(7,)))
    assert "seq" in read_header(path)
    reader = next(r for r in readers() if r.name == FORMAT)
    unit = reader.read(path, ReadOptions(robot="r"))
    return frames_on_grid(path, unit)


def _set(frames: pa.Table, name: str, row: int, value) -> pa.Table:
    values = frames.column(name).to_pylist()
    values[row] = value
    i = frames.column_names.index(name)
    return frames.set_column(i, name, pa.array(values, frames.schema.field(name).type))


def _canon(frames: pa.Table) -> pa.Table:
    return frames.select([f.name for f in FRAME_SCHEMA if f.name in frames.column_names])


def _pandera_accepts(frames: pa.Table) -> bool:
    import pandera.polars as pap
    import polars as pl

    try:
        frame_schema(2).validate(pl.from_arrow(_canon(frames)), lazy=True)
    except (pap.errors.SchemaErrors, pap.errors.SchemaError):
        return False
    return True


VARIANTS = {
    "valid": lambda f: f,
    "q4 beyond its limit": lambda f: _set(f, "q4", 40, 0.5),
    "q2 NaN (a sample, data)": lambda f: _set(f, "q2", 41, float("nan")),
    "dq5 +inf (data)": lambda f: _set(f, "dq5", 42, float("inf")),
    "dq1 beyond 10 rad/s": lambda f: _set(f, "dq1", 43, -12.0),
    "t_s NaN": lambda f: _set(f, "t_s", 44, float("nan")),
    "t_s null": lambda f: _set(f, "t_s", 45, None),
    "controller 9": lambda f: _set(f, "controller", 46, 9),
    "controller null": lambda f: _set(f, "controller", 47, None),
    "schema_version 3": lambda f: _set(f, "schema_version", 48, 3),
    "seq type int32": lambda f: f.set_column(f.column_names.index("seq"), "seq",
                                             f.column("seq").cast(pa.int32())),
    "q1 missing": lambda f: f.drop_columns(["q1"]),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_one_query_agrees_with_pandera(frames, name):
    variant = VARIANTS[name](frames)
    assert passes_rules(_canon(variant), 2) == _pandera_accepts(variant)


def test_the_variants_cover_both_verdicts(frames):
    verdicts = {name: _pandera_accepts(make(frames)) for name, make in VARIANTS.items()}
    assert verdicts["valid"] and verdicts["q2 NaN (a sample, data)"] and verdicts["controller null"]
    assert not verdicts["q4 beyond its limit"] and not verdicts["t_s NaN"]
    assert not verdicts["seq type int32"] and not verdicts["q1 missing"]


@pytest.mark.parametrize("column, row, value, words", [
    ("q4", 40, 0.5, ["run.csv:42", "'q4'", "physical limits"]),
    ("t_s", 44, float("nan"), ["run.csv:46", "'t_s'", "not finite"]),
    ("schema_version", 48, 3, ["run.csv:50", "'schema_version'", "value 3"]),
])
def test_a_violation_names_the_line_and_field(frames, tmp_path, column, row, value, words):
    bad = _set(frames, column, row, value)
    with pytest.raises(IngestError) as err:
        validate_frames(tmp_path / "run.csv", bad, 2, first_line=2)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert np.isfinite(frames.column("t_s").to_numpy()).all()  # the fixture itself is untouched
