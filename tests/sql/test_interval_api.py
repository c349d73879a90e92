"""The Python face and the catalog view: filters and partition pruning, parameters, errors,
determinism, the join users write, empty lakes, and the `twinlake intervals` command."""

from __future__ import annotations

import json

import duckdb
import pytest
import typer
from interval_synth import drop_ticks, joint_recording
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.catalog.intervals import INTERVAL_COLUMNS, clean_intervals
from twinlake.commands.lake import intervals_command


@pytest.fixture
def three_runs(lake):
    a = joint_recording(200)
    drop_ticks(a, 50, 3)  # 2 intervals: 50 and 147 ticks
    lake.add(a, robot="fr3a", run="a1")
    b = joint_recording(100)
    b.cols["K_joint2"][90:] = 300.0  # 2 intervals: 90 and 10 ticks
    lake.add(b, robot="fr3a", run="a2")
    lake.add(joint_recording(30), robot="fr3b", run="b1")
    return lake


def test_filters_select_runs_and_robots(three_runs):
    assert {r["run"] for r in three_runs.intervals()} == {"a1", "a2", "b1"}
    assert {r["run"] for r in three_runs.intervals(robot="fr3a")} == {"a1", "a2"}
    assert [r["frame_count"] for r in three_runs.intervals(run="a2")] == [90, 10]
    assert three_runs.intervals(robot="fr3b", run="a1") == []


def _files_read(con, sql: str, params: dict, tmp_path) -> list[int]:
    """'Total Files Read' of every Parquet scan in DuckDB's JSON profile of `sql`."""
    out = tmp_path / "profile.json"
    con.execute("PRAGMA enable_profiling = 'json'")
    con.execute("SET profiling_output = ?", [str(out)])
    con.execute(sql, params).fetchall()
    con.execute("PRAGMA disable_profiling")
    found: list[int] = []

    def walk(node: dict) -> None:
        info = node.get("extra_info", {})
        if "Total Files Read" in info:
            found.append(int(info["Total Files Read"]))
        for child in node.get("children", []):
            walk(child)

    for node in json.loads(out.read_text())["operator"]:
        walk(node)
    return found


def test_one_run_reads_only_its_own_files(three_runs, tmp_path):
    con = connect(three_runs.root, read_only=False)  # the profile is a file: read-only refuses it
    one = "SELECT * FROM clean_intervals(robot_filter := $robot, run_filter := $run)"
    assert _files_read(con, one, {"robot": "fr3a", "run": "a2"}, tmp_path) == [1, 1, 1]
    view = "SELECT * FROM intervals WHERE run = $run"
    assert _files_read(con, view, {"run": "b1"}, tmp_path) == [1, 1, 1]
    assert _files_read(con, "SELECT * FROM intervals", {}, tmp_path) == [3, 3, 3]


def test_min_duration_hides_short_intervals_but_keeps_their_index(three_runs):
    rows = three_runs.intervals(run="a2", min_duration_s=0.05)
    assert [(r["interval_index"], r["frame_count"]) for r in rows] == [(0, 90)]
    rows = three_runs.intervals(run="a1", min_duration_s=0.1)
    assert [(r["interval_index"], r["seq_first"]) for r in rows] == [(1, 53)]


def test_view_equals_the_macro_defaults_and_results_are_deterministic(three_runs):
    con = connect(three_runs.root)
    view = con.sql("SELECT * FROM intervals").to_arrow_table()
    first = clean_intervals(con)
    second = clean_intervals(connect(three_runs.root))
    assert view.column_names == list(INTERVAL_COLUMNS)
    assert view.equals(first) and first.equals(second)


def test_the_documented_join_selects_exactly_the_interval_frames(three_runs):
    con = connect(three_runs.root)
    joined = con.execute(
        "SELECT count(*) FROM frames f JOIN intervals i USING (robot, run) "
        "WHERE f.seq BETWEEN i.seq_first AND i.seq_last"
    ).fetchall()[0][0]
    assert joined == sum(r["frame_count"] for r in three_runs.intervals()) == 197 + 100 + 30


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"min_duration_s": -1.0}, "min_duration_s"),
        ({"min_duration_s": float("nan")}, "min_duration_s"),
        ({"period_s": 0.0}, "period_s"),
        ({"period_tol_s": -0.1}, "period_tol_s"),
        ({"split_on": ["gain_change", "bogus"]}, "split_on"),
        ({"run": 3}, "run"),
    ],
)
def test_bad_arguments_name_the_field(three_runs, kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}: expected|^{field}: unknown"):
        three_runs.intervals(**kwargs)


def test_empty_lake_has_an_empty_intervals_view(lake):
    con = connect(lake.root)
    assert con.execute("SELECT count(*) FROM intervals").fetchall() == [(0,)]
    assert clean_intervals(con).column_names == list(INTERVAL_COLUMNS)


