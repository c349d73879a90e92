"""`twinlake.catalog.selection`: `[ROBOT/]RUN[:INTERVAL]` → a run, its clean intervals and
their frames, over real ingested recordings and the real DuckDB catalog."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from twinlake.catalog import (FRAME_SCHEMA, IntervalRef, Lake, RunSelector, SelectionError,
                              connect, interval_frames, parse_selector, pick_interval,
                              resolve_intervals, resolve_run, run_frames, run_intervals)
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions
from twinlake.ingest.samples import SampleSpec, write_sample

RUNS = {  # (robot, run): spec; a gap after row 99 ends the first clean interval
    ("fr3", "a"): SampleSpec(rows=300, gap_at=(99,)),  # intervals of 100 and 200 frames
    ("fr3", "tie"): SampleSpec(rows=200, gap_at=(99,), seed=1),  # 100 and 100
    ("other", "a"): SampleSpec(rows=50, seed=2),  # a second robot with a run named a
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("selection")
    lake = Lake(root / "lake")
    for (robot, run), spec in RUNS.items():
        path = write_sample(root / f"{robot}-{run}.csv", spec)
        outcome, = ingest_paths(lake, [path], ReadOptions(robot=robot, run=run))
        assert outcome.status == "published", outcome.message
    return lake


@pytest.fixture
def con(lake):
    con = connect(lake)
    yield con
    con.close()


def test_parse_selector_forms_and_errors():
    assert parse_selector("r1") == RunSelector("r1")
    assert parse_selector(" fr3/r1:2 ") == RunSelector("r1", "fr3", 2)
    assert parse_selector("a/b/r1") == RunSelector("r1", "a/b")
    for bad, words in (("fr3/", "expected [ROBOT/]RUN[:INTERVAL]"), ("r1:x", "INTERVAL must be a whole number")):
        with pytest.raises(SelectionError, match=words.replace("[", r"\[").replace("]", r"\]")):
            parse_selector(bad)


def test_resolve_run_by_name_robot_and_ambiguity(con):
    row = resolve_run(con, "tie")
    assert (row["robot"], row["run"], row["frame_count"]) == ("fr3", "tie", 200)
    assert row["raw_sha256"] and len(row["raw_sha256"]) == 64
    assert resolve_run(con, "other/a")["frame_count"] == 50
    assert resolve_run(con, "a", "fr3")["frame_count"] == 300
    with pytest.raises(SelectionError, match=r"run 'a': several robots have it \(\['fr3', 'other'\]\); write ROBOT/RUN"):
        resolve_run(con, "a")
    with pytest.raises(SelectionError, match=r"no run 'nope' in the lake \(runs: a, tie; see `twinlake catalog runs`\)"):
        resolve_run(con, "nope")
    with pytest.raises(SelectionError, match="no run 'tie' for robot 'other'"):
        resolve_run(con, "other/tie")
    with pytest.raises(SelectionError, match="names robot 'fr3', but robot 'other'"):
        resolve_run(con, "fr3/a", "other")


def test_pick_interval_defaults_to_the_longest_with_ties_to_the_lowest_index(con):
    rows = run_intervals(con, "fr3", "a")
    assert [(r["interval_index"], r["frame_count"]) for r in rows] == [(0, 100), (1, 200)]
    assert pick_interval(rows, None, "fr3", "a")["interval_index"] == 1
    tie = run_intervals(con, "fr3", "tie")
    assert [r["frame_count"] for r in tie] == [100, 100]
    assert pick_interval(tie, None, "fr3", "tie")["interval_index"] == 0
    assert pick_interval(list(reversed(tie)), None, "fr3", "tie")["interval_index"] == 0
    assert pick_interval(rows, 0, "fr3", "a") == rows[0]
    with pytest.raises(SelectionError, match=r"fr3/a: run has no clean interval 7 \(its clean intervals: 0, 1;"):
        pick_interval(rows, 7, "fr3", "a")
    long_only = run_intervals(con, "fr3", "a", min_duration_s=0.15)
    assert [r["interval_index"] for r in long_only] == [1]
    with pytest.raises(SelectionError, match="run has no clean interval of at least 0.5 s"):
        pick_interval(run_intervals(con, "fr3", "a", 0.5), None, "fr3", "a", 0.5)


def test_run_frames_reads_one_run_or_a_seq_range_sorted(con):
    whole = run_frames(con, "fr3", "a")
    assert whole.num_rows == 300 and whole.column_names[: len(FRAME_SCHEMA)] == FRAME_SCHEMA.names
    assert "robot" not in whole.column_names and "run" not in whole.column_names
    part = run_frames(con, "fr3", "a", 102, 110)
    assert part["seq"].to_pylist() == list(range(102, 111))
    assert run_frames(con, "other", "a")["seq"].to_pylist() == list(range(50))
    assert run_frames(con, "fr3", "nope").num_rows == 0


def test_interval_frames_returns_what_a_replay_needs(lake):
    data = interval_frames(lake, "fr3/a")
    assert (data.robot, data.run, data.interval["interval_index"]) == ("fr3", "a", 1)
    assert data.frames.num_rows == data.interval["frame_count"] == 200
    assert pc.min(data.frames["seq"]).as_py() == data.interval["seq_first"] == 102
    assert data.run_row["robot"] == "fr3" and data.run_row["frame_count"] == 300
    first = interval_frames(lake, "a", 0, robot="fr3")
    assert first.frames["seq"].to_pylist() == list(range(100))
    with pytest.raises(SelectionError, match="several robots"):
        interval_frames(lake, "a")


def test_resolve_intervals_expands_runs_and_keeps_order(con):
    refs = resolve_intervals(con, ["fr3/a", "tie:1", "fr3/a:0"])
    sha = resolve_run(con, "tie")["raw_sha256"]
    assert [r.label for r in refs] == ["fr3/a:0", "fr3/a:1", "fr3/tie:1"]  # duplicate dropped
    assert refs[2] == IntervalRef("fr3", "tie", 1, 102, 201, sha)
    assert [r.label for r in resolve_intervals(con, ["fr3/a"], min_duration_s=0.15)] == ["fr3/a:1"]
    with pytest.raises(SelectionError, match=r"run selector 'fr3/a:0': fr3/a: run has no clean interval 0 of at least 0.15 s"):
        resolve_intervals(con, ["fr3/a:0"], min_duration_s=0.15)
    with pytest.raises(SelectionError, match="run selector 'nope': no run 'nope'"):
        resolve_intervals(con, ["nope"])
