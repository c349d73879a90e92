"""FrankaTwin sysid_best_params.json → fit partition; metrics.json → validation partition."""

from __future__ import annotations

import json

import formats_fixtures as ff
import pytest

from twinlake.catalog import Lake, connect
from twinlake.ingest.frankatwin_results import import_result, import_results, result_kind
from twinlake.ingest.pipeline import ingest_paths
from twinlake.ingest.registry import IngestError, ReadOptions
from twinlake.sim import LAYOUT, PARAM_NAMES, load_params


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
    with pytest.raises(IngestError, match="best_params_decoded.armature"):
        import_result(Lake(tmp_path / "lake"), path)


def test_ingest_of_a_result_file_points_to_the_import_command(tmp_path):
    from twinlake.ingest.registry import detect

    path = ff.write_json(tmp_path / "metrics.json", ff.metrics_body("a.csv", "a_sim.csv"))
    reader, tried = detect(path)
    assert reader is None
    assert "use `twinlake import frankatwin`" in dict(tried)["frankatwin_result"]