def test_plain_connection_gets_the_macro_on_first_use(three_runs):
    lake_con = connect(three_runs.root)
    frames = lake_con.sql("SELECT * FROM frames").to_arrow_table()
    runs = lake_con.sql("SELECT * FROM runs").to_arrow_table()
    con = duckdb.connect()
    con.register("frames", frames)
    con.register("runs", runs)
    assert clean_intervals(con).equals(clean_intervals(lake_con))


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("intervals")(intervals_command)
    app.command("noop")(lambda: None)  # keep `intervals` a sub-command
    return app


def test_cli_json_and_table(three_runs):
    runner = CliRunner()
    res = runner.invoke(_app(), ["intervals", "--lake", str(three_runs.root), "--json",
                                 "--min-duration-s", "0.05"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["run"], r["interval_index"], r["start_reason"], r["end_reason"]) for r in rows] == [
        ("a1", 1, "seq_gap", "run_end"), ("a2", 0, "run_start", "gain_change")]
    assert rows[1]["K_joint"][1] == 600.0 and set(rows[0]) == set(INTERVAL_COLUMNS)
    res = runner.invoke(_app(), ["intervals", "--lake", str(three_runs.root), "--run", "a2"])
    assert res.exit_code == 0, res.output
    assert "gain_change" in res.stdout and "(2 intervals in 1 run" in res.stdout


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--run", "nope"], 1, "no run with run 'nope'"),
        (["--no-split", "seq_gap"], 2, "--no-split 'seq_gap': expected one of"),
        (["--period-s", "0"], 2, "--period-s: expected a finite number > 0.0"),
    ],
)
def test_cli_errors_are_one_clear_line(three_runs, args, code, message):
    res = CliRunner().invoke(_app(), ["intervals", "--lake", str(three_runs.root), *args])
    assert res.exit_code == code
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_cli_missing_lake(tmp_path):
    res = CliRunner().invoke(_app(), ["intervals", "--lake", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no such directory" in res.stderr


def test_one_run_scope_binds_the_direct_views_and_gives_the_lake_views_rows(three_runs):
    import pyarrow.parquet as pq

    from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA
    from twinlake.catalog.sql import _is_canonical

    run_dir = three_runs.root / "runs" / "robot=fr3a" / "run=a2"
    assert _is_canonical(str(run_dir / "frames.parquet"), FRAME_SCHEMA)  # ingest writes every column
    con = connect(three_runs.root)
    expected = [r for r in con.sql("SELECT * FROM intervals").to_arrow_table().to_pylist() if r["run"] == "a2"]
    assert clean_intervals(con, robot="fr3a", run="a2").to_pylist() == expected
    # a run.parquet without a canonical column: the scope unions it with the empty table instead
    table = pq.read_table(run_dir / "run.parquet")
    dropped = RUN_SCHEMA.names[-1]
    pq.write_table(table.drop_columns([dropped]), run_dir / "run.parquet")
    assert not _is_canonical(str(run_dir / "run.parquet"), RUN_SCHEMA)
    assert clean_intervals(con, robot="fr3a", run="a2").to_pylist() == expected


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"min_duration_s": 0.05}, {"split_on": ["reset"]}, {"period_s": 0.001, "period_tol_s": 0.0002}],
)
def test_one_run_direct_query_gives_the_whole_lake_macros_rows(three_runs, kwargs):
    from twinlake.catalog.sql import exact_run_files

    con = connect(three_runs.root)
    for robot, run in (("fr3a", "a1"), ("fr3a", "a2"), ("fr3b", "b1")):
        assert exact_run_files(con, robot, run) is not None  # ingest's files: the direct path
        whole = [r for r in clean_intervals(con, **kwargs).to_pylist() if r["run"] == run]
        assert clean_intervals(con, robot=robot, run=run, **kwargs).to_pylist() == whole
    assert exact_run_files(con, "fr3a", "b1") is None  # no such partition


def test_one_run_direct_query_reads_only_its_own_files(three_runs, tmp_path):
    from twinlake.catalog.intervals import _one_run_query
    from twinlake.catalog.sql import exact_run_files

    con = connect(three_runs.root, read_only=False)  # the profile is a file: read-only refuses it
    frames_path, runs_path = exact_run_files(con, "fr3a", "a2")
    params = {"robot": "fr3a", "run": "a2", "min_duration_s": 0.0, "period_s": None,
              "period_tol_s": None, "split_on": ["reset"],
              "frames_files": [frames_path], "runs_files": [runs_path]}
    assert _files_read(con, _one_run_query(), params, tmp_path) == [1, 1, 1]
    # the CTEs shadow the lake views: another run's files give that run's intervals (under
    # the ids bound, which the caller derives the paths from), not a2's
    other = exact_run_files(con, "fr3a", "a1")
    rows = con.execute(_one_run_query(), {**params, "frames_files": [other[0]], "runs_files": [other[1]]}).fetchall()
    a1 = clean_intervals(con, robot="fr3a", run="a1", split_on=["reset"]).to_pylist()
    assert len(a1) == 2 and [r[:2] for r in rows] == [("fr3a", "a2")] * 2
    assert [r[2:] for r in rows] == [tuple(r.values())[2:] for r in a1]
