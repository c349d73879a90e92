"""Directory sources: fr3_stack joint excitation output and TestRandomization episodes."""

from __future__ import annotations

import gzip
import json

import formats_fixtures as ff
import numpy as np
import pytest

from twinlake.ingest.episodes.episode import EpisodeReader
from twinlake.ingest.fr3_stack.excitation import ExcitationReader
from twinlake.ingest.registry import IngestError, ReadOptions, detect


def test_excitation_execute_is_diagnostics_with_round_trip(tmp_path):
    d = ff.write_excitation(tmp_path / "joint-run", rate=60.0, seconds=2.0)
    reader, _ = detect(d)
    assert reader is not None and reader.name == "fr3_joint_excitation"
    unit = ExcitationReader().read(d, ReadOptions())
    assert unit.robot == "left" and unit.run == "joint-run"
    raw = np.loadtxt(d / "commands_and_state.csv", delimiter=",", skiprows=1)
    f = unit.frames
    np.testing.assert_array_equal(f["seq"].to_numpy(), raw[:, 0])
    np.testing.assert_array_equal(f["t_s"].to_numpy(), raw[:, 1])
    np.testing.assert_array_equal(f["robot_time_s"].to_numpy(), raw[:, 4])
    np.testing.assert_array_equal(f["q_target3"].to_numpy(), raw[:, 9])
    np.testing.assert_array_equal(f["q1"].to_numpy(), raw[:, 14])
    np.testing.assert_array_equal(f["dq7"].to_numpy(), raw[:, 27])
    np.testing.assert_array_equal(f["lateness_s"].to_numpy(), raw[:, 6])
    assert f["K_joint1"].null_count == f.num_rows  # commanded, never acknowledged
    r = unit.run_fields
    assert r["fit_eligible"] is False and r["sysid_ready"] is False
    assert r["nuc_log_verified"] is False and r["commanded_K_joint"][0] == 600.0
    assert r["complete"] is True and r["diagnostics_only"] is True
    ref = np.loadtxt(d / "reference.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(unit.extra_tables["reference"]["q_ref1"].to_numpy(), ref[:, 1])


def test_excitation_links_nuc_log_and_handles_preview(tmp_path):
    nuc = tmp_path / "nuc_run_7.csv"
    nuc.write_text("seq,t_s\n")
    d = ff.write_excitation(tmp_path / "exc", nuc_log="/recordings/nuc_run_7.csv")
    unit = ExcitationReader().read(d, ReadOptions())
    assert unit.run_fields["linked_run"] == "nuc_run_7"
    assert len(unit.run_fields["linked_run_sha256"]) == 64
    p = ff.write_excitation(tmp_path / "preview", execute=False)
    found = ExcitationReader().detect(p)
    assert not found.matched and "preview only" in found.reason
    with pytest.raises(IngestError, match="nothing was recorded"):
        ExcitationReader().read(p, ReadOptions(robot="right"))


def test_excitation_missing_commands_file_is_an_error(tmp_path):
    d = ff.write_excitation(tmp_path / "exc")
    (d / "commands_and_state.csv").unlink()
    with pytest.raises(IngestError, match="commands_and_state.csv is missing"):
        ExcitationReader().read(d, ReadOptions())


def test_episode_round_trip_and_run_fields(tmp_path):
    ep = ff.write_episode(tmp_path, "ep-0001", n_ticks=25)
    reader, _ = detect(ep)
    assert reader is not None and reader.name == "tr_episode"
    unit = EpisodeReader().read(ep, ReadOptions())
    assert unit.robot == "vehicle" and unit.run == "ep-0001"
    f = unit.frames
    assert f["seq"].to_pylist() == list(range(25))
    assert f["status"].to_pylist()[:2] == ["no_state", "ok"]
    assert f["q1"].null_count == 25
    assert f["x"].to_pylist()[3] == 0.5 * 0.1 * 3
    assert unit.extra_tables["state100"].num_rows == 25
    r = unit.run_fields
    assert r["outcome"] == "completed" and r["metric_run_mae_lateral_m"] == 0.042
    assert r["hashes_verified"] is True and r["config_hash_verified"] is True
    named = ff.write_episode(tmp_path / "b", "ep-2", vehicle_name="art1")
    assert EpisodeReader().read(named, ReadOptions()).robot == "art1"


def test_episode_hash_mismatch_rejects(tmp_path):
    ep = ff.write_episode(tmp_path, "ep-bad")
    rows = gzip.decompress((ep / "state100.csv.gz").read_bytes()).replace(b"0.5,", b"0.6,", 1)
    (ep / "state100.csv.gz").write_bytes(gzip.compress(rows, mtime=0))
    with pytest.raises(IngestError) as err:
        EpisodeReader().read(ep, ReadOptions())
    assert err.value.kind == "hash_mismatch" and "state100.csv.gz" in str(err.value)


def test_episode_truncated_gz_is_a_clear_error(tmp_path):
    ep = ff.write_episode(tmp_path, "ep-trunc")
    data = (ep / "ticks.csv.gz").read_bytes()
    (ep / "ticks.csv.gz").write_bytes(data[: len(data) // 2])
    summary = json.loads((ep / "summary.json").read_text())
    import hashlib
    summary["files"]["ticks.csv.gz"] = hashlib.sha256(data[: len(data) // 2]).hexdigest()
    (ep / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(IngestError) as err:
        EpisodeReader().read(ep, ReadOptions())
    assert err.value.kind == "truncated"
    assert str(err.value).startswith("ticks.csv.gz:") and "truncated gzip" in str(err.value)
