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

from ..inputs.derivatives import high_frequency_share
from ..model.equations import LEVEL_COLUMNS, SegmentEquations

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

    @property
    def normalised_rms(self) -> float:
        """√(mean over joints with a floor of (raw RMSE / floor)²): one figure for all joints."""
        ok = self.floor_nm > 0
        return float(np.sqrt(np.mean((self.rmse_raw_nm[ok] / self.floor_nm[ok]) ** 2))) if ok.any() else float("nan")

    def to_dict(self) -> dict:
        def floats(a):
            return [None if not np.isfinite(x) else float(x) for x in a]
        return {"rmse_raw_nm": floats(self.rmse_raw_nm), "rmse_filtered_nm": floats(self.rmse_filtered_nm),
                "floor_nm": floats(self.floor_nm), "variance_explained": floats(self.variance_explained),
                "variance_explained_all": float(self.variance_explained_all), "rows": int(self.rows),
                "floor_ratio": None if not np.isfinite(self.floor_ratio) else self.floor_ratio}


def level_part(eq: SegmentEquations, beta: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the friction-level columns' torque (T, 7) at β [N·m], each joint's breakaway level
    |mu_static_j| (7,) [N·m], 0 where β has none)."""
    k, g = eq.R.shape[2], eq.L.shape[2]
    part, level = np.zeros(eq.known.shape), np.zeros(7)
    for c in range(g):
        name = names[k + 7 * c].rsplit("_j", 1)[0]
        if name in LEVEL_COLUMNS:
            part += eq.L[:, :, c] * beta[k + 7 * c:k + 7 * c + 7][None, :]
        if name == "mu_static":
            level = np.abs(beta[k + 7 * c:k + 7 * c + 7])
    return part, level


def _bounded(e: np.ndarray, level_torque: np.ndarray, bound: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The residual e (T, 7) where the friction level is a bounded unknown (`where`): the
    prediction without its level columns, minus whatever in [−bound_j, bound_j] fits best."""
    free = e + level_torque
    return np.where(where, np.sign(free) * np.maximum(np.abs(free) - bound[None, :], 0.0), e)


def score(eqs: list[SegmentEquations], beta: np.ndarray, delay: int, cutoff_hz: float,
          rate_hz: float = 1000.0, names: list[str] | None = None) -> TorqueScore:
    """The TorqueScore of β at `delay` over the used rows of `eqs`; with `names` (β's) over
    every recorded (finite) row instead, the rows the rest rule left out and the measured
    route's standstill rows scored with the friction level as the bounded unknown it is there
    (the part of the residual beyond ±mu_static_j)."""
    sums = {k: np.zeros(7) for k in ("raw", "filt", "hf", "dev", "n")}
    mean_parts = []
    for eq in eqs:
        pred = eq.predict(beta)
        y = eq.target(delay)
        y_raw = eq.target(delay, raw=True)
        use = (eq.rows if names is None else eq.recorded) & np.isfinite(y)
        e_raw, e_filt = y_raw - pred, y - pred
        if names is not None:
            level_torque, bound = level_part(eq, beta, names)
            still = eq.standstill if eq.standstill is not None else np.zeros(eq.rows.shape, dtype=bool)
            where = (eq.recorded & ~eq.rows) | still
            e_raw, e_filt = _bounded(e_raw, level_torque, bound, where), _bounded(e_filt, level_torque, bound, where)
        sums["raw"] += np.where(use, e_raw ** 2, 0).sum(0)
        sums["filt"] += np.where(use, e_filt ** 2, 0).sum(0)
        sums["hf"] += np.where(use, (y_raw - y) ** 2, 0).sum(0)
        sums["n"] += use.sum(0)
        mean_parts.append((np.where(use, y, 0).sum(0), use.sum(0)))
    total = sum(p[0] for p in mean_parts)
    mean = total / np.maximum(sums["n"], 1)
    for eq in eqs:
        y = eq.target(delay)
        use = (eq.rows if names is None else eq.recorded) & np.isfinite(y)
        sums["dev"] += np.where(use, (y - mean) ** 2, 0).sum(0)
    n = np.maximum(sums["n"], 1)
    passband = high_frequency_share(cutoff_hz, rate_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        explained = 1.0 - sums["filt"] / sums["dev"]
    return TorqueScore(rmse_raw_nm=np.sqrt(sums["raw"] / n), rmse_filtered_nm=np.sqrt(sums["filt"] / n),
                       floor_nm=np.sqrt(sums["hf"] / n / passband), variance_explained=explained,
                       variance_explained_all=float(1.0 - sums["filt"].sum() / max(sums["dev"].sum(), 1e-300)),
                       rows=int(sums["n"].sum()))


def nominal_line(fitted: TorqueScore, nominal: TorqueScore, causes: list[str]) -> tuple[str, bool | None]:
    """(text, passed): the fitted model against the nominal one on the same rows (every finite
    training row): the root mean of the joints' (raw RMSE / floor)²; worse than nominal fails
    and says the likely `causes`."""
    fit_r, nom_r = fitted.normalised_rms, nominal.normalised_rms
    if not (np.isfinite(fit_r) and np.isfinite(nom_r)):
        return ("training, every finite row: no noise floor measurable to set the fit against the nominal model", None)
    worse = [f"J{j + 1}" for j in range(7) if fitted.rmse_raw_nm[j] > nominal.rmse_raw_nm[j] * 1.0001]
    if fit_r <= nom_r:
        return (f"training, every finite row ({fitted.rows} joint rows): the fit {fit_r:.2f}× the noise floor, the "
                f"nominal model {nom_r:.2f}× (better than nominal" + (f"; worse on {', '.join(worse)}" if worse else "")
                + ")", True)
    why = "; ".join(causes) if causes else "no cause found among the route's checks"
    return (f"training, every finite row ({fitted.rows} joint rows): the fit explains them WORSE than the nominal model "
            f"({fit_r:.2f}× vs {nom_r:.2f}× the noise floor; worse on {', '.join(worse) or 'no single joint'}): {why}",
            False)


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


__all__ = ["MAX_FLOOR_RATIO", "TorqueScore", "adequacy_line", "level_part", "nominal_line",
           "score"]
