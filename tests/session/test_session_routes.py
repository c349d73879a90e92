"""The README session's two routes (tests/session/readme_session.py): `fit compare FIT_TORQUE
FIT` agrees. On these gentle runs the torque route's delay scan does not resolve the delay (its
neighbours fit within the χ² 95 % point, fit/torque/findings.py) and J7 never breaks away
(fit/torque/solve.py, `creeping`): both are listed as not compared, not tested against the
replay fit's values. Read-only over the session's lake."""

from __future__ import annotations

from twinlake.fit.records.record import load_fit
from twinlake.fit.records.statuses import fit_statuses
from twinlake.fit.trust.compare import compare_fits
from twinlake.fit.trust.parameter_status import Status


def test_the_torque_and_replay_fits_of_the_session_agree(readme_session):
    step = readme_session.step("fit compare")
    assert step.exit_code == 0, step.stdout[-3000:]
    torque, replay = (load_fit(readme_session.lake, f) for f in (readme_session.fit_torque, readme_session.fit))
    cmp = compare_fits(torque, replay)  # the API: `fit compare` would record a verdict in the shared lake
    assert cmp.parameters and not cmp.disagreeing, cmp.disagreeing
    status = {s.name: s.status for s in fit_statuses(torque)}
    for group in ("armature", "mu_static", "mu_viscous"):
        assert status[f"{group}_j7"] in (Status.HELD_AT_PRIOR, Status.NOT_IDENTIFIED), (group, status[f"{group}_j7"])
