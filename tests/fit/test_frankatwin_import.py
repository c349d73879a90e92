"""FrankaTwin sysid_best_params.json → fit partition; metrics.json → validation partition,
through the fit folder's own records and writers (FitRecord / publish_fit, ValidationRecord /
publish_validation_record)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))

import formats_fixtures as ff  # noqa: E402

from twinlake.catalog import Lake, connect  # noqa: E402
from twinlake.fit.records.frankatwin_import import (ResultFileError, import_fit, import_result,  # noqa: E402
                                            import_results, result_files, result_kind)
from twinlake.fit.records.record import load_fit  # noqa: E402
from twinlake.ingest.frankatwin import results as frankatwin_results  # noqa: E402
from twinlake.ingest import ingest_paths  # noqa: E402
from twinlake.ingest.registry import ReadOptions  # noqa: E402
from twinlake.sim import LAYOUT, PARAM_NAMES, load_params  # noqa: E402


def test_best_params_becomes_a_readable_fit(tmp_path):
    lake = Lake(tmp_path / "lake")
    path = ff.write_json(tmp_path / "sysid_best_params.json", ff.best_params_body(n_iter=4))
    body = json.loads(path.read_text())
    res = import_result(lake, path, "fr3")
    assert res.kind == "fit" and not res.existed and res.partition_id.startswith("ft-")
    con = connect(lake)
    row = con.sql("SELECT * FROM fits").to_arrow_table().to_pylist()[0]
    assert row["fit"] == res.partition_id and row["fit_source"] == "frankatwin_import"
    assert row["best_loss"] == body["best_score"] and row["seed"] == 7
    dec = body["best_params_decoded"]
    expected = dec["armature"] + dec["mu_static"] + dec["dynamic_ratio"] + dec["mu_viscous"] + [3.0]
    # FrankaTwin's 29 as written; the groups FrankaTwin does not have (payload, asymmetry, bias) nominal
    assert [row[n] for n in PARAM_NAMES[:29]] == pytest.approx(expected, rel=0, abs=0)
    assert [row[n] for n in PARAM_NAMES[29:]] == LAYOUT.nominal[29:].tolist()
    hist = con.execute("SELECT iter, best, per_traj_min FROM fit_history ORDER BY iter").fetchall()
    assert [h[0] for h in hist] == [1, 2, 3, 4]
    assert hist[1][1] == body["history"][1]["best"] and hist[1][2] == body["history"][1]["per_traj_min"]
    runs = con.execute("SELECT run, weight, role FROM fit_runs ORDER BY run").fetchall()
    assert runs == [("chirp_low", 1.0, "train"), ("ring_run", 1.5, "train")]
    # the fit tools can read it back: the profile and the raw import
    params = load_params(res.path / "profile.json")
    assert params.motor_delay_ms == 3 and params.armature.tolist() == dec["armature"]
    assert (res.path / "raw" / "sysid_best_params.json").read_bytes() == path.read_bytes()
    assert import_result(lake, path, "fr3").existed  # same bytes: a no-op


def test_metrics_becomes_a_validation_linked_to_run_and_fit(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ff.write_log50(data, "chirp_low", n=20)
    lake = Lake(tmp_path / "lake")
    assert [o.status for o in ingest_paths(lake, [data / "chirp_low.csv"],
                                           ReadOptions(robot="fr3"))] == ["published"]
    ff.write_json(data / "sysid_best_params.json", ff.best_params_body())
    metrics = ff.write_json(data / "metrics.json", ff.metrics_body(
        "/robot/data/chirp_low.csv", "/robot/data/chirp_low_sim.csv", "sysid_best_params.json"))
    items = list(import_results(lake, [data], None))
    assert [i["kind"] for i in items] == ["fit", "validation"] and all(i["ok"] for i in items)
    fit_id, val = items[0]["id"], items[1]
    assert val["links"] == {"run": "chirp_low", "fit": fit_id, "robot": "fr3", "sim_run": None}
    import pyarrow.parquet as pq
    row = pq.read_table(lake.root / "validations" / f"validation={val['id']}" /
                        "validation.parquet").to_pylist()[0]
    body = json.loads(metrics.read_text())
    assert row["ee_pos_rmse_3d_m"] == body["ee"]["pos"]["rmse_m"]["3d"]
    assert row["q_rmse_rad"] == body["joints"]["pos_rmse_rad"]
    assert row["dq_rmse_all_rad_s"] == body["joints"]["vel_rmse_all_rad_s"]
    assert row["sim_label"] == "chirp_low_sim.csv" and row["verdict"] is None
    assert json.loads(row["metrics_json"]) == body
    assert (lake.root / "validations" / f"validation={val['id']}" / "metrics.json").is_file()


def test_non_result_json_is_a_clear_error(tmp_path):
    other = ff.write_json(tmp_path / "notes.json", {"hello": 1})
    assert result_kind(other)[0] is None
    items = list(import_results(Lake(tmp_path / "lake"), [other]))
    assert not items[0]["ok"] and "not a FrankaTwin result file" in items[0]["message"]
    bad = ff.best_params_body()
    bad["best_params_decoded"]["armature"] = [0.1] * 6
    path = ff.write_json(tmp_path / "sysid_best_params.json", bad)
    with pytest.raises(ResultFileError, match="best_params_decoded.armature"):
        import_result(Lake(tmp_path / "lake"), path)


def test_an_import_is_a_fit_record_read_back_like_any_fit(tmp_path):
    """The import builds a FitRecord and publishes it with publish_fit: load_fit reads it
    back with its trajectories, history, source and raw file; a delay out of range stays as
    written in fit.parquet while the profile (and the record) holds the clamped one."""
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    data.mkdir()
    ff.write_log50(data, "chirp_low", n=20)
    lake = Lake(tmp_path / "lake")
    assert [o.status for o in ingest_paths(lake, [data / "chirp_low.csv"], ReadOptions(robot="fr3"))] == ["published"]
    body = ff.best_params_body(n_iter=2)
    body["best_params_decoded"]["motor_delay_steps"] = 7
    path = ff.write_json(data / "sysid_best_params.json", body)
    res = import_result(lake, path)
    rec = load_fit(lake, res.partition_id)
    assert rec.fit_source == "frankatwin_import" and rec.status == "imported" and rec.seed == 7
    assert rec.params.motor_delay_ms == 4 and rec.params.armature.tolist() == body["best_params_decoded"]["armature"]
    assert pq.read_table(res.path / "fit.parquet").column("motor_delay_ms").to_pylist() == [7.0]
    assert load_params(res.path / "profile.json").motor_delay_ms == 4
    assert [h["iter"] for h in rec.history] == [1, 2] and rec.history[0]["sigma"] is None
    chirp, ring = rec.runs
    run_sha = connect(lake).execute("SELECT raw_sha256 FROM runs").fetchone()[0]
    assert (chirp.robot, chirp.run, chirp.linked, chirp.run_sha256) == ("fr3", "chirp_low", True, run_sha)
    assert (ring.robot, ring.run, ring.linked, ring.num_samples) == (None, "ring_run", False, 400)
    assert chirp.real_csv == "data/chirp_low.csv" and chirp.interval_index is None
    assert rec.settings["args"]["seed"] == 7 and rec.extra["source_file"] == "sysid_best_params.json"
    assert rec.extra["best_params_raw"][:2] == body["best_params_raw"][:2]
    profile = json.loads((res.path / "profile.json").read_text())["provenance"]
    assert profile["fit"] == res.partition_id and profile["source_sha256"] == rec.extra["source_sha256"]
    assert [p.name for p in (res.path / "raw").iterdir()] == ["sysid_best_params.json"]


def test_ingest_dir_with_the_fit_importer_imports_results_after_the_runs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ff.write_log50(data, "chirp_low", n=20)
    ff.write_json(data / "metrics.json", ff.metrics_body("chirp_low.csv", "x_sim.csv", "sysid_best_params.json"))
    ff.write_json(data / "sysid_best_params.json", ff.best_params_body())
    lake = Lake(tmp_path / "lake")
    seen: list[Path] = []

    def results(folder):
        seen.append(folder)
        return import_results(lake, [folder], "fr3")

    outcomes = list(ingest_paths(lake, [data], ReadOptions(robot="fr3"), results=results))
    assert [(o.format, o.status) for o in outcomes] == [
        ("frankatwin_log50", "published"), ("fit", "published"), ("validation", "published")]
    assert seen == [data]
    val = connect(lake).execute("SELECT run, fit FROM validations").fetchone()
    assert val == ("chirp_low", outcomes[1].partition.rsplit("=", 1)[1])


def test_result_files_are_found_recursively_fits_first(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    ff.write_json(data / "a_metrics.json", ff.metrics_body("a.csv", "a_sim.csv"))
    ff.write_json(data / "sub" / "sysid_best_params.json", ff.best_params_body())
    ff.write_json(data / "notes.json", {"hello": 1})
    (data / "broken.json").write_text("{")
    assert result_files([data]) == [data / "sub" / "sysid_best_params.json", data / "a_metrics.json"]
    assert result_kind(data / "notes.json") == (None, "neither sysid_best_params.json "
                                                "(best_params_decoded) nor metrics.json keys")
    with pytest.raises(ResultFileError, match="broken.json: not a FrankaTwin result file: not a JSON object"):
        import_result(Lake(tmp_path / "lake"), data / "broken.json")
    with pytest.raises(ResultFileError, match=r"broken.json:1: invalid JSON: Expecting property name"):
        import_fit(Lake(tmp_path / "lake"), data / "broken.json")


@pytest.mark.parametrize("body, kind", [
    (ff.best_params_body(), "fit"), (ff.metrics_body("a.csv", "b.csv"), "validation"), ({"hello": 1}, None),
    ([1, 2], None), ({"best_params_decoded": {}, "no_score": 1}, None), ({"best_params_decoded": [], "best_score": 1}, None),
    ({**ff.metrics_body("a.csv", "b.csv"), "schema_version": 2}, None),
    ({k: v for k, v in ff.metrics_body("a.csv", "b.csv").items() if k != "ee"}, None),
])
def test_ingest_points_exactly_the_files_this_importer_imports_to_it(tmp_path, body, kind):
    """One content rule (ingest's, which owns the formats): the importer finds exactly the
    files whose ingest hint tells the user to run `twinlake import frankatwin`."""
    path = ff.write_json(tmp_path / "x.json", body)
    assert result_kind(path)[0] == kind
    assert result_files([tmp_path]) == ([path] if kind else [])
    reason = frankatwin_results.ResultFileHint().detect(path).reason
    assert ("twinlake import frankatwin" in reason) == (kind is not None), reason
