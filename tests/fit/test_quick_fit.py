"""The quick first-order fit (a per-joint velocity model by least squares): recovery, refusals,
window rules, gap report."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.fit.trust.gap_report import GapReport
from twinlake.fit.trust.quick import (
    FirstOrderModel,
    JointSamples,
    QuickFitRefused,
    fit_first_order,
    output_error_rms,
    select_windows,
)

TRUE = FirstOrderModel(inertia_kgm2=0.35, viscous_nms_per_rad=2.5, coulomb_nm=0.6)


def _open_loop(seed: int, seconds: float = 20.0, dt: float = 1e-3, noise: float = 0.0) -> JointSamples:
    """An Euler-stepped first-order joint driven open-loop by a random multisine torque."""
    rng = np.random.default_rng(seed)
    n = int(seconds / dt)
    t = np.arange(n) * dt
    freqs = rng.uniform(0.2, 3.0, 5)
    phases = rng.uniform(0, 2 * np.pi, 5)
    u = 3.0 * np.sin(2 * np.pi * freqs[:, None] * t[None, :] + phases[:, None]).sum(0) / 5 * 2
    v = np.zeros(n)
    for k in range(n - 1):
        acc = (u[k] - TRUE.viscous_nms_per_rad * v[k] - TRUE.coulomb_nm * np.sign(v[k])) / TRUE.inertia_kgm2
        v[k + 1] = v[k] + dt * acc
    return JointSamples(t, u, v + noise * rng.standard_normal(n))


def _closed_loop_steady(seed: int, seconds: float = 10.0, dt: float = 1e-3) -> JointSamples:
    """A velocity loop (feedforward + P) holding a steady setpoint: torque copies velocity."""
    rng = np.random.default_rng(seed)
    n = int(seconds / dt)
    t = np.arange(n) * dt
    v = np.full(n, 0.5)
    u = np.zeros(n)
    for k in range(n - 1):
        u[k] = 2.5 * 0.5 + 0.6 + 40.0 * (0.5 - v[k])
        acc = (u[k] - TRUE.viscous_nms_per_rad * v[k] - TRUE.coulomb_nm * np.sign(v[k])) / TRUE.inertia_kgm2
        v[k + 1] = v[k] + dt * acc + 1e-5 * rng.standard_normal()
    u[-1] = u[-2]
    return JointSamples(t, u, v)


def test_recovers_a_known_open_loop_plant_exactly_without_noise():
    fit = fit_first_order(_open_loop(1))
    assert fit.trustworthy and fit.warnings == ()
    assert fit.model.inertia_kgm2 == pytest.approx(TRUE.inertia_kgm2, rel=1e-6)
    assert fit.model.viscous_nms_per_rad == pytest.approx(TRUE.viscous_nms_per_rad, rel=1e-6)
    assert fit.model.coulomb_nm == pytest.approx(TRUE.coulomb_nm, rel=1e-5)
    assert fit.condition_number < 100
    assert fit.num_windows >= 1500
    assert fit.num_windows + fit.windows.skipped_rest == 2000


def test_recovers_with_noise_within_standard_errors():
    fit = fit_first_order(_open_loop(2, noise=0.002))
    for attr in ("inertia_kgm2", "viscous_nms_per_rad", "coulomb_nm"):
        value, err, truth = getattr(fit.model, attr), getattr(fit.stderr, attr), getattr(TRUE, attr)
        assert err > 0
        assert abs(value - truth) < 4 * err + 0.03 * truth, attr
    assert fit.model.time_constant_s == pytest.approx(TRUE.time_constant_s, rel=0.05)


def test_refuses_closed_loop_data_that_cannot_separate_parameters():
    data = _closed_loop_steady(3)
    with pytest.raises(QuickFitRefused, match="collinear"):
        fit_first_order(data)  # with friction: the direction column is constant too
    with pytest.raises(QuickFitRefused, match="condition number .* > 100"):
        fit_first_order(data, with_friction=False)
    loose = fit_first_order(data, with_friction=False, strict=False)
    assert not loose.trustworthy
    assert loose.condition_number > 100
    assert any("standard error" in w for w in loose.warnings)
    assert abs(loose.model.inertia_kgm2 - TRUE.inertia_kgm2) > 0.5  # the numbers are indeed meaningless


def test_refuses_a_sign_mix_up_and_too_few_windows():
    s = _open_loop(4)
    flipped = JointSamples(s.t_s, -s.torque_nm, s.velocity_rad_s)
    with pytest.raises(QuickFitRefused, match="torque term"):
        fit_first_order(flipped)
    short = JointSamples(s.t_s[:150], s.torque_nm[:150], s.velocity_rad_s[:150])
    with pytest.raises(QuickFitRefused, match=r"only \d+ usable windows"):
        fit_first_order(short)


def test_window_rules_skip_gaps_splits_and_rest():
    t = np.arange(2000) * 1e-3
    v = 2.0 + np.sin(2 * np.pi * 0.5 * t)
    t[1005:] += 0.5  # the log paused 0.5 s inside window 100
    v[:300] = 0.0  # the first 30 windows at rest
    seg = np.zeros(len(t), np.int64)
    seg[1503:] = 1  # a clean-interval split inside window 150
    win = select_windows(JointSamples(t, np.ones(2000), v, segment=seg))
    assert win.skipped_gap == 2
    assert win.skipped_rest == 30
    assert 100 not in set(win.start // 10) and 150 not in set(win.start // 10)
    assert len(win.start) == 200 - 32


def test_delay_frames_shift_the_torque():
    s = _open_loop(6, seconds=10.0)
    delayed_u = np.concatenate([np.zeros(3), s.torque_nm[:-3]])
    n = len(s.t_s)
    v = np.zeros(n)
    for k in range(n - 1):
        acc = (delayed_u[k] - TRUE.viscous_nms_per_rad * v[k] - TRUE.coulomb_nm * np.sign(v[k])) / TRUE.inertia_kgm2
        v[k + 1] = v[k] + 1e-3 * acc
    right = fit_first_order(JointSamples(s.t_s, s.torque_nm, v, delay_frames=3))
    assert right.model.inertia_kgm2 == pytest.approx(TRUE.inertia_kgm2, rel=1e-6)
    wrong = fit_first_order(JointSamples(s.t_s, s.torque_nm, v), strict=False)
    assert wrong.residual_rms_rad_s > 100 * right.residual_rms_rad_s


def test_output_error_and_gap_report_compare_fit_with_the_profile():
    s = _open_loop(7, noise=0.001)
    fit = fit_first_order(s)
    sim = FirstOrderModel(inertia_kgm2=0.2, viscous_nms_per_rad=1.0, coulomb_nm=1.2)
    fit_err = output_error_rms(fit.model, s, fit.windows)
    sim_err = output_error_rms(sim, s, fit.windows)
    assert fit_err < sim_err
    report = GapReport("robot=r1 run=x", 3, fit, sim, "nominal", fit_err, sim_err).markdown()
    assert "joint J3" in report and "trustworthy (no warnings)" in report
    assert f"{fit.model.inertia_kgm2:.4g}" in report and "| 0.2 |" in report
    assert "never changes the profile" in report
    rel = 100 * (0.2 - fit.model.inertia_kgm2) / fit.model.inertia_kgm2
    assert f"{rel:+.1f} %" in report
