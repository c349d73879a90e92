"""`fit validate`: held-out replay with fitted and nominal parameters, metrics.json, validation
rows in the catalog, verdicts against declared thresholds, refusals; then `fit report`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinlake.fit import SettingError
from twinlake.options import error_text
import synth
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.fit.trust.metrics import Trajectory, compute_metrics
from twinlake.fit.records.record import FitRecord, IntervalUse, publish_fit
from twinlake.fit.trust.validate import Thresholds, load_trajectory, validate_fit
from twinlake.cli import app
from twinlake.fit.core.space import ParameterSpace
from twinlake.sim import PARAM_NAMES, ReplayInput
from twinlake.sim.replay.population import PopulationEngine

TICKS = 900
HISTORY_ROWS = 4  # ReplayInput.from_frames' default: rows before the first replayed tick


def _engine_recording(seed: int) -> dict[str, np.ndarray]:
    """synth's frames with q/dq replaced by the population engine's replay of synth.TRUTH
    (plus noise after the first replayed row), so the truth reproduces its recording whatever
    the recorder's parity with the replay engine."""
    frame = synth.record(synth.TRUTH, TICKS, seed=seed)
    inp = ReplayInput.from_frames(frame, history_rows=HISTORY_ROWS)
    res = PopulationEngine([inp], nthread=1).run(synth.TRUTH.to_vector()[None])[0]
    rng = np.random.default_rng(seed)
    for j in range(7):
        q = res.q[0][:, j] + np.r_[0.0, 1e-4 * rng.standard_normal(TICKS - HISTORY_ROWS - 1)]
        dq = res.dq[0][:, j] + np.r_[0.0, 1e-3 * rng.standard_normal(TICKS - HISTORY_ROWS - 1)]
        frame[f"q{j + 1}"] = np.r_[frame[f"q{j + 1}"][:HISTORY_ROWS], q]
        frame[f"dq{j + 1}"] = np.r_[frame[f"dq{j + 1}"][:HISTORY_ROWS], dq]
    return frame


PLANT_J3 = (0.42, 1.8, 0.5)  # inertia [kg·m²], viscous [N·m·s/rad], Coulomb [N·m]


def _open_loop_joint3(seed: int, ticks: int = 2000) -> dict[str, np.ndarray]:
    """synth's frame columns with J3 replaced by an open-loop first-order plant (numpy):
    random multisine torque in tau_cmd3, the plant's velocity in dq3 (plus noise)."""
    frame = synth.record(synth.TRUTH, ticks, seed=seed)
    rng = np.random.default_rng(seed)
    t = np.arange(ticks) * 1e-3
    u = sum(1.5 * np.sin(2 * np.pi * f * t + p) for f, p in zip(rng.uniform(0.5, 6, 4), rng.uniform(0, 6.3, 4)))
    inertia, visc, coul = PLANT_J3
    v = np.zeros(ticks)
    for k in range(ticks - 1):
        v[k + 1] = v[k] + 1e-3 * (u[k] - visc * v[k] - coul * np.sign(v[k])) / inertia
    frame["tau_cmd3"] = u
    frame["dq3"] = v + 5e-4 * rng.standard_normal(ticks)
    return frame


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """Runs demo/t1 (train) and demo/h1 (held out) of synth.TRUTH, and fit 'exact' = the truth."""
    root = tmp_path_factory.mktemp("trustlake")
    synth.publish_run(root, "demo", "t1", synth.record(synth.TRUTH, TICKS, seed=11))
    synth.publish_run(root, "demo", "h1", _engine_recording(12))
    synth.publish_run(root, "demo", "ol", _open_loop_joint3(13))
    free = {"armature_j1", "armature_j2", "mu_viscous_j1", "mu_viscous_j2"}
    vec = synth.TRUTH.to_vector()
    space = ParameterSpace(frozen={i: float(vec[i]) for i, n in enumerate(PARAM_NAMES) if n not in free})
    history = [{"iter": i, "best": 1.0 / (i + 1), "min": 1.0 / (i + 1), "mean": 2.0 / (i + 1)} for i in range(6)]
    rec = FitRecord(fit_id="exact", fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00", status="done",
                    best_loss=0.0, params=synth.TRUTH, seed=0,
                    settings={"min_duration_s": 0.5, "space": space.to_json()}, history=history,
                    runs=[IntervalUse("demo", "t1", 0, 0, TICKS - 1, "train", 1.0)])
    publish_fit(root, rec)
    return root


