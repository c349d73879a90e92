"""Model adequacy (fit/trust/adequacy.py, fit/trust/signatures.py) wired into `fit validate`, `fit run`,
`fit show` and `fit report`: the residual against the run's own noise floor (estimated, never
the truth), the verdict, and the likely cause in words.

Recordings: the offline recorder on the demo robot (training run with fr3_stack's default gains,
a held-out run with other K/D), and the simulated arm carrying an unmodelled 1 kg flange mass.
Fits: `exact` = the demo robot's true parameters, `slippery` = the same with half the static
friction; `fit run` with the armature frozen at half the truth for the training check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import synth
from floor_recording import ingest_recordings, offline_run, record_arm
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.cli import app
from twinlake.fit.trust.adequacy import ResidualSegment, adequacy_from_dict, assess, problem_adequacy
from twinlake.fit.records.record import FitRecord, IntervalUse, load_fit, publish_fit
from twinlake.sim import DEMO_PROFILE_PATH, HOME_Q, PARAM_NAMES, DynamicsParams, load_params

ROBOT = "demo-robot"
NOISE_Q = 2e-5  # the offline recorder's default q noise [rad]
SOFT = {"k_joint": (300.0, 300, 300, 300, 120, 80, 30), "d_joint": (35.0, 35, 35, 35, 20, 15, 8)}
PAYLOAD_KG = 1.0


def _truth() -> DynamicsParams:
    return load_params(DEMO_PROFILE_PATH)


def _with(params: DynamicsParams, **changes) -> DynamicsParams:
    fields = {k: getattr(params, k) for k in ("armature", "mu_static", "dynamic_ratio", "mu_viscous", "motor_delay_ms")}
    return DynamicsParams(**{**fields, **changes})


def _publish(lake: Path, fit_id: str, params: DynamicsParams) -> None:
    publish_fit(lake, FitRecord(fit_id=fit_id, fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00",
                                status="done", best_loss=0.0, params=params, seed=0,
                                settings={"min_duration_s": 0.5}, history=[],
                                runs=[IntervalUse(ROBOT, "train", 0, 0, 100, "train", 1.0)]))


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    from twinlake.daemon.noise import NoiseConfig

    tmp = tmp_path_factory.mktemp("adequacy")
    noise = NoiseConfig()
    made = [("train", "train", offline_run(tmp, "train", 1, noise)),
            ("soft", "holdout", offline_run(tmp, "soft", 2, noise, **SOFT))]
    root = tmp / "lake"
    ingest_recordings(root, made)
    targets = np.r_[np.tile(HOME_Q, (300, 1)), synth.multisine_targets(2700, seed=9)]
    synth.publish_run(root, ROBOT, "payload", record_arm(_truth(), targets, seed=4, noise_q_rad=NOISE_Q,
                                                         payload_kg=PAYLOAD_KG))
    _publish(root, "exact", _truth())
    _publish(root, "slippery", _with(_truth(), mu_static=_truth().mu_static * 0.5))
    return root


def _validate(lake: Path, fit: str, run: str, *extra: str):
    res = CliRunner().invoke(app, ["fit", "validate", fit, "--runs", f"{ROBOT}/{run}", *extra, "--lake", str(lake)])
    return res


def _stored(lake: Path, fit: str, run: str, label: str = "fitted") -> dict:
    row = connect(lake).execute("SELECT adequacy_json, floor_ratio, noise_floor_q_rad, thresholds_json FROM validations "
                                "WHERE fit = ? AND run = ? AND sim_label = ? ORDER BY created_utc DESC LIMIT 1",
                                [fit, run, label]).fetchone()
    return {"adequacy": json.loads(row[0]), "floor_ratio": row[1], "floor": row[2], "thresholds": json.loads(row[3])}


def test_matching_model_passes_on_a_run_recorded_with_other_gains(lake):
    res = _validate(lake, "exact", "soft", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["sim_label"]: r for r in json.loads(res.stdout)}
    fitted, nominal = rows["fitted"], rows["nominal"]
    assert fitted["verdict"] == "pass" and 0.9 < fitted["floor_ratio"] < 1.3, fitted
    assert fitted["noise_floor_q_rad"] == pytest.approx(NOISE_Q, rel=0.2)  # estimated, not the truth
    assert "within 3×: the model explains this run" in fitted["adequacy"]
    assert nominal["verdict"] == "fail" and nominal["floor_ratio"] > 3
    assert any("× the noise floor > 3×" in r for r in nominal["reasons"])
    stored = _stored(lake, "exact", "soft")
    assert stored["floor_ratio"] == pytest.approx(fitted["floor_ratio"]) and stored["thresholds"] == {"max_floor_ratio": 3.0}
    assert stored["adequacy"]["verdict"] == "pass" and stored["adequacy"]["cause"] is None


def test_unmodelled_payload_fails_and_names_the_flange_mass(lake):
    res = _validate(lake, "exact", "payload")
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())  # undo the console's line wrapping
    assert "× the noise floor" in out and "the model does not explain this run" in out
    assert re.search(r"bias on J2/J4(/J\d)* correlates with flange-mass gravity \(a 0\.9\d+ kg point mass", out), out
    assert "parameter spec `+payload`" in out and f"{ROBOT}/payload" in out
    adequacy = _stored(lake, "exact", "payload")["adequacy"]
    assert adequacy["verdict"] == "fail" and adequacy["ratio_all"] > 30 and adequacy["cause"] == "payload"
    payload = next(s for s in adequacy["signatures"] if s["name"] == "payload")
    assert payload["values"]["mass_kg"] == pytest.approx(PAYLOAD_KG, rel=0.2) and payload["explained"] > 0.8
    assert {2, 4} <= set(payload["joints"])


def test_wrong_friction_fails_on_a_run_with_other_gains_with_friction_named(lake):
    res = _validate(lake, "slippery", "soft", "--json")
    assert res.exit_code == 1, res.output
    fitted = next(r for r in json.loads(res.stdout) if r["sim_label"] == "fitted")
    assert fitted["verdict"] == "fail" and fitted["floor_ratio"] > 3 and fitted["likely_cause"] == "friction"
    assert "flips with the sign of velocity" in fitted["adequacy"] and "mu_static / dynamic_ratio" in fitted["adequacy"]
    friction = next(s for s in _stored(lake, "slippery", "soft")["adequacy"]["signatures"] if s["name"] == "friction")
    truth = _truth()
    missing = 0.5 * truth.mu_static * truth.dynamic_ratio  # the sliding friction the model lacks [N·m]
    assert friction["explained"] > 0.8 and friction["joints"]
    for j in friction["joints"]:
        assert friction["values"]["delta_nm"][j - 1] == pytest.approx(missing[j - 1], rel=0.35), j
    # --max-floor-ratio moves the limit (here past the residual) and is recorded with the thresholds
    loose = _validate(lake, "slippery", "soft", "--max-floor-ratio", "1000", "--json")
    assert loose.exit_code == 0, loose.output
    rows = connect(lake).execute("SELECT thresholds_json, verdict FROM validations WHERE fit = 'slippery' AND "
                                 "sim_label = 'fitted' ORDER BY thresholds_json").fetchall()
    assert [(json.loads(t), v) for t, v in rows] == [({"max_floor_ratio": 1000.0}, "pass"),
                                                     ({"max_floor_ratio": 3.0}, "fail")]


def test_show_and_report_put_the_adequacy_line_on_top(lake, tmp_path):
    res = CliRunner().invoke(app, ["fit", "show", "exact", "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    lines = [" ".join(chunk.split()) for chunk in res.output.split("model adequacy: ")[1:]]
    assert res.output.startswith("verdict: not trusted")  # the verdict first: a held-out run is not explained
    head = res.output[:res.output.index("model adequacy: ")]
    assert "held-out demo-robot/payload" in head and "flange-mass gravity" in " ".join(head.split())
    assert res.output.index("model adequacy: ") < res.output.index("┏")  # before the parameters
    assert lines[0].startswith("training residual against the noise floor: not assessed")  # a record without it
    payload = next(x for x in lines if x.startswith(f"held-out {ROBOT}/payload residual"))
    assert "× the noise floor" in payload and "flange-mass gravity" in payload
    shown = json.loads(CliRunner().invoke(app, ["fit", "show", "exact", "--json", "--lake", str(lake)]).output)
    assert any("flange-mass gravity" in x for x in shown["adequacy"]["lines"])
    res = CliRunner().invoke(app, ["fit", "report", "exact", "--out", str(tmp_path / "rep"), "--lake", str(lake)])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "rep" / "index.html").read_text()
    top = page.index("<h2>Model adequacy</h2>")
    assert top < page.index("<table>") and "flange-mass gravity" in page[top:page.index("<table>")]
    assert "model adequacy: held-out demo-robot/payload" in page  # among the flags too


def test_training_adequacy_is_stored_with_the_fit_and_flagged(lake):
    from twinlake.fit.core.objective import build_data
    from twinlake.fit.run import FitSettings, run_fit
    from twinlake.fit.core.space import parse_space

    truth = _truth()
    good = problem_adequacy(build_data(lake, [f"{ROBOT}/train"]), truth.to_vector())
    assert good.verdict()[0] == "pass" and good.ratio_all < 1.3
    assert "explains its own training data" in good.line("training", "its own training data")
    # a fit whose space cannot reach the truth (armature frozen at half) does not explain its training run
    light = _with(truth, armature=truth.armature * 0.5).to_vector()
    free = {"mu_viscous_j6": "0.2:0.8", "mu_viscous_j7": "0.2:0.8"}  # two: pycma does not search 1-D
    specs = [f"{n}={float(v)!r}" for n, v in zip(PARAM_NAMES, light) if n not in free]
    specs += [f"{n}={bounds}" for n, bounds in free.items()]
    settings = FitSettings(train=[f"{ROBOT}/train"], holdout=[f"{ROBOT}/soft"], space=parse_space(specs).to_json(),
                           population=4, generations=1, refine_iterations=0)
    rec = run_fit(lake, settings, fit_id="frozen-light", workers=0, progress=False)
    assert rec.extra["train_floor_ratio"] > 3 and rec.extra["holdout_floor_ratio"] > 3
    stored = json.loads(load_fit(lake, "frozen-light").extra["adequacy_json"])
    train = adequacy_from_dict(stored["train"])
    assert train.verdict()[0] == "fail" and train.cause is not None and train.cause.name == "inertia"
    assert connect(lake).execute("SELECT train_floor_ratio FROM fits WHERE fit = 'frozen-light'").fetchone()[0] \
        == pytest.approx(rec.extra["train_floor_ratio"])
    res = CliRunner().invoke(app, ["fit", "show", "frozen-light", "--lake", str(lake)])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "training residual" in text
    assert "the model does not explain its own training data" in text and "armature" in text


def test_what_cannot_be_shown_fails_and_says_why():
    """No silent pass: a noise-free recording, an unstable replay, a floor that is only an
    upper bound; and with the check off the ratio is still stated."""
    rng = np.random.default_rng(1)
    t = np.arange(3000) * 1e-3
    q = HOME_Q + 0.1 * np.sin(2 * np.pi * 0.5 * t)[:, None]
    dq = np.gradient(q, t, axis=0)

    def one(real, sim, times=t, **kw):
        return assess([ResidualSegment(times, real, sim, dq, dq)], _truth(), **kw)

    hold = np.tile(HOME_Q, (3000, 1))  # a hold recorded without noise
    noise_free = one(hold, hold + 1e-4)
    assert noise_free.verdict()[0] == "fail" and "not measurable" in noise_free.verdict()[1]
    assert "cannot show the model explains this run" in noise_free.line()
    smooth = one(q, q + 1e-4)  # noise-free motion: the floor is the motion's own round-off, an upper bound
    assert smooth.floor.upper_bound and smooth.verdict()[0] == "fail" and "≥" in smooth.verdict()[1]
    noisy = q + rng.normal(0, 2e-5, q.shape)
    unstable = one(noisy, np.full_like(q, np.nan))
    assert unstable.verdict() == ("fail", "q residual not finite (the replay went unstable)")
    coarse_t = np.arange(3000) * 0.02  # 50 Hz: the motion leaks into the floor estimate
    coarse = HOME_Q + 0.3 * np.sin(2 * np.pi * 0.7 * coarse_t)[:, None] + rng.normal(0, 2e-5, q.shape)
    bound = one(coarse, coarse, times=coarse_t)
    assert bound.floor.upper_bound and bound.verdict()[0] == "fail" and "upper bound" in bound.verdict()[1]
    off = one(noisy, q + 2e-3, max_floor_ratio=None)
    assert off.verdict() == (None, "") and off.ratio_all > 50 and "no limit declared" in off.line()
    explained = one(noisy, q, max_floor_ratio=3.0)
    assert explained.verdict() == ("pass", "") and 0.8 < explained.ratio_all < 1.2 and explained.cause is None
    assert adequacy_from_dict(json.loads(json.dumps(off.to_dict()))).line() == off.line()
