"""The armature's errors-in-variables bias from velocity noise, and its correction.

The armature column is q̈ = the forward difference of the low-passed *measured* dq, so the
recorder's dq noise n (white, σ_j [rad/s] per joint) is in the regressor itself:
q̈_meas = q̈ + ν, ν(k) = f_s·(n_f(k+1) − n_f(k)), n_f the low-passed noise. Least squares then
shrinks the armature towards zero (regression dilution), and the same ν enters the target
through the known part (the nominal links' M(q)·q̈_meas is subtracted from the torque), which
pulls it further down. On a closed loop whose controller damps the measured velocity
(τ_cmd ∋ −D_j·n_j, D_j the run's recorded `D_joint`), the commanded torque carries n too,
correlated with ν at the scanned delay d, which pushes the other way. Per used row of joint j:

    E[ν_j²]              = v_j  = σ_j²·f_s²·Σ_m (h[m+1] − h[m])²        [rad²/s⁴]
    E[ν_j·(M(q)ν)_j]     = M_jj(q)·v_j                                   [N·m·rad/s²]
    E[ν_j(k)·(−D_j n_f,j(k−d))] = D_j·f_s·σ_j²·(R(d) − R(d+1))           [N·m·rad/s²]

(h the filter's impulse response, R(m) = Σ_k h[k]·h[k+m]; noise of different joints is
independent). The correction removes these expectations from the weighted normal equations
(bias-compensated least squares): N_aa −= Σ w_j v_j, b_a += Σ w_j (M_jj v_j − D_j f_s σ_j² ΔR).
σ_j comes from the data as the torque floor does (residuals.py): std(dq_raw − dq_f) / √(1 − 2f_c/f_s).
Measured on the twin's default family (bench/RESULTS.md): every armature −0.03…−0.21 % before,
the sign pattern gone after. Not corrected: the payload's and links' q̈ columns (the same ν is
in them), the viscous column's much smaller share (dq noise against dq's own spread).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..inputs.derivatives import lowpass
from ..model.equations import SegmentEquations
from ..inputs.derivatives import high_frequency_share

RATE_HZ = 1000.0


def filter_autocorrelation(cutoff_hz: float, lags: int, rate_hz: float = RATE_HZ) -> tuple[np.ndarray, float]:
    """(R (lags + 1,), Σ_m (h[m+1] − h[m])²) of the route's zero-phase low-pass at cutoff_hz
    (its impulse response h is dimensionless, Σ h = 1)."""
    impulse = np.zeros(8001)
    impulse[4000] = 1.0
    h = lowpass(impulse, cutoff_hz, rate_hz)
    corr = np.array([float(h[:len(h) - m] @ h[m:]) for m in range(lags + 1)])
    return corr, float(np.sum(np.diff(h) ** 2))


@dataclass
class VelocityNoise:
    """What the correction needs: σ (7,) [rad/s] of the recorded dq's white noise, v (7,)
    [rad²/s⁴] of q̈'s, the damping D (7,) [N·m·s/rad] of the recorded controller (zeros when the
    runs record none) and per joint the feedback covariance f_s·σ²·(R(d) − R(d+1)) (7,) at the
    delay d [rad²/s³]."""

    sigma_rad_s: np.ndarray
    ddq_var: np.ndarray
    damping_nms_rad: np.ndarray
    feedback: np.ndarray

    def to_dict(self) -> dict:
        return {"dq_noise_sd_rad_s": self.sigma_rad_s.tolist(), "ddq_noise_var_rad2_s4": self.ddq_var.tolist(),
                "damping_nms_rad": self.damping_nms_rad.tolist(), "feedback_cov": self.feedback.tolist()}


def velocity_noise(eqs: list[SegmentEquations], damping_nms_rad: np.ndarray | None, delay_ticks: int) -> VelocityNoise:
    """VelocityNoise of the segments (their dq_residual and cutoff); damping: the controller's
    D (7,) [N·m·s/rad] or None (no feedback term); delay_ticks: the scanned delay d."""
    resid = np.vstack([eq.dq_residual for eq in eqs])
    cutoff_hz = eqs[0].cutoff_hz
    if len(resid) < 2:  # nothing usable to measure the noise on: no correction
        return VelocityNoise(np.zeros(7), np.zeros(7), np.zeros(7), np.zeros(7))
    sigma = np.nan_to_num(resid.std(axis=0)) / np.sqrt(high_frequency_share(cutoff_hz, RATE_HZ))
    corr, diff_sq = filter_autocorrelation(cutoff_hz, delay_ticks + 1)
    damping = np.zeros(7) if damping_nms_rad is None else np.nan_to_num(np.asarray(damping_nms_rad, float))
    feedback = RATE_HZ * sigma**2 * (corr[delay_ticks] - corr[delay_ticks + 1])
    return VelocityNoise(sigma, sigma**2 * RATE_HZ**2 * diff_sq, damping, feedback)


def correction(eqs: list[SegmentEquations], rows: list[np.ndarray], weights: np.ndarray, noise: VelocityNoise,
               names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ΔN (p, p), Δb (p,)) to subtract from / add to the weighted normal equations over the
    given rows (per segment (T, 7) bool); zero when β has no armature."""
    p = len(names)
    d_n, d_b = np.zeros((p, p)), np.zeros(p)
    index = {n: i for i, n in enumerate(names)}
    for j in range(7):
        i = index.get(f"armature_j{j + 1}")
        if i is None:
            continue
        count = sum(int(r[:, j].sum()) for r in rows)
        inertia = sum(float(eq.inertia_diag[r[:, j], j].sum()) for eq, r in zip(eqs, rows))
        d_n[i, i] = weights[j] * count * noise.ddq_var[j]
        d_b[i] = weights[j] * (inertia * noise.ddq_var[j] - count * noise.damping_nms_rad[j] * noise.feedback[j])
    return d_n, d_b


__all__ = ["VelocityNoise", "correction", "filter_autocorrelation", "velocity_noise"]
