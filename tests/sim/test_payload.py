"""The true payload and the configured load: the loads' gravity torque (numpy, compiled,
MuJoCo's own gravity agree), recordings with a payload replayed in every engine, and the
massless payload body leaving the default dynamics bit for bit unchanged."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from sim_recording import cartesian_frames_50hz, joint_input, record_synthetic

from twinlake.sim import (DEMO_PROFILE_PATH, FR3_MODEL_PATH, DynamicsParams, PopulationEngine, ReplayInput, load_params, replay_reference)
from twinlake.sim.kernels.tick import GRAVITY_M_S2, add_load_torque
from twinlake.sim.arm_model.load import (GRAVITY_M_S2 as LOAD_GRAVITY, EndLoad, load_from_metadata, load_gravity_torque, load_row,
                               parse_load)
from twinlake.sim.arm_model.model import arm_index
from twinlake.sim.kernels.replay_context import USERDATA_SLOTS

TRUE = EndLoad(0.8, (0.01, -0.02, 0.05), (1e-3, 2e-3, 1e-3))


def _posed(model, seed: int):
    data = mujoco.MjData(model)
    data.qpos[arm_index(model).qpos_adr] = np.random.default_rng(seed).uniform(-1.2, 1.2, 7)
    mujoco.mj_kinematics(model, data)
    return data


def _mujoco_gravity(q, load: EndLoad) -> np.ndarray:
    """MuJoCo's gravity force on `load` alone (every other mass zero) at q: −qfrc_bias at rest."""
    from twinlake.sim import load_model

    m = load_model()
    arm = arm_index(m)
    m.opt.gravity[:] = (0.0, 0.0, -LOAD_GRAVITY)
    m.body_mass[:], m.body_inertia[:] = 0.0, 0.0
    m.body_mass[arm.payload_body], m.body_ipos[arm.payload_body] = load.mass_kg, load.com_m
    d = mujoco.MjData(m)
    mujoco.mj_setConst(m, d)
    d.qpos[:] = q
    mujoco.mj_forward(m, d)
    return -d.qfrc_bias[arm.dof_adr]


def test_load_torque_is_the_true_weight_minus_the_configured_compensation(model):
    arm = arm_index(model)
    configured = EndLoad(0.3, (0.0, 0.01, 0.02))
    assert GRAVITY_M_S2 == LOAD_GRAVITY
    for seed in range(3):
        d = _posed(model, seed)
        rows = load_row(np.array([TRUE.mass_kg]), np.array([TRUE.com_m]), configured)
        readable = load_gravity_torque(rows, d.site_xpos[arm.ee_site][None], d.site_xmat[arm.ee_site][None],
                                       d.xanchor[arm.jnt_ids][None], d.xaxis[arm.jnt_ids][None])
        compiled = np.zeros((1, 7))
        add_load_torque(rows, d.site_xpos[None], d.site_xmat[None], d.xanchor[None], d.xaxis[None], arm.ee_site,
                        arm.jnt_ids.astype(np.int64), compiled)
        np.testing.assert_allclose(compiled, readable, rtol=0, atol=1e-13)
        physics = _mujoco_gravity(d.qpos, TRUE) - _mujoco_gravity(d.qpos, configured)
        np.testing.assert_allclose(readable[0], physics, rtol=0, atol=1e-12)
        assert np.abs(physics).max() > 0.1  # a real torque, not a vacuous match
        # configured = true: the firmware compensates the payload exactly
        same = load_row(np.array([TRUE.mass_kg]), np.array([TRUE.com_m]), TRUE)
        assert np.all(same == 0.0)


def test_a_payload_recording_replays_to_round_off_only_with_its_payload():
    truth = load_params(DEMO_PROFILE_PATH).with_payload(TRUE)
    frames = record_synthetic(truth, 1200)  # configured load: none
    inp = ReplayInput.from_frames(frames)
    rec_q = np.stack([frames[f"q{j}"] for j in range(1, 8)], 1)[4:]
    bare = truth.with_payload(EndLoad())
    assert np.abs(replay_reference(inp, truth).q - rec_q).max() < 1e-12
    assert np.abs(replay_reference(inp, bare).q - rec_q).max() > 1e-3
    matrix = np.stack([truth.to_vector(), bare.to_vector(), truth.with_payload(EndLoad(0.4)).to_vector()])
    third = replay_reference(inp, DynamicsParams.from_vector(matrix[2])).q
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled) as engine:
            q = engine.run(matrix)[0].q
        assert np.abs(q[0] - rec_q).max() < 1e-12 and np.abs(q[1] - rec_q).max() > 1e-3
        assert np.array_equal(q[2], third)  # bit for bit with the reference engine


