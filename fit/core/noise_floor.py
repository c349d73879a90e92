"""The measurement noise floor of a recording, estimated from the recording itself.

A replay that explains a run leaves a residual `q_sim − q_real` at the level of the
measurement noise of q: that σ per joint is the floor. Users have no truth to replay, so the
floor is estimated from the high-frequency part of the recorded signal:

- the k-th difference `Δᵏq` (k = `ORDER`, 3) along time, within each clean interval (never
  across a boundary), removes the motion: a smooth signal's k-th difference scales with
  `(ω·dt)ᵏ`, about 1e-5 of its amplitude at 2.5 Hz and 1 kHz, while white noise of variance σ²
  becomes a stationary series of variance `C(2k, k)·σ²` (20 σ² for k = 3);
- σ is then `1.4826 · MAD(Δᵏq) / √C(2k, k)`: the median absolute deviation, so sparse steps
  of the true motion (Coulomb stick-slip, a contact) do not inflate it.
- The same estimate with k + 1 is the check: on white noise both agree; when the motion still
  leaks into the k-th difference (coarse sampling, e.g. 50 Hz logs, or a very fast motion) the
  k-th estimate is larger. A joint whose two estimates differ by more than `LEAK_RATIO` is
  `signal_limited`: its σ is only an upper bound of the noise.

Hold intervals (the robot standing still) need nothing special: on them the estimator sees
the noise alone. Assumptions, stated plainly: the noise is white (a measurement filtered by the
robot looks smoother: the estimate is then below the true noise of the filtered signal); q
quantised finer than the noise is fine; a noise-free recording (a simulation written without
noise) gives σ at round-off (under `RESOLUTION`·max(1, |q|)), which is reported as not measurable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

ORDER = 3  # difference order of the estimate
LEAK_RATIO = 1.25  # σ(k) / σ(k+1) above this: the motion leaks into the k-th difference
MIN_DIFFERENCES = 50  # fewer k-th differences than this per joint: not measurable
MAD_TO_SIGMA = 1.4826  # σ of a Gaussian per unit of median absolute deviation
RESOLUTION = 1e-10  # σ under this times max(1, |q|) [rad] is round-off, not noise


def difference_sigma(segments: Sequence[np.ndarray], order: int = ORDER) -> tuple[np.ndarray, int]:
    """Robust σ of white noise on each column of the (S_i, C) `segments` from their
    `order`-th differences (taken within each segment). Returns (σ (C,), difference count)."""
    parts = [np.diff(np.asarray(s, dtype=np.float64), n=order, axis=0) for s in segments if len(s) > order]
    if not parts:
        width = np.shape(segments[0])[1] if len(segments) else 7
        return np.full(width, np.nan), 0
    d = np.concatenate(parts, axis=0)
    d = d[np.all(np.isfinite(d), axis=1)]
    if len(d) == 0:
        return np.full(d.shape[1], np.nan), 0
    mad = np.median(np.abs(d - np.median(d, axis=0)), axis=0)
    return MAD_TO_SIGMA * mad / math.sqrt(math.comb(2 * order, order)), int(len(d))


@dataclass(frozen=True)
class NoiseFloor:
    """Estimated measurement noise of one recording (or a set of intervals of it).

    `q_rad` (7,) per-joint σ of q [rad]; `dq_rad_s` (7,) of dq [rad/s] or None; `samples`
    the k-th differences used per joint; `signal_limited` the joints (1-based) whose estimate
    is only an upper bound (then a ratio to the floor is a lower bound); `reason` why the floor
    is not measurable at all ('' when it is).
    """

    q_rad: np.ndarray
    dq_rad_s: np.ndarray | None
    samples: int
    signal_limited: tuple[int, ...] = ()
    reason: str = ""
    method: str = field(default=f"MAD of {ORDER}rd differences within each interval")

    @property
    def q_total_rad(self) -> float:
        """RMS over joints of the per-joint σ (the floor of `q_rmse_all_rad`) [rad]."""
        return float(np.sqrt(np.mean(np.square(self.q_rad))))

    @property
    def upper_bound(self) -> bool:
        """True when the motion leaks into the estimate on some joint (σ only an upper bound)."""
        return bool(self.signal_limited)

    @property
    def measurable(self) -> bool:
        """A floor the residual can be compared with (every joint's σ finite and > 0)."""
        return not self.reason

    def to_dict(self) -> dict[str, Any]:
        return {"q_rad": _floats(self.q_rad), "q_total_rad": _float(self.q_total_rad),
                "dq_rad_s": None if self.dq_rad_s is None else _floats(self.dq_rad_s),
                "samples": self.samples, "signal_limited": list(self.signal_limited),
                "reason": self.reason, "method": self.method}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NoiseFloor":
        nan = lambda v: np.array([np.nan if x is None else x for x in v], dtype=np.float64)  # noqa: E731
        return cls(nan(d["q_rad"]), None if d.get("dq_rad_s") is None else nan(d["dq_rad_s"]), int(d["samples"]),
                   tuple(d.get("signal_limited") or ()), d.get("reason") or "", d.get("method") or "")


def estimate_noise_floor(q_segments: Sequence[np.ndarray], dq_segments: Sequence[np.ndarray] | None = None,
                         order: int = ORDER) -> NoiseFloor:
    """The noise floor of recorded q (and dq) given as one (S_i, 7) array per clean interval."""
    sigma_q, count = difference_sigma(q_segments, order)
    check, _ = difference_sigma(q_segments, order + 1)
    dq_segments = [d for d in dq_segments or () if d is not None]
    sigma_dq = difference_sigma(dq_segments, order)[0] if dq_segments else None
    with np.errstate(divide="ignore", invalid="ignore"):
        leak = sigma_q / check
    limited = tuple(int(j) + 1 for j in np.flatnonzero(np.isfinite(leak) & (leak > LEAK_RATIO)))
    reason = ""
    if count < MIN_DIFFERENCES:
        reason = f"{count} samples: at least {MIN_DIFFERENCES + order} per joint are needed"
    elif not np.all(sigma_q > RESOLUTION * _magnitude(q_segments)):
        zero = [f"J{j + 1}" for j in np.flatnonzero(~(sigma_q > RESOLUTION * _magnitude(q_segments)))]
        reason = (f"no measurable noise on {'/'.join(zero)} (σ at round-off: a noise-free or coarsely quantised "
                  "recording)")
    return NoiseFloor(sigma_q, sigma_dq, count, limited, reason)


def _magnitude(segments: Sequence[np.ndarray]) -> np.ndarray:
    """(C,) max(1, max |x|) per column over the finite samples of `segments`."""
    peak = np.ones(np.shape(segments[0])[1])
    for s in segments:
        a = np.abs(np.asarray(s, dtype=np.float64))
        if a.size:
            peak = np.maximum(peak, np.nanmax(np.where(np.isfinite(a), a, np.nan), axis=0, initial=0.0))
    return peak


def _float(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _floats(a: np.ndarray) -> list[float | None]:
    return [_float(float(v)) for v in np.asarray(a)]
