"""The firmware's Coriolis feed-forward: a flange load's velocity-product torque (numpy,
compiled and MuJoCo's own qfrc_bias agree), the feed-forward of the configured load in place
of the true payload, and every engine using it (and agreeing with each other)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from sim_recording import cartesian_frames_50hz, record_synthetic

from twinlake.sim import (DEMO_PROFILE_PATH, DynamicsParams, JointImpedanceCommand, JointImpedanceConfig, PopulationEngine, ReplayInput, SimFR3,
                          load_model, load_params, replay_reference)
from twinlake.sim.arm_model.load import EndLoad, load_coriolis_torque, load_inertia_rows, loads_differ
from twinlake.sim.kernels.load_dynamics import load_feedforward
from twinlake.sim.arm_model.model import arm_index

TRUE = EndLoad(0.8, (0.01, -0.02, 0.05), (1e-3, 2e-3, 1.5e-3))
CONFIGURED = EndLoad(0.3, (0.0, 0.01, 0.02), (4e-4, 4e-4, 6e-4))


def _bias_with(load: EndLoad, q: np.ndarray, dq: np.ndarray) -> tuple[np.ndarray, mujoco.MjData]:
    """MuJoCo's qfrc_bias (zero gravity: C·q̇) of our model carrying `load` in its payload body."""
    m = load_model()
    arm = arm_index(m)
    m.body_mass[arm.payload_body], m.body_ipos[arm.payload_body] = load.mass_kg, load.com_m
    m.body_inertia[arm.payload_body] = load.inertia_kgm2
    d = mujoco.MjData(m)
    mujoco.mj_setConst(m, d)
    d.qpos[arm.qpos_adr], d.qvel[arm.dof_adr] = q, dq
    mujoco.mj_forward(m, d)
    return d.qfrc_bias[arm.dof_adr].copy(), d


def _feedforward(true: EndLoad, configured: EndLoad, d: mujoco.MjData, bias: np.ndarray, arm) -> np.ndarray:
    rows = load_inertia_rows(np.array([true.mass_kg]), np.array([true.com_m]), np.array([true.inertia_kgm2]), configured)
    out = np.full((1, 7), np.nan)
    load_feedforward(rows, d.site_xpos[None], d.site_xmat[None], d.xanchor[None], d.xaxis[None], arm.ee_site,
                     arm.jnt_ids.astype(np.int64), d.qvel[arm.dof_adr][None], bias[None], out)
    return out[0]


def test_the_load_torque_is_mujocos_bias_with_the_load_minus_without(model):
    arm = arm_index(model)
    rng = np.random.default_rng(5)
    for _ in range(6):
        q, dq = rng.uniform(-1.5, 1.5, 7), rng.uniform(-2.5, 2.5, 7)
        load = EndLoad(rng.uniform(0.2, 2.0), rng.uniform(-0.08, 0.12, 3), rng.uniform(1e-4, 8e-3, 3))
        with_load, d = _bias_with(load, q, dq)
        without, _ = _bias_with(EndLoad(), q, dq)
        physics = with_load - without
        assert np.abs(physics).max() > 0.05  # a real torque, not a vacuous match
        readable = load_coriolis_torque(np.array([load.mass_kg]), np.array([load.com_m]), np.array([load.inertia_kgm2]),
                                        d.site_xpos[arm.ee_site][None], d.site_xmat[arm.ee_site][None],
                                        d.xanchor[arm.jnt_ids][None], d.xaxis[arm.jnt_ids][None], dq[None])[0]
        np.testing.assert_allclose(readable, physics, rtol=0, atol=1e-9)
        compiled = with_load - _feedforward(load, EndLoad(), d, with_load, arm)  # bias − (bias − C_load)
        np.testing.assert_allclose(compiled, physics, rtol=0, atol=1e-9)
        np.testing.assert_allclose(compiled, readable, rtol=0, atol=1e-12)


def test_the_feedforward_is_the_bias_of_the_model_carrying_the_configured_load(model):
    arm = arm_index(model)
    rng = np.random.default_rng(9)
    for _ in range(4):
        q, dq = rng.uniform(-1.5, 1.5, 7), rng.uniform(-2.5, 2.5, 7)
        bias_true, d = _bias_with(TRUE, q, dq)
        bias_configured, _ = _bias_with(CONFIGURED, q, dq)
        assert np.abs(bias_true - bias_configured).max() > 0.02
        np.testing.assert_allclose(_feedforward(TRUE, CONFIGURED, d, bias_true, arm), bias_configured, rtol=0, atol=1e-9)
        # equal loads: qfrc_bias itself, bit for bit
        assert np.array_equal(_feedforward(TRUE, TRUE, d, bias_true, arm), bias_true)
    same = load_inertia_rows(np.array([0.8, 0.0]), np.array([TRUE.com_m, (0, 0, 0)]), np.array([TRUE.inertia_kgm2, (0, 0, 0)]), TRUE)
    assert loads_differ(same) and not loads_differ(same[:1])


