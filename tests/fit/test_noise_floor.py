"""The noise-floor estimator (fit/core/noise_floor.py) against injected noise of known σ: a smooth
synthetic signal plus Gaussian noise, the simulated arm recorded tick by tick, and the offline
recorder's CSV v2 recordings ingested into a lake (the product path, with other gains too)."""

from __future__ import annotations

import numpy as np
import pytest
from floor_recording import ingest_recordings, measured, offline_run, record_arm
from synth import TRUTH, multisine_targets

from twinlake.fit.core.noise_floor import difference_sigma, estimate_noise_floor

SIGMA_Q = np.array([1e-6, 5e-6, 2e-5, 5e-5, 1e-4, 3e-5, 8e-6])  # per joint [rad]


def smooth_motion(n: int, dt_s: float, seed: int) -> np.ndarray:
    """(n, 7) a robot-like smooth motion: three tones per joint in 0.2-3 Hz, ±0.3 rad."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None] * dt_s
    freqs, phases = rng.uniform(0.2, 3.0, (3, 7)), rng.uniform(0, 2 * np.pi, (3, 7))
    return 0.1 * sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases))


def test_smooth_signal_plus_gaussian_noise_gives_sigma_within_10_percent():
    rng = np.random.default_rng(3)
    clean = smooth_motion(6000, 1e-3, seed=1)
    q = clean + rng.standard_normal(clean.shape) * SIGMA_Q
    floor = estimate_noise_floor([q[:2500], q[2500:]])  # two clean intervals
    assert floor.measurable and not floor.upper_bound, floor
    np.testing.assert_allclose(floor.q_rad, SIGMA_Q, rtol=0.10)
    assert floor.q_total_rad == pytest.approx(np.sqrt(np.mean(SIGMA_Q ** 2)), rel=0.10)
    assert floor.samples == (2500 - 3) + (3500 - 3)  # third differences within each interval
    # the naive estimate (std of the signal's first difference) is swamped by the motion
    naive = np.std(np.diff(q, axis=0), axis=0) / np.sqrt(2)
    assert np.all(naive[:3] > 5 * SIGMA_Q[:3])


def test_steps_in_the_motion_do_not_inflate_the_estimate():
    """Stick-slip: the velocity jumps at random instants (a kink in q), the MAD ignores them."""
    rng = np.random.default_rng(4)
    n = 5000
    velocity = np.cumsum(rng.standard_normal((n, 7)) * (rng.random((n, 7)) < 0.01), axis=0) * 0.05
    q = np.cumsum(velocity, axis=0) * 1e-3 + rng.standard_normal((n, 7)) * SIGMA_Q
    floor = estimate_noise_floor([q])
    np.testing.assert_allclose(floor.q_rad, SIGMA_Q, rtol=0.15)


def test_coarse_sampling_is_signal_limited_and_noise_free_is_not_measurable():
    fifty_hz = smooth_motion(3000, 0.02, seed=2) + np.random.default_rng(5).standard_normal((3000, 7)) * 1e-6
    floor = estimate_noise_floor([fifty_hz])
    assert floor.measurable and floor.upper_bound and len(floor.signal_limited) >= 5
    assert np.all(floor.q_rad[np.array(floor.signal_limited) - 1] > 1e-6)  # an upper bound, never below σ
    exact = estimate_noise_floor([np.tile(np.linspace(0, 1, 2000)[:, None], (1, 7))])  # a straight line
    assert not exact.measurable and "no measurable noise" in exact.reason
    short = estimate_noise_floor([smooth_motion(20, 1e-3, seed=0)])
    assert not short.measurable and "samples" in short.reason
    assert difference_sigma([np.zeros((2, 7))])[1] == 0  # shorter than the order: nothing to use


@pytest.mark.parametrize("noise_q, noise_dq", [(2e-5, 5e-4), (1e-4, 2e-3)])
def test_recorded_arm_with_known_noise(noise_q, noise_dq):
    """SimFR3 tick by tick, the measured q/dq carrying N(0, σ²): the floor is σ within 20 %."""
    frame = record_arm(TRUTH, multisine_targets(2500, seed=8), seed=3, noise_q_rad=noise_q, noise_dq_rad_s=noise_dq)
    floor = estimate_noise_floor([measured(frame, "q")], [measured(frame, "dq")])
    assert floor.measurable and not floor.upper_bound
    np.testing.assert_allclose(floor.q_rad, noise_q, rtol=0.2)
    np.testing.assert_allclose(floor.dq_rad_s, noise_dq, rtol=0.2)


def test_offline_recordings_ingested_give_the_injected_sigma(tmp_path):
    """The product path: the daemon's noise source, CSV v2 text, ingest, clean intervals,
    replay inputs; one run with fr3_stack's default gains, one with other K/D."""
    from twinlake.daemon.noise import NoiseConfig
    from twinlake.fit.core.objective import build_data

    noise = NoiseConfig(q_std_rad=3e-5, dq_std_rad_s=6e-4, tau_std_nm=0.05)
    soft = {"k_joint": (300.0, 300, 300, 300, 120, 80, 30), "d_joint": (35.0, 35, 35, 35, 20, 15, 8)}
    made = [("stiff", "holdout", offline_run(tmp_path, "stiff", 1, noise)),
            ("soft", "holdout", offline_run(tmp_path, "soft", 2, noise, **soft))]
    lake = tmp_path / "lake"
    ingest_recordings(lake, made)
    for run, k2 in (("stiff", 600.0), ("soft", 300.0)):
        data = build_data(lake, [f"demo-robot/{run}"])
        assert all(np.all(inp.k_nm_per_rad[:, 1] == k2) for inp in data.inputs)  # the recorded gains
        floor = estimate_noise_floor([i.q_ref for i in data.inputs], [i.dq_ref for i in data.inputs])
        assert floor.measurable and not floor.upper_bound, (run, floor)
        np.testing.assert_allclose(floor.q_rad, noise.q_std_rad, rtol=0.2)
        np.testing.assert_allclose(floor.dq_rad_s, noise.dq_std_rad_s, rtol=0.2)
