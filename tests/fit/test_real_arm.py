"""A twin for a real arm: fits of recordings made on the independent test plant (tests/plant,
no code shared with sim/), which carries a 0.8 kg flange payload its firmware does not know,
tanh-smoothed asymmetric Coulomb + viscous friction and a 2 ms motor delay.

Two training runs and two held-out runs (one with other tones, one with other K/D), all
planned by the daemon's multisine planner, recorded by the plant as CSV v2 and ingested:

- the default fit (FrankaTwin's 29) cannot explain them: its validation fails, naming the
  residual's ratio to the noise floor and the flange mass, with a `--params` preset that exists;
- the fit with `+payload +smooth-friction +asymmetry` finds the 2 ms delay, the payload mass
  within 10 % and lands within 3× the noise floor on both held-out runs (its validation
  passes), the one recorded with other gains included.

The plant's tanh smoothing velocity is set to the twin's fixed v_t (0.02 rad/s, sim/arm_model/plant.py):
a fit cannot search it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the `plant` package

from plant import IndependentPlant, record  # noqa: E402

from twinlake.catalog import Lake  # noqa: E402
from twinlake.fit.run import FitSettings, run_fit  # noqa: E402
from twinlake.fit.core.space import PRESETS, parse_space  # noqa: E402
from twinlake.fit.trust.validate import Thresholds, validate_fit  # noqa: E402
from twinlake.ingest import ReadOptions, ingest_paths  # noqa: E402

ROBOT = "real-arm"
PAYLOAD_KG = 0.8
PLANT = IndependentPlant(payload_mass_kg=PAYLOAD_KG, smoothing_velocity_rad_s=(0.02,) * 7)
OTHER_KP = (400.0, 400.0, 400.0, 400.0, 150.0, 100.0, 30.0)
OTHER_KD = (35.0, 35.0, 35.0, 35.0, 20.0, 15.0, 10.0)
RUNS = [  # run, tones [Hz], seed (phases and noise), gains (None: the plant's defaults)
    ("train-1", (0.3, 0.7, 1.3), 1, None),
    ("train-2", (0.3, 0.7, 1.3), 2, None),
    ("held-tones", (0.4, 0.9, 1.7), 3, None),
    ("held-gains", (0.4, 0.9, 1.7), 4, (OTHER_KP, OTHER_KD)),
]
TRAIN = [f"{ROBOT}/train-1", f"{ROBOT}/train-2"]
HELD_OUT = [f"{ROBOT}/held-tones", f"{ROBOT}/held-gains"]
RICH = ["+payload", "+smooth-friction", "+asymmetry"]
# Measured (2-core machine, 2026-12-01, the rich fit below): held-out 1.19× (other tones) and
# 1.42× (other K/D) of the floor, both verdicts pass; delay 2 ms, payload 0.7998 kg. Before the
# twin's Coriolis feed-forward used the firmware's model and the configured load (sim/
# load_dynamics.py) instead of the model with the candidate payload, the same fit reached only
# 3.4-3.6× and 4.4-4.6×.
REACHED_RATIO = 3.0


def _reference(folder: Path, tones: tuple[float, ...], seed: int) -> Path:
    from twinlake.daemon import Plan, preflight, validate_plan
    from twinlake.daemon.excitation import PREVIEW_ANCHOR_Q
    from twinlake.daemon.excite_files import reference_table, write_reference_csv

    plan = validate_plan(Plan(mode="multisine", joints=(1, 2, 3, 4, 5, 6, 7), amplitude_deg=10.0, seconds=3.0,
                              ramp=0.5, hold=0.3, tones=tones, seed=seed, rate=100.0, max_velocity=3.0,
                              max_acceleration=30.0, max_jerk=500.0))
    preflight(plan, PREVIEW_ANCHOR_Q)
    write_reference_csv(folder / "reference.csv", reference_table(plan, PREVIEW_ANCHOR_Q))
    return folder / "reference.csv"


@pytest.fixture(scope="module")
def arm_lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("realarm")
    lake = root / "lake"
    for run, tones, seed, gains in RUNS:
        folder = root / run
        folder.mkdir()
        ref = _reference(folder, tones, seed)
        kw = {} if gains is None else {"kp": gains[0], "kd": gains[1]}
        rec = record(ref, folder / f"{run}.csv", plant=PLANT.replace(seed=seed), settle_s=1.0, tail_s=0.3, **kw)
        for outcome in ingest_paths(Lake(lake), [rec.csv_path], ReadOptions(robot=ROBOT, run=run)):
            assert outcome.status == "published" and outcome.verdict == "ok", (run, outcome.message)
    return lake


def _fit(lake: Path, fit_id: str, specs: list[str], population: int, generations: int, refine: int):
    settings = FitSettings(train=TRAIN, holdout=HELD_OUT[:1], space=parse_space(specs).to_json(),
                           population=population, generations=generations, seed=0, refine_iterations=refine)
    return run_fit(lake, settings, fit_id=fit_id, workers=0, progress=False)


@pytest.fixture(scope="module")
def rich_fit(arm_lake):
    rec = _fit(arm_lake, "rich", RICH, population=16, generations=8, refine=10)
    outcomes = validate_fit(arm_lake, "rich", HELD_OUT, Thresholds())
    return rec, {(o.run, o.sim_label): o for o in outcomes}


@pytest.mark.slow
def test_the_default_fit_is_flagged_naming_the_ratio_and_the_payload(arm_lake):
    rec = _fit(arm_lake, "default", [], population=8, generations=2, refine=0)
    assert rec.params.payload_mass == 0.0 and rec.settings["space"]["friction_law"] == "stribeck"
    assert rec.extra["train_floor_ratio"] > 30 and rec.extra["holdout_floor_ratio"] > 30
    for o in validate_fit(arm_lake, "default", HELD_OUT, Thresholds()):
        ratio = o.adequacy.ratio_all
        assert o.verdict == "fail" and ratio > 30, (o.run, o.sim_label, ratio)
        assert any(f"q residual {ratio:.3g}× the noise floor > 3×" in r for r in o.reasons), o.reasons
        assert "flange" in o.adequacy.cause_text() and "parameter spec `+payload`" in o.adequacy.cause_text()
    assert "+payload" in PRESETS  # the hint names a preset that parses
    assert "payload_mass" in parse_space(["+payload"]).free_names


@pytest.mark.slow
def test_the_fit_with_payload_smooth_law_and_asymmetry_explains_held_out_runs(rich_fit):
    rec, outcomes = rich_fit
    assert rec.settings["space"]["friction_law"] == "tanh"
    assert rec.params.motor_delay_ms == PLANT.motor_delay_ms
    assert abs(rec.params.payload_mass - PAYLOAD_KG) <= 0.10 * PAYLOAD_KG, rec.params.payload_mass
    for run in ("held-tones", "held-gains"):
        fitted, nominal = outcomes[(run, "fitted")], outcomes[(run, "nominal")]
        assert fitted.adequacy.ratio_all <= REACHED_RATIO, (run, fitted.adequacy.ratio_all, fitted.reasons)
        assert nominal.verdict == "fail" and nominal.adequacy.ratio_all > 30 * fitted.adequacy.ratio_all
    # the validation replays the fit's plant (tanh law, configured load): the held-out ratio the
    # fit stored for the same run is the validation's
    assert outcomes[("held-tones", "fitted")].adequacy.ratio_all == pytest.approx(rec.extra["holdout_floor_ratio"],
                                                                                 rel=1e-6)


@pytest.mark.slow
def test_held_out_residual_within_three_times_the_floor(rich_fit):
    _rec, outcomes = rich_fit
    assert all(outcomes[(run, "fitted")].verdict == "pass" for run in ("held-tones", "held-gains"))
