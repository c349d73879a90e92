"""`twinlake excite --design`: the real command on a short segment, bounds respected,
predictions stored (confirmed by a replay Jacobian unless --no-confirm), and the design beats
fr3_stack's documented multisine under the surrogate."""

import json

from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.excitation_design.excite import SPEED_FRACTION


def test_design_respects_bounds_and_stores_predictions(tmp_path):
    out = tmp_path / "designed"
    result = CliRunner().invoke(app, ["excite", "--design", "--seconds", "8", "--ramp", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "metadata.json").read_text())
    design = meta["design"]
    assert len(design["predicted_half_width_rel"]) == 28
    assert design["surrogate_worst_rel"] < design["baseline_predicted_worst_rel"]
    # the stored prediction is the confirmation's (replay Jacobian, the fit's HAC rule), not the surrogate's
    assert design["prediction"] == "replay_jacobian_hac"
    assert design["confirmation"]["covariance"]["method"] == "hac_bartlett_andrews"
    predicted = design["predicted_half_width_rel"]
    assert all(0 < v < float("inf") for v in predicted.values()) and predicted != design["surrogate_half_width_rel"]
    assert design["predicted_worst_rel"] == max(predicted.values())
    assert "one replay Jacobian of the design" in result.stderr
    peaks = meta["reference_peaks"]
    assert max(peaks["velocity_rad_s"]) <= SPEED_FRACTION * 0.1 + 1e-9 and max(peaks["acceleration_rad_s2"]) <= 0.3
    assert max(peaks["jerk_rad_s3"]) <= 2.0
    assert max(peaks["offset_rad"]) <= max(design["bounds"]["position_rad"]) + 1e-12
    assert len(meta["plan"]["tone_table"]) == 7



def test_chirp_components_stream_as_the_search_scores_them():
    """A tone_table component with a sweep is a linear chirp: the daemon's streamed offsets and
    derivatives equal the search's vectorised candidate signal; a sweep past rate/20 is refused."""
    import numpy as np
    import pytest

    from twinlake.daemon.excitation import Plan, offsets, sample_times, validate_plan
    from twinlake.excitation_design.candidates import multisine

    table = tuple(((0.01, 0.2, 0.3, 0.05), (0.005, 0.5, 1.0)) for _ in range(7))
    plan = validate_plan(Plan(mode="multisine", joints=tuple(range(1, 8)), seconds=8, ramp=2, hold=0.0,
                              tone_table=table))
    t = sample_times(plan, 1000.0)
    streamed = offsets(plan, t)[:, :, 0]
    scored = multisine(np.array([[0.01, 0.005]]), np.array([[0.2, 0.5]]), np.array([[0.3, 1.0]]), t, 8.0, 2.0,
                       ends_hz=np.array([[0.2 + 0.05 * 8, 0.5]]))[:, 0, :]
    assert np.abs(streamed).max(axis=1).min() > 0
    np.testing.assert_allclose(streamed, scored, rtol=0, atol=1e-12 * np.abs(streamed).max())
    tone_only = multisine(np.array([[0.01, 0.005]]), np.array([[0.2, 0.5]]), np.array([[0.3, 1.0]]), t, 8.0, 2.0)
    assert np.abs(tone_only[1, 0] - scored[1]).max() > 1e-3  # the sweep changes the velocity
    with pytest.raises(ValueError, match="exceeds --rate/20"):
        validate_plan(Plan(mode="multisine", joints=(1,), seconds=8, ramp=2,
                           tone_table=(((0.01, 0.5, 0.0, 0.5),),) + ((),) * 6))


