"""The friction law through the fit: chosen by preset or flag, stored in the space (and so in
the fit's settings), and used by the objective's engine."""

from __future__ import annotations

import pytest

import synth
from twinlake.fit.core.objective import FitProblem, build_data
from twinlake.fit.core.space import FRICTION_LAWS, ParameterSpace, parse_space
from twinlake.sim import LAYOUT, SimFR3
from twinlake.sim.arm_model.plant import FRICTION_LAWS as SIM_LAWS


def test_the_law_is_chosen_by_preset_or_flag_and_stored_with_the_space():
    assert FRICTION_LAWS == tuple(SIM_LAWS)
    assert parse_space([]).friction_law == "stribeck"
    smooth = parse_space(["+smooth-friction"])
    assert smooth.friction_law == "tanh"
    assert all(smooth.frozen[i] == 1.0 for i in LAYOUT.select("dynamic_ratio"))
    assert parse_space([], friction_law="tanh").friction_law == "tanh"
    back = ParameterSpace.from_json(smooth.to_json())
    assert back.friction_law == "tanh" and back.frozen == smooth.frozen
    old = parse_space([]).to_json()
    del old["friction_law"]
    assert ParameterSpace.from_json(old).friction_law == "stribeck"
    with pytest.raises(ValueError, match="friction law 'coulomb'"):
        parse_space([], friction_law="coulomb")


def test_the_objective_replays_under_the_fits_law(tmp_path):
    truth = synth.TRUTH
    frame = synth.record(truth, 700, seed=4, noise_q_rad=0.0, noise_dq_rad_s=0.0)
    synth.publish_run(tmp_path, "demo", "s1", frame)
    assert SimFR3(truth).plant.friction_law == "stribeck"
    losses = {law: FitProblem(build_data(tmp_path, ["s1"], friction_law=law)).loss(truth.to_vector()[None])[0]
              for law in FRICTION_LAWS}
    assert losses["stribeck"] < 1e-12 < losses["tanh"]  # the recording's law, to round-off


def test_fit_run_names_a_bad_friction_law_or_configured_load(tmp_path):
    from typer.testing import CliRunner

    from twinlake.cli import app

    base = ["fit", "run", "--train", "r1", "--lake", str(tmp_path), "--workers", "0"]
    law = CliRunner().invoke(app, [*base, "--friction-law", "coulomb"])
    assert law.exit_code != 0 and "friction law 'coulomb': expected one of stribeck, tanh" in law.output
    load = CliRunner().invoke(app, [*base, "--configured-load", "heavy"])
    assert load.exit_code != 0 and "--configured-load 'heavy': expected numbers in MASS[,X,Y,Z]" in load.output
