"""FrankaTwin readers: files written exactly as the spec describes round-trip into canonical
columns; broken companions are clear errors or flags."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formats_fixtures as ff
from twinlake.catalog import FRAME_SCHEMA
from twinlake.ingest.frankatwin.csv_logs import LOG_COLUMNS, RENAME, RING_COLUMNS
from twinlake.ingest.frankatwin.readers import (Log50Reader, RingReader, SimCsvReader,
                                                TargetCsvReader)
from twinlake.ingest.registry import IngestError, ReadOptions, detect

OPTS = ReadOptions(robot="fr3")


def _file_columns(path):
    header = path.read_text().split("\n", 1)[0].split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return {name: data[:, i] for i, name in enumerate(header)}


def _assert_round_trip(path, frames, skip=()):
    raw = _file_columns(path)
    for name, values in raw.items():
        if name in skip:
            continue
        got = frames[RENAME.get(name, name)].to_numpy(zero_copy_only=False).astype(float)
        np.testing.assert_allclose(got, values, rtol=0, atol=0, equal_nan=True, err_msg=name)


def test_log50_round_trip_and_run_fields(tmp_path):
    path = ff.write_log50(tmp_path, n=60)
    unit = Log50Reader().read(path, OPTS)
    frames = unit.frames
    assert frames.schema.names[: len(FRAME_SCHEMA)] == FRAME_SCHEMA.names
    _assert_round_trip(path, frames, skip={"period_ms", "tau_J1", "tau_J2", "tau_J3", "tau_J4",
                                            "tau_J5", "tau_J6", "tau_J7"})
    raw = _file_columns(path)
    np.testing.assert_allclose(frames["control_period_s"].to_numpy(), raw["period_ms"] / 1000)
    # tau_J NaN ("not provided by the daemon") is null; later rows keep their values
    assert frames["tau_J1"][0].as_py() is None
    np.testing.assert_array_equal(frames["tau_J3"].to_numpy(zero_copy_only=False)[1:],
                                  raw["tau_J3"][1:])
    # columns the 50 Hz log never records are null, never zero
    for name in ("q_target1", "K_joint1", "robot_time_s", "joint_target_valid"):
        assert frames[name].null_count == frames.num_rows
    assert frames["seq"].to_pylist() == list(range(60))
    assert set(frames["controller"].to_pylist()) == {1}
    f = unit.run_fields
    assert (f["kp_pos"], f["kp_ori"]) == (500.0, 30.0)
    assert f["kd_pos"] == pytest.approx(2 * math.sqrt(500.0))
    assert f["q_init"] == ff.Q_HOME.tolist()
    assert f["state_staleness_ms_max"] == 10.0 and f["fit_eligible"] is False
    assert f["aborted"] is False and f["complete"] is True
    assert json.loads(f["sidecar_json"])["args"]["band"] == "low"
    assert [r.role for r in unit.raw_files] == ["recording", "sidecar"]


def test_ring_round_trip_targets_and_gap_check(tmp_path):
    path = ff.write_ring(tmp_path, n=300, gaps=[(1100, 1104)])
    unit = RingReader().read(path, OPTS)
    _assert_round_trip(path, unit.frames, skip={"period_ms"} | {f"tau_J{j}" for j in range(1, 8)})
    assert unit.flags == [] and unit.run_fields["ring_consistent"] is True
    assert unit.run_fields["recorded_gaps"].as_py() == [{"seq_from": 1100, "seq_to": 1104}]
    assert unit.run_fields["fit_eligible"] is True
    tgt = _file_columns(path.with_name("ring_run_targets.csv"))
    np.testing.assert_array_equal(unit.targets["seq_effective"].to_numpy(), tgt["seq_effective"])
    np.testing.assert_array_equal(unit.targets["tgt_px"].to_numpy(), tgt["x_des_x"])
    assert len(unit.raw_files) == 3


def test_ring_gap_in_sidecar_not_in_frames_is_flagged(tmp_path):
    path = ff.write_ring(tmp_path, n=300, gaps=[], sidecar_gaps=[(1150, 1152)])
    unit = RingReader().read(path, OPTS)
    assert "ring_gap_not_in_frames" in unit.flags
    assert any("1150" in r and "no seq jump" in r for r in unit.reasons)
    assert unit.run_fields["ring_consistent"] is False


def test_ring_unrecorded_jump_and_unused_target_are_flagged(tmp_path):
    path = ff.write_ring(tmp_path, n=300, gaps=[(1200, 1201)], sidecar_gaps=[],
                         extra_targets=2)
    unit = RingReader().read(path, OPTS)
    assert any("1200..1201" in r and "does not list" in r for r in unit.reasons)
    assert "targets_unused" in unit.flags
    assert any("2 target_idx no frame uses" in r for r in unit.reasons)
    assert unit.run_fields["targets_unused"] == 2


def test_ring_save_error_and_missing_targets_reject(tmp_path):
    path = ff.write_ring(tmp_path, n=100, ring_overrides={"save_error": "log_fetch timed out"})
    with pytest.raises(IngestError, match="save_error: log_fetch timed out"):
        RingReader().read(path, OPTS)
    other = tmp_path / "b"
    other.mkdir()
    path = ff.write_ring(other, n=100)
    path.with_name("ring_run_targets.csv").unlink()
    with pytest.raises(IngestError, match="ring_run_targets.csv is missing"):
        RingReader().read(path, OPTS)


def test_frames_naming_an_unknown_target_reject(tmp_path):
    path = ff.write_ring(tmp_path, n=100)
    targets = path.with_name("ring_run_targets.csv")
    lines = targets.read_text().splitlines()
    targets.write_text("\n".join(lines[:-1]) + "\n")  # drop the last setpoint row
    with pytest.raises(IngestError, match="target_idx \\[4\\]"):
        RingReader().read(path, OPTS)


def test_sidecar_without_args_is_a_clear_error(tmp_path):
    path = ff.write_log50(tmp_path, n=10)
    side = path.with_suffix(".json")
    body = json.loads(side.read_text())
    del body["args"]
    side.write_text(json.dumps(body))
    with pytest.raises(IngestError) as err:
        Log50Reader().read(path, OPTS)
    assert "chirp_low.json" in str(err.value) and "'args'" in str(err.value)


def test_missing_sidecar_and_bad_value_errors_name_file_and_line(tmp_path):
    path = ff.write_log50(tmp_path, n=10)
    path.with_suffix(".json").unlink()
    with pytest.raises(IngestError, match="sidecar chirp_low.json or chirp_low.csv.json is missing"):
        Log50Reader().read(path, OPTS)
    path = ff.write_log50(tmp_path, n=10)
    lines = path.read_text().splitlines()
    cells = lines[4].split(",")
    cells[5] = "abc"
    lines[4] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(IngestError) as err:
        Log50Reader().read(path, OPTS)
    assert str(err.value) == "chirp_low.csv:5: field 'q4': value 'abc' is not a number"


def test_target_and_sim_csv(tmp_path):
    unit = TargetCsvReader().read(ff.write_target_csv(tmp_path, n=200), OPTS)
    assert unit.frames["q1"].null_count == 200 and unit.frames["tgt_px"].null_count == 0
    assert unit.run_fields["source_kind"] == "target"
    path = ff.write_sim_csv(tmp_path, n=50)
    unit = SimCsvReader().read(path, OPTS)
    _assert_round_trip(path, unit.frames)
    f = unit.run_fields
    assert f["source_kind"] == "sim" and f["sim_motor_delay_steps"] == 3
    assert f["sim_sysid_params_path"] == "sysid_best_params.json" and f["fit_eligible"] is False
    assert unit.frames["tau_cmd1"].null_count == 50


def test_detection_is_by_header_not_name(tmp_path):
    path = ff.write_log50(tmp_path, n=5)
    renamed = tmp_path / "ring_run.csv"
    path.rename(renamed)
    reader, tried = detect(renamed)
    assert reader is not None and reader.name == "frankatwin_log50"
    assert len(LOG_COLUMNS) == 47 and len(RING_COLUMNS) == 49
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b\n1,2\n")
    reader, tried = detect(junk)
    assert reader is None
    reasons = dict(tried)
    assert "column 1 is 'a', expected 't_s'" in reasons["frankatwin_log50"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1010, 1280), st.integers(1, 6)), max_size=3))
def test_ring_any_consistent_gap_set_reads_clean(tmp_path_factory, spec):
    gaps, last = [], 0
    for start, length in sorted(spec):
        if start > last + 1:
            gaps.append((start, start + length - 1))
            last = start + length
    d = tmp_path_factory.mktemp("ring")
    path = ff.write_ring(d, n=300, gaps=gaps)
    unit = RingReader().read(path, OPTS)
    assert unit.flags == [], unit.reasons
    assert unit.run_fields["recorded_gaps"].as_py() == [{"seq_from": a, "seq_to": b} for a, b in gaps]
    seq = unit.frames["seq"].to_numpy()
    assert seq.size == 300 - sum(b - a + 1 for a, b in gaps)


def test_broken_sidecar_json_names_file_and_line(tmp_path):
    path = ff.write_log50(tmp_path, n=5)
    path.with_suffix(".json").write_text('{\n  "schema_version": 2,\n  oops\n}\n')
    with pytest.raises(IngestError) as err:
        Log50Reader().read(path, OPTS)
    assert str(err.value).startswith("chirp_low.json:3:") and "invalid JSON" in str(err.value)
