"""Velocities, accelerations and filtered torques from a recording: zero-phase low-pass
filtering, the cutoff from the data's spectrum, gap handling and edge trimming.

Rules (docs/fitting.md, "The torque route"):

- **Samples**: one recorded row per 1 ms tick, by `seq`. A row that repeats the previous one
  exactly (q, dq and torque all equal: a stale row a logger wrote twice) is treated as missing.
- **Gaps**: a run of at most `max_fill_ticks` missing ticks is filled by linear interpolation
  *for filtering only*; the filled ticks and `guard_ticks` either side are left out of the fit.
  A longer gap splits the recording into segments, each filtered on its own.
- **Filter**: Butterworth low-pass of order 4 applied forwards and backwards (`sosfiltfilt`,
  zero phase, effective order 8) to q, dq and the torque alike, at `cutoff_hz`.
- **Cutoff from the spectrum** (default): per joint, the Welch power spectrum of dq; its noise
  floor is the median power above 40 % of Nyquist; the cutoff is 1.5 × the highest frequency
  whose (smoothed) power is 100 × that floor or more, the largest over joints, clamped to
  [5 Hz, 0.3·fs].
- **Derivatives**: ddq[k] = (dqf[k+1] − dqf[k]) / dt, the forward difference, i.e. the mean
  acceleration over the 1 ms step that follows row k (MuJoCo's semi-implicit Euler integrates
  exactly this); `dq_next` = dqf[k+1] (the velocity an implicit damper acts on).
- **Friction columns** are nonlinear in q̇: they are formed from the recorded q̇ and then
  low-passed with the same filter as the torque ("parallel filtering": filter(τ) = filter(A)·β
  holds exactly where τ = A·β holds tick by tick), not formed from the filtered q̇.
- **Trimming**: `trim_s` (default 3 / cutoff) at both ends of every segment (filter edges).

Shapes: T samples × 7 joints; units rad, rad/s, rad/s², N·m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal

FILTER_ORDER = 4
MIN_CUTOFF_HZ = 5.0
MAX_CUTOFF_FRACTION = 0.3  # of the sample rate
NOISE_BAND_FRACTION = 0.4  # of Nyquist: above it the spectrum is taken as the noise floor
SIGNAL_OVER_NOISE = 100.0
CUTOFF_MARGIN = 1.5


@dataclass(frozen=True)
class FilterSpec:
    """How a recording was filtered: cutoff [Hz], whether it came from the spectrum, the
    trim at each segment end [s], gap rules [ticks]."""

    cutoff_hz: float
    from_spectrum: bool
    trim_s: float
    max_fill_ticks: int
    guard_ticks: int

    def to_dict(self) -> dict:
        return {"cutoff_hz": self.cutoff_hz, "from_spectrum": self.from_spectrum, "trim_s": self.trim_s,
                "max_fill_ticks": self.max_fill_ticks, "guard_ticks": self.guard_ticks,
                "filter": f"Butterworth order {FILTER_ORDER}, forward-backward (zero phase)"}


@dataclass
class Segment:
    """One gap-free stretch of a recording after filtering; every array is (T, 7) except
    `seq` (T,) and `usable` (T,) bool (False: filled, next to a fill, or trimmed)."""

    seq: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    dq_next: np.ndarray
    tau: np.ndarray  # filtered
    tau_raw: np.ndarray  # as recorded (filled ticks interpolated)
    usable: np.ndarray
    dq_raw: np.ndarray  # as recorded (filled ticks interpolated)
    cutoff_hz: float


@dataclass
class GapReport:
    """What the gap handling did: ticks filled, rows left out, segments, stale rows."""

    filled_ticks: int = 0
    stale_rows: int = 0
    segments: int = 0
    dropped_short: int = 0

    def to_dict(self) -> dict:
        return dict(vars(self))


def stale_rows(q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """(T,) bool: the row repeats the previous one exactly (q, dq and torque)."""
    same = np.zeros(len(q), dtype=bool)
    if len(q) > 1:
        same[1:] = (np.all(q[1:] == q[:-1], axis=1) & np.all(dq[1:] == dq[:-1], axis=1)
                    & np.all(tau[1:] == tau[:-1], axis=1))
    return same


def cutoff_from_spectrum(dq: np.ndarray, rate_hz: float = 1000.0) -> float:
    """The low-pass cutoff [Hz] the velocity spectrum suggests (module docstring); dq (T, 7)."""
    n = min(len(dq), 2048)
    if n < 256:
        return float(np.clip(20.0, MIN_CUTOFF_HZ, MAX_CUTOFF_FRACTION * rate_hz))
    freqs, power = signal.welch(dq, fs=rate_hz, nperseg=n, axis=0)
    best = MIN_CUTOFF_HZ
    noise_band = freqs >= NOISE_BAND_FRACTION * rate_hz / 2
    kernel = np.ones(5) / 5
    for j in range(dq.shape[1]):
        floor = np.median(power[noise_band, j])
        smooth = np.convolve(power[:, j], kernel, mode="same")
        above = np.nonzero(smooth >= SIGNAL_OVER_NOISE * max(floor, 1e-30))[0]
        if len(above):
            best = max(best, CUTOFF_MARGIN * float(freqs[above[-1]]))
    return float(np.clip(best, MIN_CUTOFF_HZ, MAX_CUTOFF_FRACTION * rate_hz))


def lowpass(x: np.ndarray, cutoff_hz: float, rate_hz: float = 1000.0) -> np.ndarray:
    """Zero-phase Butterworth low-pass of x (T, ...) along axis 0."""
    sos = signal.butter(FILTER_ORDER, cutoff_hz, btype="low", fs=rate_hz, output="sos")
    padlen = min(3 * (2 * len(sos) + 1), len(x) - 1)
    return signal.sosfiltfilt(sos, x, axis=0, padlen=padlen)


def _fill(seq: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """rows (n, w) at seq (n,) on the whole tick grid seq[0]..seq[-1], linearly interpolated."""
    grid = np.arange(seq[0], seq[-1] + 1)
    return np.column_stack([np.interp(grid, seq, rows[:, c]) for c in range(rows.shape[1])])


def segments(seq: np.ndarray, q: np.ndarray, dq: np.ndarray, tau: np.ndarray, *, cutoff_hz: float,
             trim_s: float, max_fill_ticks: int = 5, guard_ticks: int = 1,
             rate_hz: float = 1000.0) -> tuple[list[Segment], GapReport]:
    """Filtered segments of one recording (module docstring). seq (N,) int; q, dq, tau (N, 7)
    as read (non-finite rows are treated as missing)."""
    report = GapReport()
    seq = np.asarray(seq, dtype=np.int64)
    keep = np.all(np.isfinite(np.hstack([q, dq, tau])), axis=1)
    stale = stale_rows(q, dq, tau) & keep
    report.stale_rows = int(stale.sum())
    keep &= ~stale
    seq, q, dq, tau = seq[keep], q[keep], dq[keep], tau[keep]
    out: list[Segment] = []
    if len(seq) == 0:
        return out, report
    jumps = np.diff(seq)
    cuts = np.nonzero(jumps > max_fill_ticks + 1)[0]
    bounds = np.split(np.arange(len(seq)), cuts + 1)
    trim = int(round(trim_s * rate_hz))
    for idx in bounds:
        s = seq[idx]
        if len(s) < 2 * trim + 3 * 2 * FILTER_ORDER + 2:
            report.dropped_short += 1
            continue
        grid = np.arange(s[0], s[-1] + 1)
        filled = np.ones(len(grid), dtype=bool)
        filled[s - s[0]] = False
        report.filled_ticks += int(filled.sum())
        raw = _fill(s, np.hstack([q[idx], dq[idx], tau[idx]]))
        smooth = lowpass(raw, cutoff_hz, rate_hz)
        usable = ~filled
        if filled.any():  # the filled ticks and a guard either side
            near = np.convolve(filled.astype(float), np.ones(2 * guard_ticks + 1), mode="same") > 0
            usable &= ~near
        usable[:trim] = False
        usable[len(grid) - trim - 1:] = False  # the last row has no forward difference
        q_s, dqf, tau_s = np.split(smooth, 3, axis=1)  # the stacked [q, dq, tau] columns, 7 each
        _, dq_raw, tau_raw = np.split(raw, 3, axis=1)
        ddq = np.empty_like(dqf)
        ddq[:-1] = (dqf[1:] - dqf[:-1]) * rate_hz
        ddq[-1] = ddq[-2]
        dq_next = np.vstack([dqf[1:], dqf[-1:]])
        out.append(Segment(seq=grid, q=q_s, dq=dqf, ddq=ddq, dq_next=dq_next, tau=tau_s,
                           tau_raw=tau_raw, usable=usable, dq_raw=dq_raw, cutoff_hz=cutoff_hz))
    report.segments = len(out)
    return out, report


def high_frequency_share(cutoff_hz: float, rate_hz: float = 1000.0) -> float:
    """The share of white noise's variance above the route's low-pass at cutoff_hz [Hz] (what
    the recorded minus the filtered signal keeps of it): 1 − 2·f_c/f_s, at least 1e-6; dividing
    that residual's variance by it gives the noise's own."""
    return max(1e-6, 1.0 - 2.0 * cutoff_hz / rate_hz)


__all__ = ["high_frequency_share", "FilterSpec", "GapReport", "Segment", "cutoff_from_spectrum", "lowpass", "segments", "stale_rows"]
