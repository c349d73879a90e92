"""The figures of `twinlake fit report` (matplotlib, Agg), each written as a PNG and returned as bytes.

Convergence per CMA-ES generation or LM iteration (the axis says which); the free parameters,
each joint in its own bounds box, with their 95 % intervals and nominal values; the correlation matrix of the free parameters; and per held-out run the
replay drawn over the recording (q per joint), and the residual over time (fitted and nominal
on separate axes) with its spectrum
(Welch PSD) against the white-noise level of the run's noise floor (fit/core/noise_floor.py).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ...sim.arm_model.params import LAYOUT  # noqa: E402

if TYPE_CHECKING:
    from ..core.noise_floor import NoiseFloor
    from .report_data import HeldOutTrace, ParamRow

_PNG_META = {"Software": None}
WELCH_SEGMENT_S = 2.0  # Welch segment length [s] of the residual spectrum (fewer samples: the whole trace)


def _save(fig: plt.Figure, path: Path) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata=_PNG_META)
    plt.close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return data


def plot_convergence(history: list[dict[str, Any]], path: Path) -> bytes:
    """Best, mean and min loss per generation (log scale when all positive)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    it = [h.get("iter") for h in history]
    for key, style in (("best", "-"), ("min", ":"), ("mean", "--")):
        ys = [np.nan if h.get(key) is None else h[key] for h in history]
        ax.plot(it, ys, style, label=key)
    vals = [h.get(k) for h in history for k in ("best", "min", "mean") if h.get(k) is not None]
    if vals and min(vals) > 0:
        ax.set_yscale("log")
    if not history:
        ax.text(0.5, 0.5, "no history recorded (imported fit?)", ha="center", transform=ax.transAxes)
    ax.set_xlabel(convergence_axis(history))
    ax.set_ylabel("loss")
    ax.set_title("Convergence")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return _save(fig, path)


def convergence_axis(history: list[dict[str, Any]]) -> str:
    """What the convergence plot's x axis counts: CMA-ES generations, LM iterations (the local
    search's and the refine stage's rows), or both."""
    stages = {h.get("stage") or "cma" for h in history}
    if stages <= {"cma"}:
        return "generation (CMA-ES)"
    if "cma" not in stages:
        return "LM iteration"
    return "generation (CMA-ES) / LM iteration"


def plotted_groups(params: list[ParamRow]) -> list[str]:
    """The `LAYOUT` groups `plot_parameters` draws: those with a row the fit searched."""
    free = {p.name for p in params if p.free}
    return [g.name for g in LAYOUT.groups if free.intersection(g.names)]


def plot_parameters(params: list[ParamRow], path: Path) -> bytes:
    """`parameter_figure` as a PNG."""
    return _save(parameter_figure(params), path)


