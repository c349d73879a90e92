"""Seeded measurement noise in the replay's control loop (sim/replay/controller_noise.py)."""

import numpy as np
import pytest

from sim_recording import distinct_params, joint_input
from twinlake.sim import ControllerNoise, PopulationEngine
from twinlake.sim.replay.controller_noise import noise_block

SIGMA_Q, SIGMA_DQ = np.full(7, 2e-5), np.full(7, 5e-4)


def noise(seeds):
    return ControllerNoise(SIGMA_Q, SIGMA_DQ, np.array(seeds))


def test_compiled_loop_with_noise_equals_the_per_tick_loop_and_seed_minus_one_is_noise_free(model):
    inp = joint_input(900)
    inp.use_friction = np.arange(900) % 600 < 300  # friction compensation on and off
    params = distinct_params(4)
    seeds = [7, 7, 8, -1]
    fast = PopulationEngine([inp], model=model, nthread=2).run(params, noise=noise(seeds))[0]
    slow = PopulationEngine([inp], model=model, nthread=2, compiled_loop=False).run(params, noise=noise(seeds))[0]
    for name in ("q", "dq", "tau_cmd"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    clean = PopulationEngine([inp], model=model, nthread=1).run(params)[0]
    np.testing.assert_array_equal(fast.q[3], clean.q[3])  # seed < 0: the noise-free replay
    moved = np.abs(fast.tau_cmd[:3] - clean.tau_cmd[:3]).max(axis=(1, 2))
    assert (moved > 1e-4).all()  # the law acted on the noise (D·σ_dq ≈ 1e-2 N·m)


def test_each_rows_noise_depends_on_its_seed_only_not_on_shards_or_order(model):
    inp = joint_input(400)
    inp.q_ref, inp.dq_ref = inp.q_target + 0.01, np.full((400, 7), 0.05)
    params = np.repeat(distinct_params(1), 5, axis=0)
    seeds = np.array([3, 4, 5, 6, 3])
    one = PopulationEngine([inp], model=model, nthread=1).mean_square_errors(params, 1e-3, 1e-2, noise=noise(seeds))
    three = PopulationEngine([inp], model=model, nthread=3).mean_square_errors(
        params[::-1], 1e-3, 1e-2, noise=noise(seeds[::-1]))
    np.testing.assert_array_equal(one, three[::-1])
    assert one[0, 0, 0] == one[4, 0, 0] and len(np.unique(one[:4, 0, 0])) == 4
    block = noise(seeds).block(1, 400)
    np.testing.assert_array_equal(block[0], noise_block(3, 1, 400, SIGMA_Q, SIGMA_DQ))
    assert abs(block[:, :, 7:].std() / 5e-4 - 1) < 0.05


def test_bad_noise_is_refused_with_what_was_expected(model):
    with pytest.raises(ValueError, match="q_std_rad: expected 7"):
        ControllerNoise(np.ones(6), SIGMA_DQ, np.array([1]))
    with pytest.raises(ValueError, match="2 seeds for 3 candidates"):
        PopulationEngine([joint_input(50)], model=model, nthread=1).run(distinct_params(3), noise=noise([1, 2]))