def test_live_recording_carries_its_design(start_daemon, tmp_path):
    """excite --design --execute --record: the recording's meta companion holds the design."""
    for attempt in range(2):  # a loaded host can stall the client into a guard: the README's retry, once
        d = start_daemon(initial_controller="joint_impedance", seed=3)
        d.wait_state(lambda s: s.controller == "joint_impedance")
        p = d.daemon.ports
        out = tmp_path / f"exc{attempt}"
        result = CliRunner().invoke(app, ["excite", "--design", "--no-confirm", "--seconds", "4", "--ramp", "1",
                                          "--hold", "0.3", "--execute", "--host", "127.0.0.1", "--robot-id",
                                          "sim-left", "--cmd-port", str(p["cmd"]), "--state-port", str(p["state"]),
                                          "--recording-port", str(p["recording"]), "--output", str(out),
                                          "--record", "run.csv", "--max-lateness", "0.5", "--stale-after", "1.0"])
        if result.exit_code == 0 or "aborted at t = " not in result.stderr:
            break
    assert result.exit_code == 0, result.output
    design = json.loads((out / "metadata.json").read_text())["design"]
    assert json.loads((out / "run.meta.json").read_text())["design"] == design


def test_designed_run_recorded_fitted_and_shown_predicted_beside_realised(tmp_path):
    """excite --design preview → offline 1 kHz recording → ingest → fit → `fit show` puts the
    design's predicted half-widths beside the fit's realised ones ((high − low) / 2 / |estimate|)."""
    from twinlake.catalog import connect
    from twinlake.daemon.offline import record_offline
    from twinlake.fit.records.record import load_fit
    from twinlake.fit.core.space import parse_space
    from twinlake.fit.run import FitSettings, run_fit

    out, lake = tmp_path / "exc", tmp_path / "lake"
    cli = CliRunner()
    result = cli.invoke(app, ["excite", "--design", "--no-confirm", "--seconds", "6", "--ramp", "1.5", "--hold", "0.3",
                              "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "surrogate only, not confirmed by a replay" in result.output
    design = json.loads((out / "metadata.json").read_text())["design"]
    assert design["prediction"] == "surrogate" and "confirmation" not in design
    assert design["predicted_half_width_rel"] == design["surrogate_half_width_rel"]
    record_offline(out / "reference.csv", out / "run.csv", seed=1, tail_s=0.3)
    assert json.loads((out / "run.meta.json").read_text())["design"] == design  # the recording carries it
    result = cli.invoke(app, ["ingest", str(out / "run.csv"), "--lake", str(lake), "--robot", "sim-left",
                              "--run", "designed"])
    assert result.exit_code == 0, result.output
    assert connect(lake).execute("SELECT count(*) FROM runs WHERE run = 'designed' AND metadata_json "
                                 "LIKE '%predicted_half_width_rel%'").fetchone() == (1,)
    settings = FitSettings(train=["sim-left/designed"], holdout=[], space=parse_space([]).to_json(), population=6,
                           generations=1, seed=5, max_duration_s=4.0, method="cma")
    run_fit(lake, settings, fit_id="designed-fit", workers=0, progress=False)
    shown = cli.invoke(app, ["fit", "show", "designed-fit", "--json", "--lake", str(lake)])
    assert shown.exit_code == 0, shown.output
    (check,) = json.loads(shown.stdout)["designs"]
    assert check["run"] == "designed" and check["worst_predicted_rel"] == design["predicted_worst_rel"]
    stored = {q["name"]: q for q in load_fit(lake, "designed-fit").identifiability["parameters"]}
    rows = {row["name"]: row for row in check["parameters"]}
    assert set(rows) == set(design["predicted_half_width_rel"])
    for name, row in rows.items():
        assert row["predicted_rel"] == design["predicted_half_width_rel"][name]
        q = stored[name]
        if q["free"] and q["ci95_low"] is not None:
            scale = abs(q["value"]) or q["upper_bound"] - q["lower_bound"]  # the design's own scale at 0
            assert abs(row["realised_rel"] - (q["ci95_high"] - q["ci95_low"]) / 2 / scale) < 1e-12
        else:
            assert row["realised_rel"] is None
    assert any(row["realised_rel"] is not None for row in rows.values())
    text = cli.invoke(app, ["fit", "show", "designed-fit", "--lake", str(lake)]).output
    assert "designed excitation sim-left/designed" in text and "predicted (surrogate) / realised" in text