def parameter_figure(params: list[ParamRow]) -> plt.Figure:
    """Per group (`LAYOUT`) with a parameter the fit searched (`ParamRow.free`; frozen groups are
    listed in the table only), each joint in its own bounds box: the y axis is the position
    within the box (0 = lower bound, 1 = upper bound), so a joint whose range is small is as
    readable as one whose range is large. Drawn: the value with its 95 % interval (estimated
    parameters), the nominal value, the range over seeds (when known); the value is written
    above each point in its own units."""
    by_name = {p.name: p for p in params}
    groups = [g for g in LAYOUT.groups if g.name in plotted_groups(params)] or list(LAYOUT.groups[:1])
    widths = [g.size if g.per_joint else 1.4 for g in groups]
    fig, axes = plt.subplots(1, len(widths), figsize=(max(4.0, 15 * sum(widths) / 36), 3.6),
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, g in zip(axes[0], groups):
        labels = [f"J{j}" for j in range(1, g.size + 1)] if g.per_joint else [g.display]
        _param_axis(ax, [by_name.get(n) for n in g.names], labels, f"{g.display} [{g.unit}]")
    axes[0][0].set_ylabel("position in its bounds (0 lower, 1 upper)", fontsize=8)
    fig.tight_layout()
    return fig


def _unit_box(p: ParamRow, v: float) -> float:
    """`v` as a position within p's bounds box (0 at the lower bound, 1 at the upper)."""
    span = p.upper_bound - p.lower_bound
    return 0.5 if not span > 0 else (v - p.lower_bound) / span


def _param_axis(ax: plt.Axes, rows: list[ParamRow | None], labels: list[str], title: str) -> None:
    from ..core.parameter_status import format_number

    x = np.arange(len(rows))
    for i, p in enumerate(rows):
        if p is None:
            continue
        first = i == 0
        ax.plot([i, i], [0.0, 1.0], color="0.8", lw=6, solid_capstyle="butt", label="bounds" if first else None)
        ax.plot(i + 0.2, _unit_box(p, p.nominal), "x", color="tab:orange", label="nominal" if first else None)
        if p.seed_min is not None and p.seed_max is not None:
            ax.plot([i - 0.2] * 2, [_unit_box(p, p.seed_min), _unit_box(p, p.seed_max)], color="tab:green", lw=2,
                    label="seed range" if first else None)
        color = "tab:blue" if p.status in ("", "estimated") else "tab:red"
        y = _unit_box(p, p.value)
        if p.ci_low is not None and p.ci_high is not None:
            lo, hi = _unit_box(p, p.ci_low), _unit_box(p, p.ci_high)
            ax.errorbar(i, y, yerr=[[max(y - lo, 0.0)], [max(hi - y, 0.0)]], fmt="o", color=color, capsize=3,
                        label="fit ± 95 %" if first else None)
        else:
            ax.plot(i, y, "o", color=color, label="fit" if first else None)
        ax.annotate(format_number(p.value, 3), (i, min(max(y, 0.0), 1.0)), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=6)
    ax.set_xticks(x, labels)
    ax.set_ylim(-0.08, 1.12)
    ax.set_title(title, fontsize=9)
    if len(rows) > 1:
        ax.legend(fontsize=6, loc="lower right")


def plot_correlation(covariance: dict, path: Path) -> bytes:
    """The correlation matrix (k, k) of the free parameters as a heat map (−1 blue … +1 red),
    the pairs with |ρ| ≥ 0.9 outlined."""
    from ..core.covariance import STRONG_RHO, correlation

    names = covariance["names"]
    m = np.array([[np.nan if v is None else v for v in row] for row in covariance["matrix"]], dtype=np.float64)
    rho = correlation(m)
    size = max(4.0, 0.22 * len(names) + 2.0)
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    im = ax.imshow(rho, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for i, j in zip(*np.nonzero(np.abs(np.nan_to_num(rho)) >= STRONG_RHO)):
        if i != j:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.2, ec="k"))
    fig.colorbar(im, ax=ax, fraction=0.046, label="correlation ρ")
    ax.set_title(f"Correlation of the free parameters ({covariance.get('method')})", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_joints(trace: HeldOutTrace, path: Path) -> bytes:
    """The held-out replay drawn over the recording, q per joint (recording black, fitted blue,
    nominal dashed orange when validated)."""
    fig, axes = plt.subplots(7, 1, figsize=(9, 11), sharex=True)
    for j, ax in enumerate(axes):
        ax.plot(trace.t_s, trace.q_real_rad[:, j], color="k", lw=1.6, label="recording")
        ax.plot(trace.t_s, trace.q_fitted_rad[:, j], color="tab:blue", lw=1, label="replay, fitted")
        if trace.q_nominal_rad is not None:
            ax.plot(trace.t_s, trace.q_nominal_rad[:, j], color="tab:orange", lw=1, ls="--", label="replay, nominal")
        ax.set_ylabel(f"q{j + 1} [rad]", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper right", ncol=3)
    axes[0].set_title(f"Held-out run {trace.label}: replay over the recording")
    axes[-1].set_xlabel("t [s]")
    fig.tight_layout()
    return _save(fig, path)


@dataclass(frozen=True)
class ResidualSpectrum:
    """One-sided Welch PSD of the fitted replay's q residual per joint, and the floor it is drawn
    against: the white-noise PSD 2σ²/fs of the noise floor σ per joint (NaN: not measurable)."""

    f_hz: np.ndarray  # (F,)
    psd_rad2_hz: np.ndarray  # (F, 7)
    floor_psd_rad2_hz: np.ndarray  # (7,)
    rate_hz: float
    floor_text: str  # what the floor line is, in words


def residual_spectrum(trace: HeldOutTrace) -> ResidualSpectrum:
    """The residual `q_fitted − q_real` of `trace` and its spectrum against the trace's noise floor
    (`trace.noise_floor`, the validation's stored estimate; else estimated here from the recorded q
    by the same estimator)."""
    from scipy.signal import welch

    from ..core.noise_floor import estimate_noise_floor

    dt = np.diff(trace.t_s)
    rate_hz = float(1.0 / np.median(dt)) if len(dt) and np.median(dt) > 0 else 1.0
    residual = np.nan_to_num(trace.q_fitted_rad - trace.q_real_rad)
    nperseg = int(min(len(residual), max(16, round(WELCH_SEGMENT_S * rate_hz))))
    f_hz, psd = welch(residual, fs=rate_hz, nperseg=nperseg, axis=0, detrend="constant")
    floor = trace.noise_floor
    source = "stored with the validation" if floor is not None else "estimated from this recording"
    floor = floor if floor is not None else estimate_noise_floor([trace.q_real_rad])
    sigma = np.asarray(floor.q_rad, dtype=np.float64)
    return ResidualSpectrum(f_hz, psd, 2.0 * sigma ** 2 / rate_hz, rate_hz, _floor_text(floor, source))


def _floor_text(floor: NoiseFloor, source: str) -> str:
    if floor.reason:
        return f"noise floor not measurable ({floor.reason}): no floor line"
    text = (f"noise floor (dotted, per joint): the white-noise PSD 2σ²/fs of the recording's q noise σ "
            f"({source}; {floor.method})")
    if floor.signal_limited:
        text += f"; an upper bound on J{'/J'.join(str(j) for j in floor.signal_limited)}"
    return text


def plot_residual(trace: HeldOutTrace, path: Path) -> bytes:
    """The residual q_sim − q_real over time (fitted solid, nominal dashed) and the fitted
    residual's spectrum against the noise floor (`residual_spectrum`)."""
    spec = residual_spectrum(trace)
    nominal = trace.q_nominal_rad is not None
    fig, axes = plt.subplots(3 if nominal else 2, 1, figsize=(9, 10 if nominal else 7.5))
    ax_t, ax_f = axes[0], axes[-1]
    for j in range(7):  # the fitted and the nominal residual on separate axes: the fit's is often 100x smaller
        line, = ax_t.plot(trace.t_s, 1e3 * (trace.q_fitted_rad[:, j] - trace.q_real_rad[:, j]), lw=1,
                          label=f"J{j + 1}")
        if nominal:
            axes[1].plot(trace.t_s, 1e3 * (trace.q_nominal_rad[:, j] - trace.q_real_rad[:, j]), lw=0.8,
                         color=line.get_color())
        keep = spec.f_hz > 0
        ax_f.loglog(spec.f_hz[keep], spec.psd_rad2_hz[keep, j], lw=1, color=line.get_color(), label=f"J{j + 1}")
        if np.isfinite(spec.floor_psd_rad2_hz[j]) and spec.floor_psd_rad2_hz[j] > 0:
            ax_f.axhline(spec.floor_psd_rad2_hz[j], lw=1, ls=":", color=line.get_color())
    ax_t.set_xlabel("t [s]")
    ax_t.set_ylabel("q_fitted − q_real [mrad]")
    ax_t.set_title(f"Residual of the fitted replay, {trace.label}")
    if nominal:
        axes[1].set_xlabel("t [s]")
        axes[1].set_ylabel("q_nominal − q_real [mrad]")
        axes[1].set_title("Residual of the nominal replay (its own scale)", fontsize=10)
    ax_t.legend(fontsize=7, ncol=7, loc="upper right")
    ax_f.set_xlabel("f [Hz]")
    ax_f.set_ylabel("PSD of q_fitted − q_real [rad²/Hz]")
    ax_f.set_title(f"Residual spectrum (Welch, {spec.rate_hz:.4g} Hz sampling)", fontsize=10)
    if np.any(np.isfinite(spec.floor_psd_rad2_hz) & (spec.floor_psd_rad2_hz > 0)):
        ax_f.plot([], [], ls=":", color="k", label="noise floor")
    ax_f.legend(fontsize=7, ncol=8, loc="upper left")
    fig.text(0.01, 0.005, spec.floor_text, fontsize=7, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return _save(fig, path)
