"""Stored intervals (catalog/intervals.py; file format catalog/stored_intervals.py): every run
published gets `intervals.parquet`, computed by the rules' own query; `clean_intervals(con,
robot, run)` serves it only while it is valid, and then gives exactly what the query gives.
Other rules, older lakes and rewritten runs are queried, never served stale rows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interval_synth import (
    cartesian_recording,
    drop_ticks,
    frames_table,
    joint_recording,
    publish_run,
    run_table,
    set_idle,
)

from twinlake.catalog import Lake, connect, publish_partition
from twinlake.catalog import intervals as catalog_intervals
from twinlake.catalog.lake import INTERVALS_FILE
from twinlake.catalog.intervals import IntervalRules, _query, clean_intervals, run_query_params, stage_run_intervals


def _queried(con, robot: str, run: str, **kw) -> pa.Table:
    """The rules' query, never the stored file."""
    rules = IntervalRules(**kw)
    return _query(con, robot, run, run_query_params(robot, run, rules))


def _served(con, robot: str, run: str, **kw) -> pa.Table | None:
    """What the stored file gives for these rules (None: the caller must query)."""
    return catalog_intervals.stored_run_intervals(con, robot, run, IntervalRules(**kw))


def _write_run(path, rec, robot: str = "fr3", run: str = "r") -> None:
    pq.write_table(frames_table(rec), path / "frames.parquet")
    pq.write_table(run_table(rec), path / "run.parquet")
    stage_run_intervals(Lake(path.parents[1]), path, robot, run)  # as the ingest's write step


def _every_cause() -> dict[str, object]:
    """Runs with each split cause (several per run), as the rules see them."""
    gaps = joint_recording(400)
    drop_ticks(gaps, 100, 5)  # seq gap, 5 lost
    gaps.recorded_gaps = [(300, 309)]  # a lost range the source recorded: those ticks excluded
    stale = joint_recording(300)
    stale.cols["stale"][[50, 51, 200]] = True
    resets = joint_recording(500)
    set_idle(resets, 0, 40)  # idle, then joint impedance: mode change, reset counter 0 -> 1
    resets.cols["joint_reset_count"][250:] = 2  # a reset inside the run
    resets.cols["K_joint3"][400:] = 700.0  # gain change
    resets.cols["control_period_s"][320] = 0.0031  # period outlier
    bad = joint_recording(300)
    bad.cols["q4"][70] = np.nan  # nonfinite: in no interval
    bad.cols["joint_target_valid"][150:152] = 0  # target invalid
    bad.cols["t_s"][200:] += 0.004  # time gap on consecutive seq
    bad.cols["t_s"][260:] -= 0.010  # clock reversal
    bad.tick_period_s = 0.001
    ineligible = joint_recording(50)
    ineligible.fit_eligible = False  # no intervals at all
    return {"gaps": gaps, "stale": stale, "resets": resets, "bad": bad,
            "cartesian": cartesian_recording(120), "one": joint_recording(1), "ineligible": ineligible}


@pytest.fixture(scope="module")
def every_cause(tmp_path_factory):
    root = tmp_path_factory.mktemp("stored") / "lake"
    for run, rec in _every_cause().items():
        publish_run(root, "fr3", run, rec)
    return root


def test_every_published_run_serves_exactly_the_querys_rows(every_cause):
    con = connect(every_cause)
    view = con.sql("SELECT * FROM intervals").to_arrow_table()
    reasons = set()
    for run in _every_cause():
        assert (every_cause / "runs" / "robot=fr3" / f"run={run}" / INTERVALS_FILE).is_file()
        served, queried = _served(con, "fr3", run), _queried(con, "fr3", run)
        assert served is not None, run  # the stored path, not a silent fallback
        assert served.schema == queried.schema and served.equals(queried), run
        assert clean_intervals(con, robot="fr3", run=run).equals(queried)
        assert served.to_pylist() == [r for r in view.to_pylist() if r["run"] == run]
        reasons |= set(served.column("start_reason").to_pylist()) | set(served.column("end_reason").to_pylist())
    assert reasons >= {"seq_gap", "recorded_gap", "stale", "mode_change", "reset", "gain_change",
                       "period_outlier", "nonfinite", "target_invalid", "time_gap", "clock_reversal"}
    assert _served(con, "fr3", "ineligible").num_rows == 0


@pytest.mark.parametrize("min_duration_s", [0.001, 0.05, 0.15, 1e9])
def test_a_minimum_duration_filters_the_stored_rows_as_the_macro_does(every_cause, min_duration_s):
    con = connect(every_cause)
    for run in ("gaps", "resets", "bad"):
        served = _served(con, "fr3", run, min_duration_s=min_duration_s)
        queried = _queried(con, "fr3", run, min_duration_s=min_duration_s)
        assert served is not None and served.equals(queried), (run, min_duration_s)
    assert _served(con, "fr3", "resets", min_duration_s=0.05).num_rows < _served(con, "fr3", "resets").num_rows


@pytest.mark.parametrize("rules", [{"split_on": ["reset", "nonfinite"]}, {"period_s": 0.001},
                                   {"period_tol_s": 0.0002}])
def test_other_rules_are_queried(every_cause, rules):
    con = connect(every_cause)
    assert _served(con, "fr3", "resets", **rules) is None
    assert clean_intervals(con, robot="fr3", run="resets", **rules).equals(_queried(con, "fr3", "resets", **rules))
    if "split_on" in rules:  # gain and period rules off: fewer intervals than stored
        assert clean_intervals(con, robot="fr3", run="resets", **rules).num_rows < _served(con, "fr3", "resets").num_rows


