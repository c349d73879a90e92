"""The rest rule's model of MuJoCo's friction-loss constraint (fit/torque/model/soft_friction.py),
checked against MuJoCo itself on the FR3 model: the regulariser and reference damping it
computes are the solver's own, and its optimality condition tells, row by row, whether the
solver's friction force sits at its level against the motion (−sign(q̇)·mu_s, what the
Stribeck columns assume)."""

from __future__ import annotations

import mujoco
import numpy as np

from twinlake.fit.torque.model.soft_friction import FrictionConstraint, RestRule
from twinlake.sim import load_model
from twinlake.sim.arm_model.model import arm_index

ARMATURE = np.array([0.31, 0.22, 0.17, 0.18, 0.21, 0.17, 0.08])
LEVEL_NM = np.array([0.9, 1.1, 1.0, 1.3, 1.4, 1.2, 1.0])


def _arm_with_friction():
    model = load_model()
    arm = arm_index(model)
    constraint = FrictionConstraint.of_model(model, arm.dof_adr, ARMATURE)  # before the model is changed
    model.dof_armature[arm.dof_adr] = ARMATURE
    model.dof_frictionloss[arm.dof_adr] = LEVEL_NM
    data = mujoco.MjData(model)
    mujoco.mj_setConst(model, data)
    return model, data, arm, constraint


def _friction_rows(data) -> np.ndarray:
    return np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF)


def test_constraint_scales_are_the_solvers_own():
    model, data, arm, constraint = _arm_with_friction()
    rng = np.random.default_rng(1)
    data.qpos[arm.qpos_adr] = rng.uniform(-1.0, 1.0, 7)
    data.qvel[arm.dof_adr] = rng.normal(0.0, 0.05, 7)
    mujoco.mj_forward(model, data)
    rows = _friction_rows(data)
    assert len(rows) == 7
    assert np.allclose(data.efc_R[rows], constraint.regulariser, rtol=1e-12)
    assert np.allclose(data.efc_aref[rows], -constraint.damping_per_s * data.qvel[arm.dof_adr], rtol=1e-12)
    heavier = FrictionConstraint.of_model(model, arm.dof_adr, ARMATURE * 2.0)
    assert np.all(heavier.regulariser < constraint.regulariser)  # more rotor inertia, smaller A₀, smaller R


def test_the_condition_tells_which_rows_sit_at_the_level():
    """Slow torques through ±the levels: the joints stick, creep, break away and slow down
    again; per row and joint the rule's condition (margin 1, no filter reach) against the
    solver's force."""
    model, data, arm, constraint = _arm_with_friction()
    rule = RestRule.make(constraint, LEVEL_NM, margin=1.0)
    t = np.arange(6000) * model.opt.timestep
    tones = np.array([0.5, 0.7, 0.9, 0.6, 1.1, 0.8, 1.3])
    torque = 1.6 * LEVEL_NM * np.sin(2 * np.pi * tones * t[:, None])
    at_level_solver, at_level_rule, margin_value = [], [], []
    for k in range(len(t)):
        data.qfrc_applied[arm.dof_adr] = torque[k]
        mujoco.mj_forward(model, data)
        dq, ddq = data.qvel[arm.dof_adr].copy(), data.qacc[arm.dof_adr].copy()
        force = data.efc_force[_friction_rows(data)]
        at_level_solver.append(-np.sign(dq) * force >= LEVEL_NM * (1 - 1e-6))  # the level, against the motion
        at_level_rule.append(np.array([rule.at_level(j, dq[j:j + 1], ddq[j:j + 1], 0)[0] for j in range(7)]))
        margin_value.append(constraint.damping_per_s * np.abs(dq) + np.sign(dq) * ddq - constraint.regulariser * LEVEL_NM)
        mujoco.mj_step(model, data)
    solver, rule_says, value = map(np.array, (at_level_solver, at_level_rule, margin_value))
    clear = np.abs(value) > 1e-3 * constraint.regulariser * LEVEL_NM  # off the boundary by more than round-off
    assert clear.mean() > 0.95
    assert np.array_equal(solver[clear], rule_says[clear])
    assert 0.2 < solver.mean() < 0.9  # both kinds of rows occur on every run of this test
    for j in range(7):
        assert solver[:, j].any() and (~solver[:, j]).any()
        creeping = ~solver[:, j] & (np.abs(value[:, j]) > 0)
        assert creeping.any()


def test_reach_widens_every_row_off_the_level():
    rule = RestRule((100.0,) * 7, (1.0,) * 7, margin=1.0)
    dq = np.full(40, 0.1)
    dq[20] = 0.0  # one stuck row
    kept = rule.at_level(0, dq, np.zeros(40), reach=3)
    assert np.array_equal(np.flatnonzero(~kept), np.arange(17, 24))
    assert rule.at_level(0, dq, np.zeros(40), reach=0).sum() == 39
    assert RestRule.from_dict(rule.to_dict()) == rule


def test_a_rest_rule_that_does_not_settle_is_said_in_the_error_bar_note():
    from types import SimpleNamespace

    from twinlake.fit.torque.estimation.solve import SolveNotes
    from twinlake.fit.torque.route import _unsettled

    assert _unsettled(SimpleNamespace(notes=SolveNotes(rest_rule_settled=True))) == ""
    assert _unsettled(SimpleNamespace(notes=SolveNotes())) == ""  # the tanh law: no rule
    note = _unsettled(SimpleNamespace(notes=SolveNotes(rest_rule_settled=False, rest_rule_passes=4,
                                                       rest_rule_last_change=0.07)))
    assert "did not settle in 4 solves" in note and "7 %" in note and "the tanh friction law" in note