def test_validate_scores_fitted_against_nominal_and_stores_rows(lake):
    thresholds = Thresholds(max_q_rmse_rad=0.0003)
    outs = validate_fit(lake, "exact", ["h1"], thresholds, created_utc="2026-01-02T00:00:00+00:00")
    by_label = {o.sim_label: o for o in outs}
    assert set(by_label) == {"fitted", "nominal"}
    fitted, nominal = by_label["fitted"], by_label["nominal"]
    fq = fitted.metrics_doc["joints"]["pos_rmse_all_rad"]
    nq = nominal.metrics_doc["joints"]["pos_rmse_all_rad"]
    assert fq < 0.0003 < nq, (fq, nq)  # the truth replays its own recording; nominal does not
    assert fitted.verdict == "pass" and nominal.verdict == "fail"
    assert any("q RMSE (all joints)" in r for r in nominal.reasons)
    # metrics.json on disk equals a recomputation from the stored samples
    part = lake / "validations" / f"validation={fitted.validation_id}"
    doc = json.loads((part / "metrics.json").read_text())
    assert list(doc)[:6] == ["schema_version", "created_utc", "real_csv", "sim_csv", "real_sidecar", "sim_sidecar"]
    assert doc["metrics_path"] == f"validations/validation={fitted.validation_id}/metrics.json"
    traj = load_trajectory(lake, fitted.validation_id)
    again = compute_metrics(Trajectory(traj["t_s"], q_rad=traj["q_real"], dq_rad_s=traj["dq_real"]),
                            Trajectory(traj["t_s"], q_rad=traj["q_sim"], dq_rad_s=traj["dq_sim"]))
    assert again["joints"]["pos_rmse_rad"] == pytest.approx(doc["joints"]["pos_rmse_rad"], rel=1e-12)
    assert doc["num_samples"] == len(traj["t_s"]) > 0
    con = connect(lake)
    rows = con.execute("SELECT sim_label, verdict, q_rmse_all_rad, len(q_rmse_rad) FROM validations "
                       "WHERE fit = 'exact' ORDER BY sim_label").fetchall()
    assert rows == [("fitted", "pass", pytest.approx(fq), 7), ("nominal", "fail", pytest.approx(nq), 7)]
    passed = con.execute("SELECT run, passed, fitted_verdict, nominal_verdict FROM fit_validations "
                         "WHERE fit = 'exact'").fetchall()
    assert passed == [("h1", True, "pass", "fail")]


def test_validating_twice_is_a_no_op_that_says_so(lake):
    outs = validate_fit(lake, "exact", ["h1"], Thresholds(max_q_rmse_rad=0.0003))
    assert [o.published for o in outs] == [False, False]
    assert len(list((lake / "validations").glob("validation=*"))) == 2


def test_refuses_a_training_run_and_bad_thresholds(lake):
    with pytest.raises(ValueError, match="used to train fit exact"):
        validate_fit(lake, "exact", ["t1"], Thresholds())
    with pytest.raises(SettingError, match="max_q_rmse_rad -1.0") as bad:
        Thresholds(max_q_rmse_rad=-1.0)
    assert error_text(bad.value).startswith("--max-q-rmse-rad -1.0: expected")  # as the CLI says it


