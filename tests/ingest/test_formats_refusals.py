"""Refuse with the reason, never skip silently: a FrankaTwin sidecar whose 1 kHz fetch
failed, a sidecar without its recording, a directory in which nothing is recognised. Through
the real `twinlake ingest` command (typer CliRunner) and the lake on disk."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import formats_fixtures as ff
from ingest_helpers import quarantined, runs_of
from twinlake.catalog import Lake
from twinlake.cli import app
from twinlake.ingest import readers


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def test_failed_fetch_sidecar_alone_is_refused_with_save_error_and_remedy(tmp_path):
    lake = _lake(tmp_path)
    side = ff.write_failed_fetch(tmp_path, with_50hz_log=False,
                                 save_error="log_fetch: daemon did not reply within 5.0s")
    assert side.name == "chirp_low_1khz.csv.json" and not (tmp_path / "chirp_low_1khz.csv").exists()
    res = _cli("ingest", side, "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1, res.output
    message = res.stderr.strip()
    assert message.startswith("error: chirp_low_1khz.csv.json: field 'ring_log.save_error': ")
    assert "'log_fetch: daemon did not reply within 5.0s'" in message
    assert "robot.log_save(path)" in message and "no frames to ingest" in message
    assert not lake.runs_dir.exists()
    [reason] = quarantined(lake)
    assert reason["kind"] == "fetch_failed" and reason["field"] == "ring_log.save_error"
    assert reason["format"] == "frankatwin_sidecar"


def test_directory_ingest_reports_the_failed_fetch_per_unit(tmp_path):
    lake = _lake(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    ff.write_failed_fetch(data, "chirp_low", "chirp_low_1khz.csv")
    ff.write_ring(data, "ring_ok", n=100)  # a healthy run beside it
    res = _cli("ingest", data, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 1, res.output  # the missing 1 kHz run makes the ingest fail
    outcomes = {json.loads(line)["path"].rsplit("/", 1)[1]: json.loads(line)
                for line in res.stdout.splitlines()}
    assert set(outcomes) == {"chirp_low.csv", "chirp_low_1khz.csv.json", "ring_ok.csv"}
    refused = outcomes["chirp_low_1khz.csv.json"]
    assert refused["status"] == "rejected" and refused["format"] == "frankatwin_sidecar"
    assert "ring_log.save_error" in refused["message"] and "robot.log_save(path)" in refused["message"]
    # the 50 Hz log of the same run is fine and published, and says its 1 kHz log is missing
    log = outcomes["chirp_low.csv"]
    assert log["status"] == "published" and "ring_log_not_saved" in log["flags"]
    assert outcomes["ring_ok.csv"]["status"] == "published"
    assert res.stderr.strip() == ""  # nothing was skipped silently or otherwise
    runs = {r["run"]: r for r in runs_of(lake)}
    assert set(runs) == {"chirp_low", "ring_ok"}
    assert any("robot.log_save(path)" in r for r in runs["chirp_low"]["reasons"])


def test_directory_holding_only_the_failed_sidecar_exits_non_zero(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ff.write_failed_fetch(data, with_50hz_log=False, save_error="write_run: [Errno 28] No space left")
    res = _cli("ingest", data, "--robot", "fr3", "--lake", _lake(tmp_path).root)
    assert res.exit_code == 1, res.output
    assert "No space left" in res.stderr and "robot.log_save(path)" in res.stderr
    assert "skipped" not in res.stderr


def test_log_stop_error_and_null_path_are_refused_too(tmp_path):
    side = ff.write_failed_fetch(tmp_path, with_50hz_log=False)
    body = json.loads(side.read_text())
    body["ring_log"] = {"error": "log_stop: daemon did not reply within 5.0s"}
    ff.write_json(side, body)
    res = _cli("ingest", side, "--robot", "fr3", "--lake", tmp_path / "l1")
    assert res.exit_code == 1 and "field 'ring_log.error'" in res.stderr
    body["ring_log"] = {**ff.failed_ring_log(), "save_error": None}
    ff.write_json(side, body)
    res = _cli("ingest", side, "--robot", "fr3", "--lake", tmp_path / "l2")
    assert res.exit_code == 1 and "ring_log.path is null" in res.stderr


def test_healthy_sidecar_without_its_csv_is_refused_naming_the_file(tmp_path):
    path = ff.write_log50(tmp_path, "lonely", n=20)
    path.unlink()
    res = _cli("ingest", tmp_path, "--robot", "fr3", "--lake", _lake(tmp_path / "x").root)
    assert res.exit_code == 1, res.output
    assert "lonely.json: FrankaTwin sidecar without its recording: lonely.csv is not beside it" \
        in res.stderr


def test_a_sidecar_beside_its_csv_is_read_with_it_not_alone(tmp_path):
    lake = _lake(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    ff.write_ring(data, "ring_run", n=100)
    res = _cli("ingest", data, "--robot", "fr3", "--lake", lake.root, "--json")
    assert res.exit_code == 0, res.output
    assert [json.loads(line)["status"] for line in res.stdout.splitlines()] == ["published"]
    assert res.stderr.strip() == ""
    # named on its own, the sidecar says which file it belongs to
    res = _cli("ingest", data / "ring_run.json", "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1
    assert "frankatwin_sidecar: the sidecar of ring_run.csv, read with that file" in res.stderr


def test_directory_where_nothing_is_recognised_exits_non_zero_listing_what_it_saw(tmp_path):
    lake = _lake(tmp_path)
    data = tmp_path / "data"
    (data / "plots").mkdir(parents=True)
    (data / "notes.txt").write_text("robot was homed first\n")
    (data / "table.csv").write_text("a,b\n1,2\n")
    (data / "config.json").write_text('{"rate": 50}\n')
    (data / ".hidden").write_text("x")
    res = _cli("ingest", data, "--robot", "fr3", "--lake", lake.root)
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert lines[0] == f"error: {data}: nothing recognised: no reader matched any of its 4 entries:"
    listed = {line.split(":", 1)[0].strip(): line for line in lines[1:]}
    assert set(listed) == {"config.json", "notes.txt", "plots/", "table.csv"}
    for line in listed.values():
        for reader in readers():
            assert f"{reader.name}: " in line, (reader.name, line)
    assert "column 1 is 'a', expected 't_s'" in listed["table.csv"]
    assert not lake.runs_dir.exists() and not quarantined(lake)  # nothing to quarantine
    res = _cli("ingest", data, "--robot", "fr3", "--lake", lake.root, "--json")
    [outcome] = [json.loads(line) for line in res.stdout.splitlines()]
    assert res.exit_code == 1 and outcome["status"] == "unrecognised"
    assert sorted(p.rsplit("/", 1)[1] for p in outcome["files"]) == [
        "config.json", "notes.txt", "plots", "table.csv"]


def test_empty_directory_exits_non_zero(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _cli("ingest", empty, "--lake", _lake(tmp_path).root)
    assert res.exit_code == 1
    assert "nothing to ingest: the directory is empty" in res.stderr
