"""Candidate excitations of one joint, vectorised: N sets of K components evaluated on one time
grid, each scaled to the tightest of the preflight bounds.

A component is a tone or a linear chirp: amplitude weight w_k ≥ 0, start frequency f_k [Hz],
end frequency e_k [Hz] (= f_k for a tone), phase φ_k [rad]; the sweep is
β_k = (e_k − f_k) / seconds [Hz/s]. The sum is shaped by the excitation's seventh-order
smoothstep envelope (daemon/excitation.py), exactly as `twinlake excite` streams it:
offset(s) = w(s)·Σ a_k sin(2π (f_k s + β_k s²/2) + φ_k). The offset and its first three
derivatives are linear in the amplitudes, so one evaluation gives each bound's peak and the
largest common scale that keeps every peak inside its bound (`scale_to_bounds`). A chirp
sweeps a band in one component where tones sample it at points; component 0 of a random
candidate is a chirp with probability `chirp_fraction`, and the search keeps it only where
the criterion says it serves better.

Arrays: weights, freqs_hz, phases_rad, ends_hz (N, K); signals (4, N, T) [rad, rad/s, rad/s², rad/s³].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..daemon.excitation import enveloped, envelope

BOUND_MARGIN = 0.97  # the grid's peaks may miss the 1 kHz preflight's by a little


@dataclass(frozen=True)
class DesignBounds:
    """One joint's bounds: |offset| [rad] (the tracking guard and the joint range), |q̇|
    [rad/s], |q̈| [rad/s²], |jerk| [rad/s³] (fr3_stack's preflight)."""

    position_rad: float
    velocity_rad_s: float
    acceleration_rad_s2: float
    jerk_rad_s3: float

    def as_array(self) -> np.ndarray:
        return np.array([self.position_rad, self.velocity_rad_s, self.acceleration_rad_s2, self.jerk_rad_s3])


def segment_grid(seconds: float, grid_hz: float) -> np.ndarray:
    """Sample times (T,) [s] of the excitation segment 0..seconds."""
    return np.linspace(0.0, seconds, int(np.ceil(seconds * grid_hz)) + 1)


def multisine(weights: np.ndarray, freqs_hz: np.ndarray, phases_rad: np.ndarray, s: np.ndarray,
              seconds: float, ramp_s: float, ends_hz: np.ndarray | None = None) -> np.ndarray:
    """The enveloped offsets and derivatives (4, N, T) of N candidates on the segment times s
    [s]; `ends_hz` None: every component a tone."""
    sweep = 0.0 if ends_hz is None else ((ends_hz - freqs_hz) / seconds)[:, :, None]  # β (N, K, 1) [Hz/s]
    t = s[None, None, :]
    phase = 2 * np.pi * (freqs_hz[:, :, None] * t + 0.5 * sweep * t ** 2) + phases_rad[:, :, None]
    omega = 2 * np.pi * (freqs_hz[:, :, None] + sweep * t)  # instantaneous [rad/s]
    beta = 2 * np.pi * sweep
    a = weights[:, :, None]
    sin, cos = np.sin(phase), np.cos(phase)
    y0 = (a * sin).sum(axis=1)
    y1 = (a * omega * cos).sum(axis=1)
    y2 = (a * (beta * cos - omega ** 2 * sin)).sum(axis=1)
    y3 = (a * (-3 * omega * beta * sin - omega ** 3 * cos)).sum(axis=1)
    return enveloped([x[None, :] for x in envelope(s, seconds, ramp_s)], (y0, y1, y2, y3))


def scale_to_bounds(signals: np.ndarray, bounds: DesignBounds, margin: float = BOUND_MARGIN) -> np.ndarray:
    """(N,) the scale of each candidate's amplitudes that puts its tightest peak at
    margin × its bound (0 for a candidate that does not move)."""
    peaks = np.abs(signals).max(axis=2)  # (4, N)
    with np.errstate(divide="ignore"):
        ratio = np.where(peaks > 0, bounds.as_array()[:, None] / peaks, np.inf)
    scale = margin * ratio.min(axis=0)
    return np.where(np.isfinite(scale), scale, 0.0)


def random_tones(rng: np.random.Generator, n: int, max_tones: int, f_lo_hz: float, f_hi_hz: float,
                 chirp_fraction: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """N random candidates (weights, freqs, phases, ends) of up to `max_tones` components:
    frequencies log-uniform in [f_lo, f_hi] Hz, Dirichlet weights (unused ones weigh 0),
    uniform phases; component 0 a chirp (its end frequency drawn alike) with probability
    `chirp_fraction`, every other a tone."""
    log_lo, log_hi = np.log(f_lo_hz), np.log(f_hi_hz)
    freqs = np.exp(rng.uniform(log_lo, log_hi, (n, max_tones)))
    ends = freqs.copy()
    chirp = rng.uniform(0, 1, n) < chirp_fraction
    ends[:, 0] = np.where(chirp, np.exp(rng.uniform(log_lo, log_hi, n)), freqs[:, 0])
    weights = rng.dirichlet(np.ones(max_tones), n)
    used = rng.integers(1, max_tones + 1, n)
    weights = np.where(np.arange(max_tones)[None, :] < used[:, None], weights, 0.0)
    phases = rng.uniform(0, 2 * np.pi, (n, max_tones))
    return weights / weights.sum(axis=1, keepdims=True), freqs, phases, ends


def perturb(rng: np.random.Generator, n: int, weights: np.ndarray, freqs_hz: np.ndarray, phases_rad: np.ndarray,
            ends_hz: np.ndarray, step: float, f_lo_hz: float, f_hi_hz: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """N neighbours of one candidate (K,): each changes one coordinate (a weight, a start
    frequency by a log-step — a tone's end moves with it —, a phase, or a chirp's end
    frequency) by `step` of its range; the first is the candidate itself."""
    k = len(weights)
    w, f, p, e = (np.tile(x, (n, 1)) for x in (weights, freqs_hz, phases_rad, ends_hz))
    which = rng.integers(0, 4, n)
    tone = rng.integers(0, k, n)
    rows = np.arange(n)
    delta = rng.normal(0.0, step, n)
    is_tone = f[rows, tone] == e[rows, tone]
    w[rows, tone] = np.where(which == 0, np.maximum(w[rows, tone] * np.exp(2 * delta), 0.0), w[rows, tone])
    w[rows, tone] = np.where((which == 0) & (w[rows, tone] == 0), step * rng.uniform(0, 1, n), w[rows, tone])
    moved = np.clip(f[rows, tone] * np.exp(delta), f_lo_hz, f_hi_hz)
    e[rows, tone] = np.where((which == 1) & is_tone, moved, e[rows, tone])
    f[rows, tone] = np.where(which == 1, moved, f[rows, tone])
    e[rows, tone] = np.where((which == 3) & ~is_tone, np.clip(e[rows, tone] * np.exp(delta), f_lo_hz, f_hi_hz),
                             e[rows, tone])
    p[rows, tone] = np.where(which == 2, p[rows, tone] + 2 * np.pi * delta, p[rows, tone])
    w[0], f[0], p[0], e[0] = weights, freqs_hz, phases_rad, ends_hz
    total = w.sum(axis=1, keepdims=True)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), 1.0 / k), f, p, e


__all__ = ["BOUND_MARGIN", "DesignBounds", "multisine", "perturb", "random_tones", "scale_to_bounds",
           "segment_grid"]
