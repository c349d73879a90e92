"""Every publish is a version of the lake's commit log: `twinlake sql --as-of V` shows the lake
without what was published after V (on object storage even a replaced run as it was; a local
lake, which keeps only current bytes, refuses that instead), and a fit records the version it
read, which `fit show` says; a fit re-run at its version gives the same bits while new runs
keep arriving."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from twinlake.catalog import current_version
from twinlake.cli import app
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fit"))

import synth  # noqa: E402


def _twinlake(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _runs(lake: str, *as_of: str) -> list[tuple[str, int]]:
    out = _twinlake("sql", "select run, frame_count from runs order by run", "--lake", lake,
                    "--format", "json", *as_of)
    assert out.exit_code == 0, out.output
    return [(r["run"], r["frame_count"]) for r in json.loads(out.stdout)]


def _ingest(lake: str, directory: Path, run: str, rows: int, *extra: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{run}.csv"
    write_sample(path, SampleSpec(rows=rows, seed=rows), status=complete_status(path, rows))
    out = _twinlake("ingest", str(path), "--lake", lake, "--robot", "fr3s", *extra)
    assert out.exit_code == 0, out.output


def test_as_of_on_object_storage_shows_a_replaced_run_as_it_was(s3_lake, tmp_path):
    _ingest(s3_lake, tmp_path / "a", "r1", 600)
    _ingest(s3_lake, tmp_path / "b", "r2", 700)
    _ingest(s3_lake, tmp_path / "c", "r1", 800, "--replace")
    assert _runs(s3_lake) == [("r1", 800), ("r2", 700)]
    assert _runs(s3_lake, "--as-of", "1") == [("r1", 600)]
    assert _runs(s3_lake, "--as-of", "2") == [("r1", 600), ("r2", 700)]
    frames = _twinlake("sql", "select count(*) n from frames where run = 'r1'", "--lake", s3_lake,
                       "--as-of", "2", "--format", "json")
    assert json.loads(frames.stdout) == [{"n": 600}]
    late = _twinlake("sql", "select 1", "--lake", s3_lake, "--as-of", "4")
    assert late.exit_code == 2 and "version 4 is not in the lake's commit log (latest: 3)" in late.output


def test_as_of_on_a_local_lake(tmp_path):
    lake = str(tmp_path / "lake")
    _ingest(lake, tmp_path / "a", "r1", 600)
    _ingest(lake, tmp_path / "b", "r2", 700)
    assert _runs(lake, "--as-of", "1") == [("r1", 600)] and len(_runs(lake)) == 2
    _ingest(lake, tmp_path / "c", "r2", 800, "--replace")
    assert _runs(lake, "--as-of", "1") == [("r1", 600)]  # r2 came later: not shown
    refused = _twinlake("sql", "select 1", "--lake", lake, "--as-of", "2")
    assert refused.exit_code == 2 and "replaced at version 3" in refused.output


def test_a_fit_records_the_version_it_read_and_reruns_at_it(tmp_path):
    from twinlake.fit.core.space import parse_space
    from twinlake.fit.run import FitSettings, run_fit

    lake = synth.publish_demo_runs(tmp_path / "lake", 1200)
    settings = FitSettings(train=["r1"], holdout=[], space=parse_space(["dynamic_ratio=0.6"]).to_json(),
                           population=6, generations=2, seed=3, max_duration_s=0.3, chunk=3, method="cma",
                           refine_iterations=0)
    first = run_fit(lake, settings, fit_id="at-v3", workers=0, progress=False)
    assert first.extra["lake_version"] == 3  # the three runs; the fit's own publish came after
    synth.publish_run(lake, "demo", "r4", synth.record(synth.TRUTH, 1200, seed=4))  # new data arrives
    assert current_version(lake) > 4
    shown = _twinlake("fit", "show", "at-v3", "--lake", str(lake))
    assert "lake version read: 3" in " ".join(shown.output.split()), shown.output
    assert [r for r, _ in _runs(str(lake), "--as-of", "3")] == ["r1", "r2", "r3"]
    again = run_fit(lake, settings, fit_id="at-v3-again", workers=0, progress=False)
    assert np.array_equal(again.vector, first.vector) and again.best_loss == first.best_loss