def test_no_thresholds_means_no_verdict_and_the_floor_is_checked_by_default(lake):
    outs = validate_fit(lake, "exact", ["demo/h1"], Thresholds(max_floor_ratio=None),
                        created_utc="2026-01-03T00:00:00+00:00")
    assert {o.verdict for o in outs} == {None}
    assert all(o.published for o in outs)
    assert np.isfinite(outs[0].metrics_doc["joints"]["vel_rmse_all_rad_s"])
    # by default the residual is held against the run's own noise floor (3×)
    assert Thresholds().declared and json.loads(Thresholds().to_json()) == {"max_floor_ratio": 3.0}
    by_label = {o.sim_label: o for o in validate_fit(lake, "exact", ["demo/h1"], Thresholds())}
    assert by_label["fitted"].verdict == "pass" and by_label["nominal"].verdict == "fail"
    assert by_label["fitted"].adequacy.ratio_all < 1.5 < 3.0 < by_label["nominal"].adequacy.ratio_all
    assert "the noise floor > 3×" in by_label["nominal"].reasons[0]


def test_cli_validate_json_then_report_with_error_bars(lake, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["fit", "validate", "exact", "--runs", "demo/h1", "--max-q-rmse-rad", "0.0003",
                              "--max-joint-q-rmse-rad", "0.001", "--json", "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {(r["sim_label"], r["verdict"]) for r in rows} == {("fitted", "pass"), ("nominal", "fail")}
    res = runner.invoke(app, ["fit", "report", "exact", "--out", str(tmp_path / "rep"), "--error-bars",
                              "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "rep" / "index.html").read_text()
    pngs = sorted(p.name for p in (tmp_path / "rep").glob("*.png"))
    assert pngs == ["convergence.png", "correlation.png", "heldout_01_joints.png", "heldout_01_residual.png",
                    "parameters.png"]
    assert html.count("data:image/png;base64,") == 5
    assert "demo/h1" in html and "fitted" in html and "nominal" in html
    assert "no error bars" not in html  # computed on the fit's training interval
    # the 95 % intervals of the four free parameters are in the table, frozen ones are not
    assert html.count("<td>armature_j1</td>") == 1


def test_cli_quick_refuses_or_reports_and_never_touches_the_profile(lake, tmp_path):
    runner = CliRunner()
    profile = tmp_path / "profile.json"
    from twinlake.sim import save_profile

    save_profile(synth.TRUTH, profile)
    before = profile.read_bytes()
    res = runner.invoke(app, ["fit", "quick", "t1", "--joint", "1", "--profile", str(profile), "--lake", str(lake)])
    assert res.exit_code == 2
    assert "refused" in res.stderr and ("standard error" in res.stderr or "condition number" in res.stderr)
    res = runner.invoke(app, ["fit", "quick", "t1", "--joint", "1", "--profile", str(profile), "--allow-warnings",
                              "--out", str(tmp_path / "gap"), "--json", "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    report = Path(out["report"])
    assert report == tmp_path / "gap" / "demo.t1.quick_j1.fit.md"
    text = report.read_text()
    assert "NOT TRUSTWORTHY" in text and str(profile) in text
    assert out["sim"]["viscous_nms_per_rad"] == pytest.approx(synth.TRUTH.mu_viscous[0])
    assert out["sim"]["inertia_kgm2"] > synth.TRUTH.armature[0]  # links + armature
    assert profile.read_bytes() == before
    res = runner.invoke(app, ["fit", "quick", "t1", "--joint", "9", "--lake", str(lake)])
    assert res.exit_code == 2 and "1..7" in res.stderr


def test_cli_quick_recovers_an_open_loop_plant_from_the_lake(lake, tmp_path):
    res = CliRunner().invoke(app, ["fit", "quick", "demo/ol", "--joint", "3", "--out", str(tmp_path), "--json",
                                   "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["trustworthy"] and out["warnings"] == []
    keys = (("inertia_kgm2", "inertia_se"), ("viscous_nms_per_rad", "viscous_se"), ("coulomb_nm", "coulomb_se"))
    for (key, se_key), truth in zip(keys, PLANT_J3):
        assert abs(out[key] - truth) < 4 * out[se_key] + 0.02 * truth, (key, out[key], out[se_key])
    text = Path(out["report"]).read_text()
    assert "trustworthy (no warnings)" in text and "joint J3" in text
