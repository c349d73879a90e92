"""CSV v2 / v1 recordings through the real pipeline into the lake, read back with DuckDB."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import pyarrow.parquet as pq

from ingest_helpers import frames_of, runs_of
from twinlake.catalog import FRAME_SCHEMA, connect
from twinlake.ingest.fr3_stack.recording_csv import V1_COLUMNS, V2_COLUMNS


def _csv_column(path, name: str) -> list[float]:
    lines = path.read_text().splitlines()
    idx = lines[0].split(",").index(name)
    return [float(line.split(",")[idx]) for line in lines[1:]]


def test_new_user_v2_roundtrip_bit_for_bit(ingest, make_csv, lake):
    path = make_csv("run001.csv", rows=700, gap_at=(300,), meta={"robot_id": "fr3-lab"})
    result = ingest(path)
    assert result.exit_code == 0, result.output
    assert "published fr3-lab/run001" in result.output
    con = connect(lake)
    count, lo, hi = con.execute("select count(*), min(seq), max(seq) from frames").fetchone()
    seqs = _csv_column(path, "seq")
    assert (count, lo, hi) == (len(seqs), int(min(seqs)), int(max(seqs)))
    frames = frames_of(lake)
    for j in range(7):
        recorded = _csv_column(path, f"q{j}")
        stored = frames.column(f"q{j + 1}").to_pylist()
        assert [struct.pack("<d", v) for v in stored] == [struct.pack("<d", v) for v in recorded]
    assert frames.column("robot").unique().to_pylist() == ["fr3-lab"]
    # every canonical column but those CSV v2 does not have (dq_target, tau_ext: other
    # sources; stale: computed by ingest)
    not_in_v2 = {f"{p}{j}" for p in ("dq_target", "tau_ext") for j in range(1, 8)} | {"stale"}
    assert len(FRAME_SCHEMA) - len(not_in_v2) == len(V2_COLUMNS) == 80


def test_header_parsed_by_name_not_position(ingest, make_csv, lake, inbox):
    path = make_csv("a.csv", rows=200, status=False)
    lines = path.read_text().splitlines()
    order = np.random.default_rng(3).permutation(80)
    shuffled = inbox / "b.csv"
    shuffled.write_text("\n".join(",".join(line.split(",")[i] for i in order)
                                  for line in lines) + "\n")
    assert ingest(path, "--robot", "r").exit_code == 0
    assert ingest(shuffled, "--robot", "r").exit_code == 0
    a = frames_of(lake, "run = 'a'").drop_columns(["run"])
    b = frames_of(lake, "run = 'b'").drop_columns(["run"])
    assert a.equals(b)


def test_legacy_v1_has_null_v2_columns(ingest, make_csv, lake):
    path = make_csv("legacy.csv", rows=300, version=1, status=False)
    assert len(path.read_text().splitlines()[0].split(",")) == len(V1_COLUMNS) == 45
    result = ingest(path, "--robot", "fr3-old")
    assert result.exit_code == 0, result.output
    frames = frames_of(lake)
    assert frames.column("schema_version").unique().to_pylist() == [1]
    for name in ("q_target1", "K_joint7", "robot_time_s", "control_period_s",
                 "joint_target_valid"):
        assert frames.column(name).null_count == 300, name
    run = runs_of(lake)[0]
    assert (run["source_version"], run["complete"], run["completion_confirmed"]) == (1, None, False)


def test_not_available_zeros_become_null(ingest, make_csv, lake):
    path = make_csv("mixed.csv", rows=300, idle_rows=40)
    assert ingest(path, "--robot", "r").exit_code == 0
    frames = frames_of(lake)
    idle = frames.filter(frames.column("controller").to_numpy() == 0)
    joint = frames.filter(frames.column("controller").to_numpy() == 2)
    assert idle.num_rows == 40 and joint.num_rows == 260
    assert idle.column("q_target1").null_count == 40
    assert idle.column("K_joint1").null_count == 40
    assert joint.column("q_target1").null_count == 0
    assert joint.column("K_joint1").to_pylist()[0] == 600.0
    assert frames.column("tgt_qw").null_count == 300  # no pose target under idle / joint


def test_imperfect_data_is_ingested_and_flagged(ingest, make_csv, lake):
    path = make_csv("honest.csv", rows=500, gap_at=(100, 200), idle_rows=20,
                    nan_tau_rows=(5, 6))
    result = ingest(path, "--robot", "r", "--json")
    assert result.exit_code == 0
    outcome = json.loads(result.output.splitlines()[-1])
    assert outcome["status"] == "published" and outcome["verdict"] == "flagged"
    run = runs_of(lake)[0]
    assert run["frame_count"] == 500
    assert (run["gap_count"], run["dropped"]) == (2, 4)
    assert run["seq_last"] - run["seq_first"] + 1 == 504
    assert run["controllers"] == [0, 2] and run["controller_switches"] == 1
    assert run["resets"] == 1 and run["nan_tau_J"] == 2
    assert set(run["flags"]) == {"seq_gaps", "controller_switches", "resets",
                                 "nan_torque_sensor"}
    frames = frames_of(lake)
    assert frames.num_rows == 500  # nothing dropped or interpolated
    assert np.isnan(frames.column("tau_J1").to_numpy()[[5, 6]]).all()


def test_companions_confirm_completion(ingest, make_csv, lake):
    path = make_csv("conf.csv", rows=250, meta={"robot_id": "fr3-x", "payload": {"mass_kg": 1.1}})
    assert ingest(path).exit_code == 0
    run = runs_of(lake)[0]
    assert run["robot"] == "fr3-x" and run["robot_id"] == "fr3-x"
    assert run["complete"] is True and run["completion_confirmed"] is True
    assert run["payload_kg"] == 1.1 and run["verdict"] == "ok"
    roles = {f["name"]: f["role"] for f in run["raw_files"]}
    assert roles == {"conf.csv": "recording", "conf.status.json": "status",
                     "conf.meta.json": "metadata"}


def test_incomplete_status_is_flagged_not_confirmed(ingest, make_csv, lake, inbox):
    status = {"recording_id": "bad", "path": "/recordings/bad.csv", "active": False, "ok": True,
              "finished": True, "complete": False, "written": 250, "discarded": 0,
              "dropped": 3, "error": "", "error_code": 0}
    path = make_csv("bad.csv", rows=250, status=status)
    (inbox / "bad.status.json").rename(inbox / "bad_status.json")  # a name variant
    assert ingest(path, "--robot", "r").exit_code == 0
    run = runs_of(lake)[0]
    assert run["complete"] is False and run["completion_confirmed"] is False
    assert run["verdict"] == "partial" and run["status_dropped"] == 3
    assert any("complete=false" in r for r in run["reasons"])


def test_status_row_count_mismatch_not_confirmed(ingest, make_csv, lake, inbox):
    path = make_csv("short.csv", rows=250)
    status = json.loads((inbox / "short.status.json").read_text()) | {"written": 999}
    (inbox / "short.status.json").write_text(json.dumps(status))
    assert ingest(path, "--robot", "r").exit_code == 0
    run = runs_of(lake)[0]
    assert run["complete"] is True and run["completion_confirmed"] is False
    assert any("written=999" in r for r in run["reasons"])


@pytest.mark.parametrize("codec,suffix", [("zstd", ".zst"), ("lz4", ".lz4"), ("none", "")])
def test_raw_kept_byte_for_byte_and_hashed(ingest, make_csv, lake, codec, suffix):
    import hashlib

    from twinlake.ingest.rawstore import read_raw

    path = make_csv("keep.csv", rows=300)
    assert ingest(path, "--robot", "r", "--raw-codec", codec).exit_code == 0
    stored = lake.run_dir("r", "keep") / "raw" / f"keep.csv{suffix}"
    assert read_raw(stored) == path.read_bytes()
    run = runs_of(lake)[0]
    assert run["raw_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert run["raw_files"][0]["stored_as"] == f"raw/keep.csv{suffix}"


@pytest.mark.parametrize("codec", ["zstd", "lz4", "none"])
def test_raw_store_multi_frame_roundtrip(tmp_path, codec):
    import hashlib

    from twinlake.ingest.rawstore import read_raw, store_file

    src = tmp_path / "blob.bin"
    data = np.random.default_rng(1).integers(0, 40, 300_000, dtype=np.uint8).tobytes()
    src.write_bytes(data)
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    stored = store_file(src, raw_dir, "recording", codec, chunk_bytes=65_536)  # 5 frames
    assert read_raw(tmp_path / stored.stored_as) == data
    assert stored.sha256 == hashlib.sha256(data).hexdigest() and stored.size_bytes == len(data)


def test_same_input_gives_same_bytes(ingest, make_csv, tmp_path):
    path = make_csv("det.csv", rows=300)
    for name in ("l1", "l2"):
        assert ingest(path, "--robot", "r", lake_dir=tmp_path / name).exit_code == 0
    for file in ("frames.parquet", "run.parquet"):
        a, b = (tmp_path / n / "runs/robot=r/run=det" / file for n in ("l1", "l2"))
        assert a.read_bytes() == b.read_bytes(), file
    assert pq.read_schema(a).names[0] == "source_format"


def test_directory_ingests_every_recognisable_file(ingest, make_csv, lake, inbox):
    make_csv("d1.csv", rows=120)
    make_csv("d2.csv", rows=130, version=1)
    (inbox / "notes.txt").write_text("not a recording\n")
    result = ingest(inbox, "--robot", "r", "--json")
    assert result.exit_code == 0, result.output
    counts = {r["run"]: r["frame_count"] for r in runs_of(lake)}
    assert counts == {"d1": 120, "d2": 130}
    outcomes = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(Path(o["path"]).name for o in outcomes) == ["d1.csv", "d2.csv"]
    notes = result.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("note: notes.txt: skipped")
