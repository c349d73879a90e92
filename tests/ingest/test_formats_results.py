"""FrankaTwin result files in ingest: recognised by content, never runs; a directory walk hands
each directory, after its runs, to the result importer it is given (`ingest_paths(results=...)`),
and notes the entries no importer answered for."""

from __future__ import annotations

import formats_fixtures as ff

from twinlake.catalog import Lake
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions


def test_ingest_of_a_result_file_points_to_the_import_command(tmp_path):
    from twinlake.ingest.registry import detect

    path = ff.write_json(tmp_path / "metrics.json", ff.metrics_body("a.csv", "a_sim.csv"))
    reader, tried = detect(path)
    assert reader is None
    assert "use `twinlake import frankatwin`" in dict(tried)["frankatwin_result"]


def _results_dir(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    ff.write_json(data / "a_metrics.json", ff.metrics_body("a.csv", "a_sim.csv"))
    ff.write_json(data / "sub" / "sysid_best_params.json", ff.best_params_body())
    ff.write_json(data / "notes.json", {"hello": 1})
    return data


def test_the_walk_hands_result_files_to_the_importer_after_the_runs(tmp_path):
    data = _results_dir(tmp_path)
    ff.write_log50(data, "chirp_low", n=20)
    calls = []

    def importer(folder):  # answers for the fit only, says nothing of the rest
        calls.append(folder)
        yield {"ok": True, "path": str(folder / "sub" / "sysid_best_params.json"), "message": "imported fit ft-x",
               "kind": "fit", "existed": True, "partition": "/lake/fits/fit=ft-x"}
        yield {"ok": False, "path": str(folder / "bad.json"), "message": "error: bad.json: broken"}

    outcomes = list(ingest_paths(Lake(tmp_path / "lake"), [data], ReadOptions(robot="fr3"),
                                 results=importer))
    assert calls == [data]
    assert [(o.status, o.format) for o in outcomes[:3]] == [("published", "frankatwin_log50"),
                                                            ("already_ingested", "fit"), ("rejected", None)]
    assert outcomes[2].exit_code == 1 and outcomes[2].message == "error: bad.json: broken"
    skipped = {o.path.rsplit("/", 1)[1]: o.message for o in outcomes[3:]}
    assert {o.status for o in outcomes[3:]} == {"skipped"}
    assert set(skipped) == {"a_metrics.json", "notes.json", "sub"}
    assert "a FrankaTwin metrics result file, not a run: use `twinlake import frankatwin`" in skipped["a_metrics.json"]


def test_a_directory_of_results_nobody_imports_is_unrecognised(tmp_path):
    data = _results_dir(tmp_path)
    outcome, = ingest_paths(Lake(tmp_path / "lake"), [data], ReadOptions(), results=lambda folder: ())
    assert outcome.status == "unrecognised" and outcome.exit_code == 1
    assert "a_metrics.json: " in outcome.message and "use `twinlake import frankatwin`" in outcome.message
