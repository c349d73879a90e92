"""A new user's directory holding every format: `twinlake ingest DIR` then
`twinlake import frankatwin DIR`, through the real CLI, DuckDB views and partitions."""

from __future__ import annotations

import json

import formats_fixtures as ff
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.cli import app


def _mixed(root):
    data = root / "data"
    data.mkdir()
    ff.write_log50(data, "chirp_low", n=50)
    ff.write_ring(data, "ring_run", n=300, gaps=[(1100, 1102)])
    ff.write_target_csv(data, "chirp_target", n=100)
    ff.write_sim_csv(data, "chirp_low_sim", n=50)
    ff.write_csv_v2(data, "ji_run", n=200)
    ff.write_excitation(data / "joint-run", nuc_log="/recordings/ji_run.csv")
    ff.write_episode(data, "ep-0001", n_ticks=20)
    ff.write_json(data / "sysid_best_params.json", ff.best_params_body())
    ff.write_json(data / "metrics.json", ff.metrics_body(
        "chirp_low.csv", "chirp_low_sim.csv", "sysid_best_params.json"))
    return data


def test_mixed_directory_ingests_each_format(tmp_path):
    data = _mixed(tmp_path)
    lake = tmp_path / "lake"
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(data), "--lake", str(lake), "--robot", "fr3",
                              "--json"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    outcomes = {o["run"]: o for o in lines if o["format"] not in ("fit", "validation")}
    # result files in the directory are imported after its runs
    results = [o for o in lines if o["format"] in ("fit", "validation")]
    assert [o["format"] for o in results] == ["fit", "validation"]
    assert all(o["status"] == "published" for o in results)
    formats = {run: o["format"] for run, o in outcomes.items()}
    assert formats == {"chirp_low": "frankatwin_log50", "ring_run": "frankatwin_ring_1khz",
                       "chirp_target": "frankatwin_target_csv",
                       "chirp_low_sim": "frankatwin_sim_csv", "ji_run": "fr3_stack_csv",
                       "joint-run": "fr3_joint_excitation", "ep-0001": "tr_episode"}
    assert all(o["status"] == "published" for o in outcomes.values())
    res = runner.invoke(app, ["import", "frankatwin", str(data), "--lake", str(lake),
                              "--robot", "fr3", "--json"])
    assert res.exit_code == 0, res.output
    items = [json.loads(line) for line in res.stdout.splitlines()]
    assert [i["kind"] for i in items] == ["fit", "validation"]
    assert all(i["existed"] for i in items)  # already imported by `ingest DIR`
    assert items[1]["links"]["run"] == "chirp_low" and items[1]["links"]["fit"] == items[0]["id"]
    assert items[1]["links"]["sim_run"] == "chirp_low_sim"
    con = connect(lake)
    rows = dict(con.execute("SELECT run, count(*) FROM frames GROUP BY run").fetchall())
    assert rows == {"chirp_low": 50, "ring_run": 297, "chirp_target": 100, "chirp_low_sim": 50,
                    "ji_run": 200, "joint-run": 121, "ep-0001": 20}
    robots = dict(con.execute("SELECT run, robot FROM runs").fetchall())
    assert robots["ep-0001"] == "vehicle" and robots["joint-run"] == "fr3"
    tgt = con.execute("SELECT count(*), min(seq_effective - head) FROM targets").fetchone()
    assert tgt == (15, 1)
    src = con.execute(
        "SELECT run, fit_eligible, kp_pos, sysid_ready, outcome, linked_run FROM read_parquet("
        "?, hive_partitioning = true, union_by_name = true) ORDER BY run",
        [str(lake / "runs" / "*" / "*" / "run_source.parquet")]).fetchall()
    assert src == [("chirp_low", False, 500.0, None, None, None),
                   ("chirp_low_sim", False, None, None, None, None),
                   ("chirp_target", False, 500.0, None, None, None),
                   ("ep-0001", False, None, None, "completed", None),
                   ("joint-run", False, None, False, None, "ji_run"),
                   ("ring_run", True, 500.0, None, None, None)]
    gaps = con.execute("SELECT recorded_gaps FROM read_parquet(?)", [str(
        lake / "runs" / "robot=fr3" / "run=ring_run" / "run_source.parquet")]).fetchone()[0]
    assert gaps == [{"seq_from": 1100, "seq_to": 1102}]
    val = con.execute("SELECT validation_source, robot, run, fit FROM validations").fetchall()
    assert val == [("frankatwin_import", "fr3", "chirp_low", items[0]["id"])]
    # re-running is a no-op that says so
    res = runner.invoke(app, ["ingest", str(data), "--lake", str(lake), "--robot", "fr3",
                              "--json"])
    assert res.exit_code == 0
    assert {json.loads(line)["status"] for line in res.stdout.splitlines()} == {"already_ingested"}


def test_rejections_keep_the_raw_in_quarantine_and_nothing_in_runs(tmp_path):
    from twinlake.catalog import Lake
    from twinlake.ingest import ingest_paths
    from twinlake.ingest.registry import ReadOptions

    data = tmp_path / "data"
    data.mkdir()
    ff.write_ring(data, "ring_run", n=100, ring_overrides={"save_error": "log_fetch timed out"})
    ep = ff.write_episode(data, "ep-bad", n_ticks=10)
    (ep / "ticks.csv.gz").write_bytes((ep / "ticks.csv.gz").read_bytes()[:-9])
    lake = Lake(tmp_path / "lake")
    outcomes = {o.path: o for o in ingest_paths(lake, [data / "ring_run.csv", ep],
                                                ReadOptions(robot="fr3"))}
    ring, bad_ep = outcomes[str(data / "ring_run.csv")], outcomes[str(ep)]
    assert ring.status == "rejected" and "save_error: log_fetch timed out" in ring.message
    qdir = tmp_path / "lake" / "_quarantine"
    reason = json.loads((next(qdir.glob("*ring_run.csv*")) / "reason.json").read_text())
    assert "save_error" in reason["message"]
    kept = {p.name for p in next(qdir.glob("*ring_run.csv*")).iterdir()}
    assert {"ring_run.csv", "ring_run.json"} <= kept
    assert bad_ep.status == "rejected" and "does not match summary.json" in bad_ep.message
    kept = {p.name for p in next(qdir.glob("*ep-bad*")).rglob("*")}
    assert {"ticks.csv.gz", "summary.json", "episode_config.json", "reason.json"} <= kept
    assert not (tmp_path / "lake" / "runs").exists() or not any((tmp_path / "lake" / "runs").rglob("run.parquet"))
