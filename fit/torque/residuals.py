"""How well a torque fit predicts torques: RMSE per joint (filtered and as recorded), the share
of torque variance explained, the torque noise floor and the adequacy line.

- **Noise floor** per joint [N·m]: the recorded torque minus its zero-phase low-pass (the fit's
  filter) is the part of the signal above the cutoff; for white noise that is the fraction
  1 − 2·f_c/f_s of its variance, so σ_floor = std(raw − filtered) / √(1 − 2 f_c / f_s). It
  contains whatever the signal has above the cutoff (noise, and unmodelled fast effects): a
  floor, not a certainty.
- **RMSE raw**: recorded torque (unfiltered) minus the prediction from the filtered states;
  a perfect model leaves the noise floor. **RMSE filtered**: filtered torque minus prediction.
- **Variance explained**: 1 − Σ(filtered − predicted)² / Σ(filtered − mean)², per joint and
  over all joints.
- **Adequacy**: the worst joint's raw RMSE over its floor; at most `MAX_FLOOR_RATIO` (3, as
  the replay fit's `fit validate --max-floor-ratio` default) passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .equations import SegmentEquations

MAX_FLOOR_RATIO = 3.0


@dataclass
class TorqueScore:
    """Per joint (7,) RMSE raw and filtered [N·m], noise floor [N·m], variance explained,
    over all joints the variance explained, the rows scored and the worst floor ratio."""

    rmse_raw_nm: np.ndarray
    rmse_filtered_nm: np.ndarray
    floor_nm: np.ndarray
    variance_explained: np.ndarray
    variance_explained_all: float
    rows: int

    @property
    def floor_ratio(self) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = self.rmse_raw_nm / self.floor_nm
        finite = ratios[np.isfinite(ratios)]
        return float(finite.max()) if len(finite) else float("nan")

    def to_dict(self) -> dict:
        def floats(a):
            return [None if not np.isfinite(x) else float(x) for x in a]
        return {"rmse_raw_nm": floats(self.rmse_raw_nm), "rmse_filtered_nm": floats(self.rmse_filtered_nm),
                "floor_nm": floats(self.floor_nm), "variance_explained": floats(self.variance_explained),
                "variance_explained_all": float(self.variance_explained_all), "rows": int(self.rows),
                "floor_ratio": None if not np.isfinite(self.floor_ratio) else self.floor_ratio}


def score(eqs: list[SegmentEquations], beta: np.ndarray, delay: int, cutoff_hz: float,
          rate_hz: float = 1000.0) -> TorqueScore:
    """The TorqueScore of β at `delay` over the used rows of `eqs`."""
    sums = {k: np.zeros(7) for k in ("raw", "filt", "hf", "dev", "n")}
    mean_parts = []
    for eq in eqs:
        pred = eq.predict(beta)
        y = eq.target(delay)
        y_raw = eq.target(delay, raw=True)
        use = eq.rows & np.isfinite(y)
        sums["raw"] += np.where(use, (y_raw - pred) ** 2, 0).sum(0)
        sums["filt"] += np.where(use, (y - pred) ** 2, 0).sum(0)
        sums["hf"] += np.where(use, (y_raw - y) ** 2, 0).sum(0)
        sums["n"] += use.sum(0)
        mean_parts.append((np.where(use, y, 0).sum(0), use.sum(0)))
    total = sum(p[0] for p in mean_parts)
    mean = total / np.maximum(sums["n"], 1)
    for eq in eqs:
        y = eq.target(delay)
        use = eq.rows & np.isfinite(y)
        sums["dev"] += np.where(use, (y - mean) ** 2, 0).sum(0)
    n = np.maximum(sums["n"], 1)
    passband = high_frequency_share(cutoff_hz, rate_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        explained = 1.0 - sums["filt"] / sums["dev"]
    return TorqueScore(rmse_raw_nm=np.sqrt(sums["raw"] / n), rmse_filtered_nm=np.sqrt(sums["filt"] / n),
                       floor_nm=np.sqrt(sums["hf"] / n / passband), variance_explained=explained,
                       variance_explained_all=float(1.0 - sums["filt"].sum() / max(sums["dev"].sum(), 1e-300)),
                       rows=int(sums["n"].sum()))


def high_frequency_share(cutoff_hz: float, rate_hz: float = 1000.0) -> float:
    """The share of white noise's variance above the route's low-pass at cutoff_hz [Hz] (what
    the recorded minus the filtered signal keeps of it): 1 − 2·f_c/f_s, at least 1e-6; dividing
    that residual's variance by it gives the noise's own."""
    return max(1e-6, 1.0 - 2.0 * cutoff_hz / rate_hz)


def adequacy_line(role: str, s: TorqueScore, max_ratio: float = MAX_FLOOR_RATIO) -> tuple[str, bool | None]:
    """(text, passed) of a score: the worst joint's raw RMSE against its torque noise floor."""
    ratio = s.floor_ratio
    if not np.isfinite(ratio):
        return (f"{role} torque residual: no noise floor measurable", None)
    with np.errstate(divide="ignore", invalid="ignore"):  # a joint with no floor (0/0) is not the worst
        j = int(np.nanargmax(np.where(s.floor_nm > 0, s.rmse_raw_nm / s.floor_nm, np.nan)))
    ok = ratio <= max_ratio
    return (f"{role} torque residual {s.rmse_raw_nm[j]:.3g} N·m (J{j + 1}, worst) = {ratio:.2f}× its noise floor "
            f"{s.floor_nm[j]:.3g} N·m ({'within' if ok else 'above'} {max_ratio:g}×); variance explained "
            f"{100 * s.variance_explained_all:.2f} %", ok)


__all__ = ["MAX_FLOOR_RATIO", "TorqueScore", "adequacy_line", "high_frequency_share", "score"]
