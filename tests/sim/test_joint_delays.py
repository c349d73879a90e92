"""Per-joint motor delays (`motor_delay_offset_ms`): the effective delay of each joint, the
delay line and kernel per joint, and every engine (reference, population compiled and per-tick,
SimFR3) agreeing bit for bit with them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_recording import distinct_params, joint_input, record_synthetic
from twinlake.sim import LAYOUT, MAX_DELAY_MS, DynamicsParams, PopulationEngine, ReplayInput, replay_reference
from twinlake.sim.kernels.tick import apply_delayed_torque
from twinlake.sim.arm_model.params import joint_delay_ticks
from twinlake.sim.arm_model.plant import DelayLine

OFFSETS = np.array([0, 0, 1, 0, -1, 0, 0])


def _with_offsets(matrix: np.ndarray, offsets) -> np.ndarray:
    out = np.array(matrix, dtype=np.float64)
    LAYOUT.take(out, "motor_delay_offset_ms")[:] = offsets
    return out


def test_joint_delay_is_the_shared_delay_plus_the_offset_clipped_to_the_ring():
    m = np.tile(DynamicsParams.nominal().to_vector(), (3, 1))
    LAYOUT.take(m, "motor_delay_ms")[:] = [1, 4, 2]
    m = _with_offsets(m, [[-2, -1, 0, 1, 2, 0.6, -0.4], [2, 1, 0, -1, -2, -3, 7], [0, 0, 1, 0, -1, 0, 0]])
    got = joint_delay_ticks(m)
    assert got.dtype == np.int64 and got.shape == (3, 7)
    # offsets rounded, clamped to their bounds (±2), the sum clamped to 0..MAX_DELAY_MS
    assert got.tolist() == [[0, 0, 1, 2, 3, 2, 1], [4, 4, 4, 3, 2, 2, 4], [2, 2, 3, 2, 1, 2, 2]]
    p = DynamicsParams.from_vector(m[2])
    assert p.joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2] and p.motor_delay_offset_ms.tolist() == OFFSETS.tolist()
    assert DynamicsParams.nominal().joint_delay_ms.tolist() == [0] * 7 and MAX_DELAY_MS == 4


def test_delay_line_and_kernel_delay_each_joint_by_its_own_ticks():
    rng = np.random.default_rng(2)
    count, ticks = 4, 30
    delays = rng.integers(0, MAX_DELAY_MS + 1, size=(count, 7))
    history = rng.normal(size=(MAX_DELAY_MS, 7))
    line, kernel_line = DelayLine(delays, np.zeros(7), history), DelayLine(delays, np.zeros(7), history)
    assert line.delays.shape == (count, 7) and np.array_equal(line.delays, delays)
    sent = [history[i] for i in range(MAX_DELAY_MS)]  # ticks −4..−1
    applied = np.empty((count, 7))
    for k in range(ticks):
        tau = rng.normal(size=(count, 7))
        sent.append(tau)
        got = line.push(tau)
        kernel_line.push_apply(tau, np.zeros((count, 7)), np.zeros((count, 7)), applied)
        for p in range(count):
            for j in range(7):
                source = sent[MAX_DELAY_MS + k - delays[p, j]]
                want = source[j] if source.ndim == 1 else source[p, j]
                assert got[p, j] == want and applied[p, j] == want
    # one delay per candidate is every joint's delay
    assert np.array_equal(DelayLine(np.array([0, 3]), np.zeros(7)).delays, [[0] * 7, [3] * 7])


def test_kernel_with_uniform_per_joint_delays_equals_one_delay_per_candidate():
    """Offsets 0 replay exactly as before: the (P, 7) delays of one shared delay."""
    rng = np.random.default_rng(4)
    ring_a, ring_b = np.zeros((MAX_DELAY_MS + 1, 3, 7)), np.zeros((MAX_DELAY_MS + 1, 3, 7))
    shared = np.array([0, 2, 4])
    a, b = np.empty((3, 7)), np.empty((3, 7))
    for k in range(12):
        tau, dq = rng.normal(size=(3, 7)), rng.normal(scale=0.05, size=(3, 7))
        coef = -rng.uniform(0, 0.5, (3, 7))
        apply_delayed_torque(ring_a, k, np.repeat(shared[:, None], 7, axis=1), tau, dq, coef, a)
        apply_delayed_torque(ring_b, k, DelayLine(shared, np.zeros(7)).delays, tau, dq, coef, b)
        assert np.array_equal(a, b)


def test_engines_agree_bit_for_bit_with_per_joint_delays(model):
    inp = joint_input(1200)
    inp.tau_history = np.linspace(-1.0, 1.0, 4 * 7).reshape(4, 7)  # commands before tick 0
    base = distinct_params(3)  # shared delays 0, 2, 4
    params = _with_offsets(base, [OFFSETS, [2, -2, 1, -1, 0, 2, -2], [-1, -2, 0, 0, -1, -2, 0]])
    assert [row.tolist() for row in joint_delay_ticks(params)] == [
        [0, 0, 1, 0, 0, 0, 0], [4, 0, 3, 1, 2, 4, 0], [3, 2, 4, 4, 3, 2, 4]]
    compiled = PopulationEngine([inp], model=model, nthread=2).run(params)[0]
    per_tick = PopulationEngine([inp], model=model, nthread=1, compiled_loop=False).run(params)[0]
    shared_only = PopulationEngine([inp], model=model, nthread=1).run(base)[0]
    for i in range(3):
        ref = replay_reference(inp, DynamicsParams.from_vector(params[i]), model)
        for got in (compiled, per_tick):
            assert np.array_equal(got.q[i], ref.q) and np.array_equal(got.dq[i], ref.dq)
            assert np.array_equal(got.tau_cmd[i], ref.tau_cmd)
        # the offsets really change the motion (the agreement above is not vacuous)
        assert np.abs(ref.q - shared_only.q[i]).max() > 1e-5
    errors = PopulationEngine([inp], model=model, nthread=2).mean_square_errors
    inp.q_ref, inp.dq_ref = compiled.q[0], compiled.dq[0]
    assert errors(params[:1], 1e-3, 1e-2)[0, 0].tolist() == [0.0, 0.0]


def test_a_sim_fr3_recording_with_per_joint_delays_replays_exactly(model):
    truth = dataclasses.replace(DynamicsParams.from_vector(distinct_params(2)[1]), motor_delay_offset_ms=OFFSETS)
    assert truth.joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    frame = record_synthetic(truth, 800)
    inp = ReplayInput.from_frames(frame)
    pop = PopulationEngine([inp], model=model, nthread=1).run(truth.to_vector()[None])[0]
    assert np.abs(pop.q[0] - inp.q_ref).max() < 1e-7
    shared = dataclasses.replace(truth, motor_delay_offset_ms=np.zeros(7))
    off = PopulationEngine([inp], model=model, nthread=1).run(shared.to_vector()[None])[0]
    assert np.abs(off.q[0] - inp.q_ref).max() > 1e-5  # the recording holds the per-joint delays


def test_delay_line_refuses_delays_that_are_not_one_per_joint():
    with pytest.raises(ValueError):
        DelayLine(np.zeros((2, 3), dtype=np.int64), np.zeros(7))
