"""Integer columns written as integral floats (`0.0`, `17.0`, as pandas writes an integer
column that went through floats) are read as integers by every CSV reader; `0.5` is still
refused with the line and the field. Through the real `twinlake ingest`, real Parquet."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

import formats_fixtures as ff
from ingest_helpers import frames_of, quarantined
from twinlake.catalog import Lake
from twinlake.cli import app
from twinlake.ingest.fr3_stack.recording_csv import _INT_TYPES, V2_COLUMNS

INT_COLUMNS = sorted(_INT_TYPES)  # seq, controller, schema_version, joint_target_valid, ...


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _as_pandas_floats(src, dst, columns) -> None:
    """Rewrite `src` as pandas does once `columns` are float: `17` becomes `17.0`."""
    df = pd.read_csv(src)
    for name in columns:
        df[name] = df[name].astype("float64")
    df.to_csv(dst, index=False, lineterminator="\n")


def V2(name: str) -> int:
    """Position of a column in CSV v2."""
    return V2_COLUMNS.index(name)


def _partition_bytes(root, robot: str, run: str, name: str) -> bytes:
    return (root / "runs" / f"robot={robot}" / f"run={run}" / name).read_bytes()


def test_csv_v2_integer_columns_as_integral_floats_read_as_integers(make_csv, inbox, tmp_path):
    ints = make_csv("ints.csv", rows=300, idle_rows=30, status=False)
    # pandas round trip of the same file: same doubles text, integers written as ints / floats
    as_int, as_float = inbox / "plain" / "run.csv", inbox / "pandas" / "run.csv"
    as_int.parent.mkdir(), as_float.parent.mkdir()
    _as_pandas_floats(ints, as_int, [])
    _as_pandas_floats(ints, as_float, INT_COLUMNS)
    line = as_float.read_text().split("\n")[1].split(",")
    assert line[0] == "0.0" and line[V2("controller")] == "0.0"  # written as pandas does
    lakes = {}
    for label, path in (("int", as_int), ("float", as_float)):
        lakes[label] = tmp_path / f"lake-{label}"
        res = _cli("ingest", path, "--robot", "fr3", "--lake", lakes[label], "--json")
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["status"] == "published"
    # the frames are the same bytes: integers typed as integers, values equal
    assert (_partition_bytes(lakes["int"], "fr3", "run", "frames.parquet")
            == _partition_bytes(lakes["float"], "fr3", "run", "frames.parquet"))
    frames = frames_of(Lake(lakes["float"]))
    assert str(frames.schema.field("seq").type) == "int64"
    assert str(frames.schema.field("joint_target_valid").type) == "int8"
    assert frames.column("controller").to_pylist()[28:32] == [0, 0, 2, 2]


@pytest.mark.parametrize("column, text, expected", [
    ("controller", "0.5", "value 0.5 is not an integer"),
    ("joint_reset_count", "1.25", "value 1.25 is not an integer"),
    ("joint_target_valid", "300.0", "outside the range of int8"),
    ("seq", "abc", "not a valid integer: 'abc'"),
])
def test_a_fraction_in_an_integer_column_is_refused_with_line_and_field(
        column, text, expected, make_csv, inbox, lake):
    ints = make_csv("src.csv", rows=120, status=False)
    path = inbox / "frac.csv"
    _as_pandas_floats(ints, path, INT_COLUMNS)
    lines = path.read_text().split("\n")
    cells = lines[40].split(",")  # file line 41
    cells[V2(column)] = text
    lines[40] = ",".join(cells)
    path.write_text("\n".join(lines))
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1, res.output
    message = res.stderr.strip()
    assert message.startswith(f"error: frac.csv:41: field '{column}': "), message
    assert expected in message
    assert not lake.runs_dir.exists() and len(quarantined(lake)) == 1


def test_frankatwin_ring_log_integer_columns_as_floats(tmp_path):
    ints, floats = tmp_path / "ints", tmp_path / "floats"
    ints.mkdir(), floats.mkdir()
    ff.write_ring(ints, n=200)
    ff.write_ring(floats, n=200)
    _as_pandas_floats(floats / "ring_run.csv", floats / "ring_run.csv", ["seq", "target_idx"])
    targets = floats / "ring_run_targets.csv"
    _as_pandas_floats(targets, targets, ["target_idx", "head", "seq_effective"])
    assert targets.read_text().split("\n")[1].startswith("0.0,")
    out = {}
    for label, d in (("ints", ints), ("floats", floats)):
        res = _cli("ingest", d / "ring_run.csv", "--robot", "fr3", "--lake", tmp_path / f"l{label}")
        assert res.exit_code == 0, res.output
        out[label] = [_partition_bytes(tmp_path / f"l{label}", "fr3", "ring_run", name)
                      for name in ("frames.parquet", "targets.parquet")]
    # pandas rewrote the doubles in shortest round-trip form: same values as `%.9f`
    assert out["ints"] == out["floats"]


def test_frankatwin_targets_fraction_is_refused(tmp_path, lake):
    ff.write_ring(tmp_path, n=100)
    targets = tmp_path / "ring_run_targets.csv"
    lines = targets.read_text().split("\n")
    cells = lines[3].split(",")
    head = int(cells[1])
    cells[1] = f"{head}.5"
    lines[3] = ",".join(cells)
    targets.write_text("\n".join(lines))
    res = _cli("ingest", tmp_path / "ring_run.csv", "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1, res.output
    assert f"ring_run_targets.csv:4: field 'head': value {head}.5 is not an integer" in res.stderr
