"""A non-finite sample (NaN, ±inf: a sensor dropout) is data, not a broken file: through the
real `twinlake ingest` and `twinlake intervals` commands, real Parquet and real DuckDB, a
recording with NaN or ±inf in a joint position, velocity, target or torque is published with
the value stored as written, counted per column in run.parquet, verdict `ok` with a flag,
and the intervals leave the tick out and say `nonfinite` where they split."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import formats_fixtures as ff
from ingest_helpers import edit_cell, frames_of, quarantined, runs_of
from twinlake.cli import app

ROWS = 200
AT_LINE = 101  # file line 101 = data row 99 = seq 99 (header is line 1, seq starts at 0)
AT_SEQ = AT_LINE - 2


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _intervals(lake) -> list[tuple]:
    res = _cli("intervals", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    return [(r["seq_first"], r["seq_last"], r["start_reason"], r["end_reason"])
            for r in json.loads(res.stdout)]


def _stored(frames, column: str, seq: int) -> float:
    return frames.column(column).to_numpy(zero_copy_only=False)[seq]


def _same_value(got: float, written: str) -> bool:
    want = float(written.replace("-nan", "nan"))
    return math.isnan(got) if math.isnan(want) else got == want


EXCLUDED = [  # (CSV v2 column, its canonical name, value as a C printf writes it)
    ("q3", "q4", "nan"),  # the joint position of J4 (CSV v2 suffixes are 0-based)
    ("q0", "q1", "-nan"),
    ("dq6", "dq7", "inf"),
    ("q_target2", "q_target3", "-inf"),
    ("q_target_filtered4", "q_target_filtered5", "nan"),
    ("tau_cmd1", "tau_cmd2", "nan"),
]


@pytest.mark.parametrize("column, canonical, text", EXCLUDED)
def test_csv_v2_nonfinite_sample_is_kept_counted_and_split_around(
        column, canonical, text, make_csv, lake):
    path = make_csv("dropout.csv", rows=ROWS)
    edit_cell(path, AT_LINE, column, text)
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    outcome = json.loads(res.stdout.splitlines()[-1])
    assert outcome["status"] == "published" and outcome["verdict"] == "ok"
    assert outcome["flags"] == ["nonfinite"] and not quarantined(lake)
    run = runs_of(lake)[0]
    assert run["frame_count"] == ROWS and run["verdict"] == "ok"
    assert run["nonfinite_frames"] == [{"column": canonical, "frames": 1}]
    assert run["nan_tau_J"] == 0 and run["completion_confirmed"] is True
    frames = frames_of(lake)
    assert frames.num_rows == ROWS  # nothing dropped, nothing interpolated
    assert _same_value(_stored(frames, canonical, AT_SEQ), text)
    assert frames.column(canonical).null_count == 0  # stored as NaN / inf, not as null
    assert _intervals(lake) == [(0, AT_SEQ - 1, "run_start", "nonfinite"),
                                (AT_SEQ + 1, ROWS - 1, "nonfinite", "run_end")]


def test_torque_sensor_dropout_is_counted_and_does_not_split(make_csv, lake):
    path = make_csv("sensor.csv", rows=ROWS)
    edit_cell(path, AT_LINE, "tau_J5", "nan")
    edit_cell(path, AT_LINE + 1, "tau_J5", "-inf")
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert run["verdict"] == "ok" and run["flags"] == ["nan_torque_sensor"]
    assert run["nan_tau_J"] == 2
    assert run["nonfinite_frames"] == [{"column": "tau_J6", "frames": 2}]
    assert _intervals(lake) == [(0, ROWS - 1, "run_start", "run_end")]


def test_many_dropouts_in_several_columns_are_counted_per_column(make_csv, lake):
    path = make_csv("several.csv", rows=ROWS)
    for line in (20, 21, 22):
        edit_cell(path, line, "dq2", "nan")
    edit_cell(path, 21, "q2", "nan")  # the same tick as a dq2 dropout
    edit_cell(path, 150, "q5", "inf")
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 0, res.output
    assert "verdict ok (nonfinite)" in res.stdout
    run = runs_of(lake)[0]
    assert run["nonfinite_frames"] == [{"column": "q3", "frames": 1},
                                       {"column": "q6", "frames": 1},
                                       {"column": "dq3", "frames": 3}]
    assert _intervals(lake) == [(0, 17, "run_start", "nonfinite"),
                                (21, 147, "nonfinite", "nonfinite"),
                                (149, ROWS - 1, "nonfinite", "run_end")]


def test_a_dropout_does_not_hide_the_run_flags(make_csv, lake):
    path = make_csv("gappy.csv", rows=ROWS, gap_at=(50,))
    edit_cell(path, 120, "q1", "nan")
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert run["verdict"] == "flagged" and run["flags"] == ["seq_gaps", "nonfinite"]


def test_frankatwin_ring_log_dropout_in_state(tmp_path, lake):
    path = ff.write_ring(tmp_path, n=300)
    seq = path.read_text().split("\n")[150].split(",")[47]  # the tick on line 151
    edit_cell(path, 151, "q2", "nan")
    edit_cell(path, 151, "dq5", "nan")
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert run["verdict"] == "ok" and run["flags"] == ["nonfinite"]
    assert run["nonfinite_frames"] == [{"column": "q2", "frames": 1},
                                       {"column": "dq5", "frames": 1}]
    first, last = 1001, 1300
    assert _intervals(lake) == [(first, int(seq) - 1, "run_start", "nonfinite"),
                                (int(seq) + 1, last, "nonfinite", "run_end")]


def test_frankatwin_50hz_log_dropout_in_target_and_torque(tmp_path, lake):
    path = ff.write_log50(tmp_path, n=60)
    edit_cell(path, 30, "x_des_y", "nan")
    edit_cell(path, 31, "tau3", "inf")
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert "nonfinite" in run["flags"]
    assert run["nonfinite_frames"] == [{"column": "tau_cmd3", "frames": 1},
                                       {"column": "tgt_py", "frames": 1}]
    frames = frames_of(lake)
    assert np.isnan(_stored(frames, "tgt_py", 28)) and _stored(frames, "tau_cmd3", 29) == np.inf


@pytest.mark.parametrize("column, text, expected", [
    ("q3", "-0.05", ["'q4'", "physical limits", "[-3.1270, -0.0669] rad"]),
    ("dq2", "12.5", ["'dq3'", "velocity", "[-10.0000, 10.0000] rad/s"]),
    ("t_s", "nan", ["'t_s'", "not finite"]),
])
def test_finite_values_outside_limits_and_a_nonfinite_time_still_reject(
        column, text, expected, make_csv, lake):
    path = make_csv("bad.csv", rows=ROWS)
    edit_cell(path, 77, "q1", "nan")  # a dropout elsewhere does not change the verdict
    edit_cell(path, AT_LINE, column, text)
    res = _cli("ingest", path, "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1, res.output
    message = res.stderr.strip()
    assert f"bad.csv:{AT_LINE}:" in message
    for text_part in expected:
        assert text_part in message, (text_part, message)
    assert not lake.runs_dir.exists() and len(quarantined(lake)) == 1