def test_a_configured_load_recording_needs_the_same_configured_load_in_the_replay():
    configured = EndLoad(0.5, (0.0, 0.0, 0.04))
    truth = load_params(DEMO_PROFILE_PATH).with_payload(TRUE)
    frames = record_synthetic(truth, 800, configured_load=configured)
    rec_q = np.stack([frames[f"q{j}"] for j in range(1, 8)], 1)[4:]
    inp_none = ReplayInput.from_frames(frames)
    inp_cfg = ReplayInput.from_frames(frames, configured_load=configured)
    matrix = truth.to_vector()[None]
    for compiled in (True, False):
        with PopulationEngine([inp_none, inp_cfg], nthread=1, compiled_loop=compiled) as engine:
            q_none, q_cfg = (r.q[0] for r in engine.run(matrix))
        assert np.array_equal(q_cfg, replay_reference(inp_cfg, truth).q)
        assert np.abs(q_cfg - rec_q).max() < 1e-12
        assert np.abs(q_none - rec_q).max() > 1e-3  # the compensation of 0.5 kg shows


def test_the_massless_payload_body_changes_no_bit():
    spec = mujoco.MjSpec.from_file(str(FR3_MODEL_PATH))  # normalised by hand, without the payload body
    spec.option.gravity = [0.0, 0.0, 0.0]
    spec.nuserdata = USERDATA_SLOTS
    bare = spec.compile()
    from twinlake.sim import load_model

    ours = load_model()
    assert arm_index(bare).payload_body == -1 and arm_index(ours).payload_body >= 0
    inp, params = joint_input(700), load_params(DEMO_PROFILE_PATH)
    assert np.array_equal(replay_reference(inp, params, bare).q, replay_reference(inp, params, ours).q)
    with pytest.raises(ValueError, match="payload"):
        replay_reference(inp, params.with_payload(TRUE), bare)


def test_loads_parse_and_come_from_metadata():
    assert parse_load("0.8") == EndLoad(0.8)
    assert parse_load("1.2, 0, 0.01, 0.05").com_m == (0.0, 0.01, 0.05)
    for bad, match in (("a", "numbers"), ("1,2", "MASS or MASS,X,Y,Z"), ("-1", ">= 0")):
        with pytest.raises(ValueError, match=match):
            parse_load(bad)
    assert load_from_metadata({"args": {"configured_load": {"mass_kg": 0.7, "com_m": [0, 0, 0.1]}}}) == EndLoad(0.7, (0, 0, 0.1))
    franka = {"configured_load": {"load_mass": 0.5, "F_x_Cload": [0, 0, 0.03], "load_inertia": [1e-3, 0, 0, 0, 1e-3, 0, 0, 0, 2e-3]}}
    assert load_from_metadata(franka) == EndLoad(0.5, (0, 0, 0.03), (1e-3, 1e-3, 2e-3))
    assert load_from_metadata({"args": {}}) is None and load_from_metadata(None) is None
    with pytest.raises(ValueError, match="run.json: configured_load: missing field mass_kg"):
        load_from_metadata({"configured_load": {"m": 1}}, "run.json")


def test_the_cartesian_law_carries_the_loads_in_both_loops(model):
    inp = ReplayInput.from_frames(cartesian_frames_50hz(model, 20), controller="cartesian_impedance",
                                  time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20,
                                  configured_load=EndLoad(0.2, (0.0, 0.0, 0.03)))
    truth = load_params(DEMO_PROFILE_PATH)
    matrix = np.stack([truth.with_payload(TRUE).to_vector(), truth.to_vector()])
    runs = []
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=1, compiled_loop=compiled) as engine:
            runs.append(engine.run(matrix)[0].q)
    np.testing.assert_allclose(runs[0], runs[1], rtol=0, atol=1e-9)  # the Cartesian law agrees to round-off
    reference = replay_reference(inp, truth.with_payload(TRUE)).q
    np.testing.assert_allclose(runs[1][0], reference, rtol=0, atol=1e-9)
    assert np.abs(runs[0][0] - runs[0][1]).max() > 1e-4  # the payload shows
