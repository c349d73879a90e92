"""The Coulomb asymmetry and the constant torque bias: numpy and compiled forms agree, every
engine agrees bit for bit, and a recording with them replays to round-off only with them."""

from __future__ import annotations

import numpy as np
from sim_recording import distinct_params, joint_input, record_synthetic

from twinlake.sim import DEMO_PROFILE_PATH, LAYOUT, DynamicsParams, PopulationEngine, ReplayInput, load_params, replay_reference
from twinlake.sim.kernels.tick import add_joint_extras
from twinlake.sim.arm_model.plant import joint_extra_torque, joint_extras

BIAS = np.array([0.3, -0.2, 0.1, 0.4, -0.1, 0.05, 0.02])
ASYM = np.array([0.2, 0.1, -0.15, 0.1, 0.05, -0.03, 0.02])


def _with(params: DynamicsParams, bias=BIAS, asym=ASYM) -> DynamicsParams:
    v = params.to_vector()
    v[LAYOUT.slice("tau_bias")], v[LAYOUT.slice("coulomb_asymmetry")] = bias, asym
    return DynamicsParams.from_vector(v)


def test_the_compiled_extras_are_the_numpy_definition():
    rng = np.random.default_rng(2)
    extras = joint_extras(np.stack([BIAS, np.zeros(7)]), np.stack([ASYM, np.zeros(7)]))
    dq = rng.normal(0, 0.05, (2, 7))
    applied = np.ones((2, 7))
    add_joint_extras(dq, extras, applied)
    np.testing.assert_allclose(applied, 1.0 + joint_extra_torque(dq, extras), rtol=0, atol=1e-15)
    assert np.array_equal(applied[1], np.ones(7))  # a zero row adds nothing
    sliding = joint_extra_torque(np.array([[5.0] * 7, [-5.0] * 7]), joint_extras(np.zeros((2, 7)), np.stack([ASYM, ASYM])))
    np.testing.assert_allclose(sliding, -np.stack([ASYM, ASYM]), atol=1e-12)  # level mu + δ forward, mu − δ backward


def test_every_engine_agrees_with_bias_and_asymmetry():
    inp = joint_input(800)
    base = distinct_params(3, seed=5)
    params = np.stack([_with(DynamicsParams.from_vector(p)).to_vector() for p in base])
    params[2] = base[2]  # one candidate without: untouched
    reference = np.stack([replay_reference(inp, DynamicsParams.from_vector(p)).q for p in params])
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled) as engine:
            assert np.array_equal(engine.run(params)[0].q, reference)


def test_a_recording_with_bias_and_asymmetry_replays_only_with_them():
    truth = _with(load_params(DEMO_PROFILE_PATH))
    frames = record_synthetic(truth, 700)
    inp = ReplayInput.from_frames(frames)
    rec_q = np.stack([frames[f"q{j}"] for j in range(1, 8)], 1)[4:]
    assert np.abs(replay_reference(inp, truth).q - rec_q).max() < 1e-12
    assert np.abs(replay_reference(inp, _with(truth, bias=np.zeros(7))).q - rec_q).max() > 1e-4
    assert np.abs(replay_reference(inp, _with(truth, asym=np.zeros(7))).q - rec_q).max() > 1e-5
