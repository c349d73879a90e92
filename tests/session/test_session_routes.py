"""The README session's two routes (tests/session/readme_session.py): `fit compare FIT_TORQUE
FIT` agrees. On these gentle runs the torque route's delay scan does not resolve the delay (its
neighbours fit within the χ² 95 % point, fit/torque/findings.py) and J7 never breaks away
(fit/torque/solve.py, `creeping`): both are listed as not compared, not tested against the
replay fit's values. Read-only over the session's lake."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from twinlake.cli import app


def test_the_torque_and_replay_fits_of_the_session_agree(readme_session):
    step = readme_session.step("fit compare")
    assert step.exit_code == 0, step.stdout[-3000:]
    lake = str(readme_session.lake)
    out = CliRunner().invoke(app, ["fit", "compare", readme_session.fit_torque, readme_session.fit, "--json",
                                   "--lake", lake])
    cmp = json.loads(out.stdout)
    assert cmp["parameters"] and all(p["verdict"] == "agree" for p in cmp["parameters"]), cmp["parameters"]
    torque = json.loads(CliRunner().invoke(app, ["fit", "show", readme_session.fit_torque, "--json",
                                                 "--lake", lake]).stdout)
    status = {s["name"]: s["status"] for s in torque["parameter_status"]}
    for group in ("armature", "mu_static", "mu_viscous"):
        assert status[f"{group}_j7"] in ("held_at_prior", "not_identified"), (group, status[f"{group}_j7"])
