"""The friction law as a choice: the smooth tanh law's numpy definition and compiled kernel
agree, every engine agrees under it bit for bit, and a recording made under one law replays
to round-off only under that law."""

from __future__ import annotations

import numpy as np
import pytest
from sim_recording import distinct_params, joint_input, record_synthetic

from twinlake.sim import DEMO_PROFILE_PATH, DynamicsParams, PopulationEngine, ReplayInput, SimFR3, load_params, replay_reference
from twinlake.sim.arm_model.plant import DelayLine, TanhFriction, breakaway_level, friction_law_id


def test_the_tanh_kernel_is_the_numpy_definition():
    rng = np.random.default_rng(4)
    mu = rng.uniform(0.2, 2.0, (3, 7))
    friction = TanhFriction(mu)
    line = DelayLine(np.array([0, 1, 3]), np.zeros(7), law=friction.law)
    applied, relief = np.empty((3, 7)), np.empty((3, 7))
    for _ in range(5):
        dq = rng.normal(0, 0.05, (3, 7))
        tau = rng.normal(0, 3, (3, 7))
        numpy_line = DelayLine(line.delays, np.zeros(7))
        numpy_line.ring[:] = line.ring
        numpy_line.tick = line.tick
        expected = friction.sliding_relief(dq, relief) + numpy_line.push(tau)
        line.push_apply(tau, dq, friction.coef, applied)
        np.testing.assert_allclose(applied, expected, rtol=0, atol=1e-14)
    assert np.all(np.abs(friction.sliding_relief(np.full((3, 7), 10.0), relief) + mu) < 1e-12)  # saturates at −mu_c
    assert np.all(breakaway_level("tanh", mu) == 0.0) and np.all(breakaway_level("stribeck", mu) == mu)
    with pytest.raises(ValueError, match="friction law .coulomb.: expected one of stribeck, tanh, sigmoid"):
        friction_law_id("coulomb")


def test_every_engine_agrees_under_the_tanh_law():
    inp = joint_input(900)
    params = distinct_params(4, seed=3)
    reference = np.stack([replay_reference(inp, DynamicsParams.from_vector(p), friction_law="tanh").q for p in params])
    stribeck = replay_reference(inp, DynamicsParams.from_vector(params[0])).q
    assert np.abs(reference[0] - stribeck).max() > 1e-4  # the law matters
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled, friction_law="tanh") as engine:
            assert np.array_equal(engine.run(params)[0].q, reference)
    with pytest.raises(ValueError, match="friction law"):
        PopulationEngine([inp], friction_law="viscous")


def test_a_tanh_recording_replays_to_round_off_only_under_the_tanh_law():
    truth = load_params(DEMO_PROFILE_PATH)
    arm_frames = record_synthetic(truth, 800, friction_law="tanh")
    inp = ReplayInput.from_frames(arm_frames)
    rec_q = np.stack([arm_frames[f"q{j}"] for j in range(1, 8)], 1)[4:]
    assert np.abs(replay_reference(inp, truth, friction_law="tanh").q - rec_q).max() < 1e-12
    assert np.abs(replay_reference(inp, truth).q - rec_q).max() > 1e-4
    assert SimFR3(truth, friction_law="tanh").plant.model.dof_frictionloss.max() == 0.0


def test_the_sigmoid_law_of_gaz_et_al_in_every_engine():
    from twinlake.sim import LAYOUT
    from twinlake.sim.kernels.tick import add_joint_extras
    from twinlake.sim.arm_model.plant import joint_extra_torque, joint_extras

    rng = np.random.default_rng(8)
    mu, phi2, phi3 = rng.uniform(0.3, 1.5, (2, 7)), rng.uniform(20, 200, (2, 7)), rng.uniform(-0.05, 0.05, (2, 7))
    extras = joint_extras(np.zeros((2, 7)), np.zeros((2, 7)), "sigmoid", mu, phi2, phi3)
    dq = rng.normal(0, 0.05, (2, 7))
    applied = np.zeros((2, 7))
    add_joint_extras(dq, extras, applied)
    np.testing.assert_allclose(applied, joint_extra_torque(dq, extras), rtol=0, atol=1e-14)
    np.testing.assert_allclose(joint_extra_torque(np.zeros((2, 7)), extras), 0.0, atol=1e-15)  # no torque at rest
    far = joint_extra_torque(np.full((2, 7), 10.0), joint_extras(np.zeros((2, 7)), np.zeros((2, 7)), "sigmoid", mu,
                                                                 phi2, np.zeros((2, 7))))
    np.testing.assert_allclose(far, -mu, rtol=1e-9)  # φ3 = 0: the Coulomb level is mu_static
    inp = joint_input(700)
    params = distinct_params(3, seed=11)
    params[:, LAYOUT.slice("sigmoid_phi2")] = rng.uniform(20, 200, (3, 7))
    params[:, LAYOUT.slice("sigmoid_phi3")] = rng.uniform(-0.05, 0.05, (3, 7))
    reference = np.stack([replay_reference(inp, DynamicsParams.from_vector(p), friction_law="sigmoid").q
                          for p in params])
    assert np.abs(reference[0] - replay_reference(inp, DynamicsParams.from_vector(params[0]), friction_law="tanh").q).max() > 1e-5
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled, friction_law="sigmoid") as engine:
            assert np.array_equal(engine.run(params)[0].q, reference)
