"""Every outcome of `twinlake ingest` on real files: rejections (quarantined, exit 1,
`runs/` untouched), partial ingest, no-op re-ingest, refusal, replace, naming errors."""

from __future__ import annotations

import json

import pytest

from ingest_helpers import edit_cell, quarantined, runs_of


def _drop_column(path, column: str) -> None:
    rows = [line.split(",") for line in path.read_text().splitlines()]
    idx = rows[0].index(column)
    path.write_text("\n".join(",".join(r[:idx] + r[idx + 1:]) for r in rows) + "\n")


def _rename_column(path, old: str, new: str) -> None:
    text = path.read_text()
    header, rest = text.split("\n", 1)
    path.write_text(",".join(new if c == old else c for c in header.split(",")) + "\n" + rest)


def _duplicate_row(path, line_no: int) -> None:
    lines = path.read_text().split("\n")
    lines.insert(line_no, lines[line_no - 1])
    path.write_text("\n".join(lines))


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])


CASES = {
    # kind: (mutate(path), expected substrings of the message)
    "missing_column": (lambda p: _drop_column(p, "dq3"), [":1:", "'dq3'", "missing"]),
    "unknown_column": (lambda p: _rename_column(p, "K_joint2", "K_joint9"), [":1:", "'K_joint9'"]),
    "non_numeric": (lambda p: edit_cell(p, 57, "tau_J3", "abc"), [":57:", "'tau_J3'", "abc"]),
    "schema_version": (lambda p: edit_cell(p, 40, "schema_version", "3"), [":40:", "'schema_version'"]),
    "truncated": (_truncate, [":101:", "truncated"]),
    "empty": (lambda p: p.write_bytes(b""), ["empty file"]),
    "binary": (lambda p: p.write_bytes(bytes(range(256)) * 40), ["binary"]),
    "duplicate_seq": (lambda p: _duplicate_row(p, 30), [":31:", "'seq'", "duplicate seq 28"]),
    "joint_limit": (lambda p: edit_cell(p, 12, "q3", "-0.05"), [":12:", "'q4'", "limits"]),
    "jtv_mismatch": (lambda p: edit_cell(p, 9, "joint_target_valid", "0"), [":9:", "'joint_target_valid'"]),
    # a NaN position is data (tests/ingest/test_nonfinite_samples.py); a finite one beyond
    # the physical bounds is not
    "velocity_limit": (lambda p: edit_cell(p, 20, "dq1", "-11"), [":20:", "'dq2'", "velocity"]),
    "short_row": (lambda p: edit_cell(p, 66, "seq", "65,"), [":66:", "fields"]),
    "header_only": (lambda p: p.write_text(p.read_text().split("\n")[0] + "\n"),
                    [":2:", "no data rows"]),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_broken_input_is_rejected_and_quarantined(kind, ingest, make_csv, lake):
    mutate, expected = CASES[kind]
    path = make_csv("broken.csv", rows=100, status=False)
    mutate(path)
    original = path.read_bytes()
    result = ingest(path, "--robot", "r")
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "broken.csv" in message
    for text in expected:
        assert text in message, (text, message)
    assert not lake.runs_dir.exists()
    [reason] = quarantined(lake)
    qdir = next(lake.quarantine_dir.iterdir())
    assert (qdir / "broken.csv").read_bytes() == original
    assert reason["file"].endswith("broken.csv") and reason["error"] in message


def test_unrecognised_file_lists_every_format_tried(ingest, inbox, lake):
    from twinlake.ingest import readers

    path = inbox / "mystery.csv"
    path.write_text("alpha,beta\n1,2\n")
    result = ingest(path, "--robot", "r")
    assert result.exit_code == 1
    for reader in readers():
        assert f"{reader.name}:" in result.stderr
    assert not lake.runs_dir.exists()


def test_c_printf_nan_spellings_are_accepted_and_flagged(ingest, make_csv, lake):
    path = make_csv("nans.csv", rows=100, status=False)
    edit_cell(path, 10, "tau_J1", "-nan")
    edit_cell(path, 11, "tau_J2", "inf")
    edit_cell(path, 12, "tau_J3", "-inf")
    edit_cell(path, 13, "tau_J4", "nan")
    result = ingest(path, "--robot", "r")
    assert result.exit_code == 0, result.output
    run = runs_of(lake)[0]
    assert run["nan_tau_J"] == 4 and run["flags"] == ["nan_torque_sensor"]
    assert run["verdict"] == "ok"  # a sensor dropout is about samples, not the run
    assert run["nonfinite_frames"] == [{"column": f"tau_J{j}", "frames": 1} for j in (2, 3, 4, 5)]


def test_allow_partial_keeps_complete_rows(ingest, make_csv, lake):
    path = make_csv("cut.csv", rows=100)
    _truncate(path)
    result = ingest(path, "--robot", "r", "--allow-partial")
    assert result.exit_code == 0, result.output
    run = runs_of(lake)[0]
    assert run["frame_count"] == 99 and run["complete"] is False
    assert run["completion_confirmed"] is False and run["verdict"] == "partial"
    assert "truncated" in run["flags"]


def test_same_bytes_again_is_a_noop(ingest, make_csv, lake):
    path = make_csv("again.csv", rows=150)
    assert ingest(path, "--robot", "r").exit_code == 0
    before = (lake.run_dir("r", "again") / "run.parquet").stat().st_mtime_ns
    result = ingest(path, "--robot", "r")
    assert result.exit_code == 0 and "already ingested" in result.output
    assert (lake.run_dir("r", "again") / "run.parquet").stat().st_mtime_ns == before


def test_different_bytes_refused_unless_replace(ingest, make_csv, lake):
    path = make_csv("swap.csv", rows=150)
    assert ingest(path, "--robot", "r").exit_code == 0
    make_csv("swap.csv", rows=180, seed=9)
    refused = ingest(path, "--robot", "r")
    assert refused.exit_code == 2 and "--replace" in refused.stderr
    assert runs_of(lake)[0]["frame_count"] == 150
    replaced = ingest(path, "--robot", "r", "--replace", "--json")
    assert replaced.exit_code == 0
    assert json.loads(replaced.output.splitlines()[-1])["status"] == "replaced"
    assert [r["frame_count"] for r in runs_of(lake)] == [180]


def test_robot_must_be_named(ingest, make_csv, lake):
    path = make_csv("anon.csv", rows=100)
    result = ingest(path)
    assert result.exit_code == 2
    assert "--robot" in result.stderr and "robot_id" in result.stderr
    assert not lake.runs_dir.exists()


def test_run_option_names_the_run(ingest, make_csv, lake):
    path = make_csv("x.csv", rows=100)
    assert ingest(path, "--robot", "r", "--run", "2026-11-29_a").exit_code == 0
    assert [(r["robot"], r["run"]) for r in runs_of(lake)] == [("r", "2026-11-29_a")]
    bad = ingest(path, "--robot", "r", "--run", "../escape")
    assert bad.exit_code == 2 and "run id" in bad.stderr