def test_an_older_lake_without_the_file_or_with_older_files_is_queried(tmp_path):
    rec = joint_recording(200)
    drop_ticks(rec, 60, 2)
    publish_run(tmp_path, "fr3", "new", rec)
    publish_run(tmp_path, "fr3", "old", rec, contract_columns=False)  # run.parquet of an older ingest
    run_dir = tmp_path / "runs" / "robot=fr3" / "run=old"
    assert not (run_dir / INTERVALS_FILE).exists()  # not canonical: nothing stored
    new_dir = tmp_path / "runs" / "robot=fr3" / "run=new"
    (new_dir / INTERVALS_FILE).unlink()  # a lake written before intervals were stored
    con = connect(tmp_path)
    expected = [{**r, "run": "old"} for r in _queried(con, "fr3", "new").to_pylist()]
    assert _served(con, "fr3", "new") is None and _served(con, "fr3", "old") is None
    assert clean_intervals(con, robot="fr3", run="old").to_pylist() == expected
    assert [r["frame_count"] for r in clean_intervals(con, robot="fr3", run="new").to_pylist()] == [60, 138]


def test_a_rewritten_run_never_serves_stale_intervals(tmp_path):
    lake = Lake(tmp_path)
    publish_run(tmp_path, "fr3", "r", joint_recording(300))
    run_dir = lake.run_dir("fr3", "r")
    con = connect(tmp_path)
    assert [r["frame_count"] for r in clean_intervals(con, robot="fr3", run="r").to_pylist()] == [300]

    # --replace by a writer that copies an old intervals file and does not stage new ones: the
    # stored key (sizes and mtimes of both files) no longer holds, so the rules are queried
    replaced = joint_recording(300)
    drop_ticks(replaced, 100, 4)

    def stale(path):
        pq.write_table(frames_table(replaced), path / "frames.parquet")
        shutil.copy2(run_dir / "run.parquet", path / "run.parquet")
        shutil.copy2(run_dir / INTERVALS_FILE, path / INTERVALS_FILE)  # an old copy

    publish_partition(lake, lake.run_relative("fr3", "r"), stale, replace=True)
    assert _served(con, "fr3", "r") is None  # the copy is not served
    assert [r["frame_count"] for r in clean_intervals(con, robot="fr3", run="r").to_pylist()] == [100, 196]

    # the ingest's write step stages them after its files: published anew, together, and served
    def staged(path):
        stale(path)
        stage_run_intervals(lake, path, "fr3", "r")

    publish_partition(lake, lake.run_relative("fr3", "r"), staged, replace=True)
    assert _served(con, "fr3", "r") is not None  # recomputed, not the copy
    assert [r["frame_count"] for r in clean_intervals(con, robot="fr3", run="r").to_pylist()] == [100, 196]

    # frames.parquet rewritten in place (a hand edit; ingest never does it): the key fails
    edited = joint_recording(300)
    edited.cols["K_joint1"][150:] = 650.0
    pq.write_table(frames_table(edited), run_dir / "frames.parquet")
    assert _served(con, "fr3", "r") is None
    rows = clean_intervals(con, robot="fr3", run="r").to_pylist()
    assert [(r["frame_count"], r["end_reason"]) for r in rows] == [(150, "gain_change"), (150, "run_end")]

    # run.parquet rewritten in place: likewise
    publish_partition(lake, lake.run_relative("fr3", "r"), lambda p: _write_run(p, replaced), replace=True)
    assert _served(con, "fr3", "r") is not None
    table = pq.read_table(run_dir / "run.parquet")
    pq.write_table(table.set_column(table.schema.get_field_index("fit_eligible"), "fit_eligible",
                                    pa.array([False])), run_dir / "run.parquet")
    assert _served(con, "fr3", "r") is None and clean_intervals(con, robot="fr3", run="r").num_rows == 0


def test_other_rules_a_renamed_partition_or_a_damaged_file_are_queried(tmp_path, monkeypatch):
    rec = joint_recording(200)
    drop_ticks(rec, 50, 3)
    publish_run(tmp_path, "fr3", "a", rec)
    con = connect(tmp_path)
    assert _served(con, "fr3", "a") is not None
    # other rules' SQL (an edited macro, other defaults): another hash
    monkeypatch.setattr(catalog_intervals, "rules_version", lambda: "0" * 64)
    assert _served(con, "fr3", "a") is None
    monkeypatch.undo()
    # the partition renamed: the stored rows name the old run
    runs = tmp_path / "runs" / "robot=fr3"
    os.rename(runs / "run=a", runs / "run=b")
    assert _served(con, "fr3", "b") is None
    assert {r["run"] for r in clean_intervals(con, robot="fr3", run="b").to_pylist()} == {"b"}
    # an unreadable intervals.parquet: no error, the query
    (runs / "run=b" / INTERVALS_FILE).write_bytes(b"PAR1 not parquet")
    assert _served(con, "fr3", "b") is None
    assert [r["frame_count"] for r in clean_intervals(con, robot="fr3", run="b").to_pylist()] == [50, 147]


def test_a_fresh_process_reads_one_runs_intervals_without_pandas(every_cause):
    """`connect` makes its empty canonical tables as DDL (an Arrow table handed to DuckDB
    imports pandas, ~0.2-0.4 s), and the stored path needs neither pandas nor the query."""
    code = ("import sys\nfrom twinlake.catalog import connect, clean_intervals\n"
            f"con = connect({str(every_cause)!r})\n"
            "rows = clean_intervals(con, robot='fr3', run='resets').to_pylist()\n"
            "print(len(rows), 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(_every_cause_rows(every_cause, "resets"))), "False"]


def _every_cause_rows(root, run: str) -> list[dict]:
    return _queried(connect(root), "fr3", run).to_pylist()