def _distinct_loads():
    truth = load_params(DEMO_PROFILE_PATH)
    loads = [TRUE, EndLoad(1.4, (0.0, 0.03, 0.08), (3e-3, 3e-3, 1e-3)), CONFIGURED, EndLoad()]
    return truth, np.stack([truth.with_payload(load).to_vector() for load in loads])


def test_engines_agree_bit_for_bit_with_payloads_and_a_configured_load():
    truth, matrix = _distinct_loads()
    frames = record_synthetic(truth.with_payload(TRUE), 900, configured_load=CONFIGURED)
    inp = ReplayInput.from_frames(frames, configured_load=CONFIGURED)
    rec_q = np.stack([frames[f"q{j}"] for j in range(1, 8)], 1)[4:]
    reference = np.stack([replay_reference(inp, DynamicsParams.from_vector(row)).q for row in matrix])
    assert np.abs(reference[0] - rec_q).max() < 1e-12  # SimFR3's recording replays to round-off
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled) as engine:
            q = engine.run(matrix)[0].q
        assert np.array_equal(q, reference), compiled
    # the configured load's inertia moves no gravity torque: what it changes is the feed-forward
    other = ReplayInput.from_frames(frames, configured_load=EndLoad(CONFIGURED.mass_kg, CONFIGURED.com_m, (0.02, 0.02, 0.02)))
    moved = replay_reference(other, truth.with_payload(TRUE)).q
    assert np.abs(moved - reference[0]).max() > 1e-6


def test_the_cartesian_law_feeds_forward_the_configured_load_in_every_engine(model):
    cart = ReplayInput.from_frames(cartesian_frames_50hz(model, 20), controller="cartesian_impedance",
                                   time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20, configured_load=CONFIGURED)
    truth, matrix = _distinct_loads()
    runs = []
    for compiled in (True, False):
        with PopulationEngine([cart], nthread=1, compiled_loop=compiled) as engine:
            runs.append(engine.run(matrix)[0].q)
    np.testing.assert_allclose(runs[0], runs[1], rtol=0, atol=1e-9)  # the compiled Cartesian law: round-off
    assert np.array_equal(runs[1][0], replay_reference(cart, truth.with_payload(TRUE)).q)


def test_simfr3_feeds_forward_the_configured_load_on_every_path():
    truth = load_params(DEMO_PROFILE_PATH).with_payload(TRUE)
    arms = [SimFR3(truth, configured_load=CONFIGURED) for _ in range(3)]
    measured = SimFR3(truth, configured_load=CONFIGURED, measured_coriolis=True)
    cfg = JointImpedanceConfig(filter_alpha=1.0)
    t = np.arange(300)[:, None] * 1e-3
    targets = arms[0].q + 0.2 * np.sin(2 * np.pi * 1.5 * t + np.linspace(0, 3, 7))
    zeros, meas, tau, ema = np.zeros(21), np.zeros(21), np.zeros(7), np.zeros(7)
    for k, target in enumerate(targets):
        command = JointImpedanceCommand(target, cfg) if k % 25 == 0 else None  # between: arm_step
        for arm in arms[:2] + [measured]:
            arm.tick(arm.q, arm.dq, command)
            arm.physics_step()
        arms[2].step_recorded(zeros, meas, tau, ema, command)
    assert np.array_equal(arms[0].q, arms[1].q) and np.array_equal(arms[0].q, arms[2].q)
    np.testing.assert_allclose(measured.q, arms[0].q, rtol=0, atol=1e-12)  # no noise: the same state
    q, dq = arms[0].q, arms[0].dq
    assert np.abs(dq).max() > 0.1
    bias_configured, _ = _bias_with(CONFIGURED, q, dq)
    bias_true, _ = _bias_with(TRUE, q, dq)
    np.testing.assert_allclose(arms[0].coriolis(q, dq), bias_configured, rtol=0, atol=1e-9)
    assert np.abs(bias_configured - bias_true).max() > 1e-3
    arms[0].stage()
    np.testing.assert_allclose(arms[0].plant.coriolis(), bias_configured, rtol=0, atol=1e-9)


def test_a_replay_context_with_loads_needs_the_joints_and_the_flange():
    from twinlake.sim.kernels.replay_context import FEEDFORWARD, ReplayContext

    base = dict(sample_of_tick=np.zeros(2, dtype=np.int64), tau_prev=np.zeros((1, 7)), ring=np.zeros((3, 1, 7)),
                delays=np.zeros((1, 7), dtype=np.int64), neg_breakaway=np.zeros((1, 7)), qpos_adr=np.arange(7, dtype=np.int64),
                dof_adr=np.arange(7, dtype=np.int64), springs=np.zeros((2, 7)), table=np.zeros((2, 30)),
                outputs=tuple(np.zeros((2, 1, 7)) for _ in range(3)), inertia_rows=np.zeros((1, 14)))
    with pytest.raises(ValueError, match="jnt_ids and site_id"):
        ReplayContext(**base)
    context = ReplayContext(**base, jnt_ids=np.arange(7, dtype=np.int64), site_id=0)
    assert context.feedforward.shape == (1, 7) and context.address_table[FEEDFORWARD] == context.feedforward.ctypes.data
