"""The quick fit: a first-order per-joint velocity model by linear least squares (after simloop's `FirstOrderFit`).

Model of one joint ``j`` (docs/fitting.md, "The quick fit")::

    I · d(dq)/dt = tau_cmd(t − delay) − b · dq − f_c · sign(dq)

``I`` [kg·m²] is the effective inertia the joint sees (link inertia about the axis plus
armature), ``b`` [N·m·s/rad] viscous damping, ``f_c`` [N·m] Coulomb (dynamic) friction,
optional. Gravity is compensated by the firmware and Coriolis is included in ``tau_cmd``,
so neither appears; the other joints' coupling does not either, which is why this is a sanity
check and not the fit.

Integrated over a window of ``WINDOW_FRAMES`` frames (``k0 .. k0+W−1``, Euler rectangles)::

    dq[k0+W−1] − dq[k0] = θ1·Σ tau·dt − θ2·Σ dq·dt − θ3·Σ sign(dq)·dt,   θ = (1/I, b/I, f_c/I)

is linear in θ; one disjoint window is one equation. Windowing averages velocity noise in
the regressors, so it does not drag the time constant short. Standard errors come from the
OLS sandwich covariance with a Bartlett (Newey–West) long-run covariance of the windows'
scores x·e, consecutive usable windows treated as neighbours, bandwidth from their
autocorrelation (fit/core/covariance.py: the residuals of neighbouring windows are correlated by
the closed loop), through the delta method; ``QuickFitResult.covariance_method`` says so and
``stderr_iid`` keeps the independent-window OLS ``s²(XᵀX)⁻¹`` errors for comparison.

Rules (after simloop's `FirstOrderFit`): windows with a time step over ``MAX_GAP_S`` or crossing a segment boundary
are skipped; windows that stay at rest (``|dq|`` under ``REST_FRACTION`` of the 99th
percentile speed) are skipped; fewer than ``MIN_INDEPENDENT_WINDOWS`` usable windows, a
torque gain that is zero, negative or not finite, a velocity that would grow on its own, or
collinear regressors raise :class:`QuickFitRefused`. A condition number above
``MAX_CONDITION_NUMBER`` or a relative standard error above ``MAX_RELATIVE_STANDARD_ERROR``
is a warning; ``strict=True`` (the default) refuses on any warning too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError, FitError, SettingError
from ..core import covariance as covmod

WINDOW_FRAMES = 10
MAX_GAP_S = 0.1
REST_FRACTION = 0.02
MIN_INDEPENDENT_WINDOWS = 20
MAX_CONDITION_NUMBER = 100.0
MAX_RELATIVE_STANDARD_ERROR = 0.10
_SINGULAR_CONDITION = 1e10


class QuickFitRefused(FitError):
    """The quick fit will not return numbers it cannot stand behind; the message says why."""


@dataclass(frozen=True)
class JointSamples:
    """One joint of a recording. All arrays have shape (N,).

    ``segment`` (optional, int) labels clean intervals: a window never spans two labels.
    ``delay_frames`` shifts the torque: the torque of frame k−delay drives frame k.
    """

    t_s: np.ndarray
    torque_nm: np.ndarray
    velocity_rad_s: np.ndarray
    segment: np.ndarray | None = None
    delay_frames: int = 0

    def __post_init__(self) -> None:
        n = len(self.t_s)
        for name in ("torque_nm", "velocity_rad_s"):
            if len(getattr(self, name)) != n:
                raise DataError(f"JointSamples.{name} has {len(getattr(self, name))} rows, expected {n} (as t_s)")
        if self.segment is not None and len(self.segment) != n:
            raise DataError(f"JointSamples.segment has {len(self.segment)} rows, expected {n} (as t_s)")
        if self.delay_frames < 0:
            raise SettingError("delay_ms", str(self.delay_frames), "expected a delay >= 0 (1 kHz frames)")


@dataclass(frozen=True)
class FirstOrderModel:
    """A first-order joint: inertia [kg·m²], viscous damping [N·m·s/rad], Coulomb friction [N·m]."""

    inertia_kgm2: float
    viscous_nms_per_rad: float
    coulomb_nm: float = 0.0

    @property
    def time_constant_s(self) -> float:
        """I / b [s] (inf without damping): the Euler-step time constant at the log's frame time."""
        return self.inertia_kgm2 / self.viscous_nms_per_rad if self.viscous_nms_per_rad > 0 else float("inf")

    @property
    def gain_rad_s_per_nm(self) -> float:
        """1 / b: steady speed per N·m [rad/s/(N·m)] (`FirstOrderFit`'s free speed per unit power)."""
        return 1.0 / self.viscous_nms_per_rad if self.viscous_nms_per_rad > 0 else float("inf")


@dataclass(frozen=True)
class Windows:
    """The usable windows: start and end frame index (inclusive), shape (W,) each."""

    start: np.ndarray
    end: np.ndarray
    skipped_gap: int = 0
    skipped_rest: int = 0
    skipped_nonfinite: int = 0


@dataclass(frozen=True)
class QuickFitResult:
    """The fitted model, a standard error on every parameter, diagnostics and warnings."""

    model: FirstOrderModel
    stderr: FirstOrderModel
    with_friction: bool
    condition_number: float
    r_squared: float
    residual_rms_rad_s: float
    windows: Windows
    window_start_s: float
    window_end_s: float
    warnings: tuple[str, ...] = field(default_factory=tuple)
    covariance_method: str = covmod.HAC
    bandwidth_windows: int = 1  # the Bartlett bandwidth, in windows
    stderr_iid: FirstOrderModel | None = None  # the independent-window OLS errors, for comparison

    @property
    def trustworthy(self) -> bool:
        """True only when there are no warnings."""
        return not self.warnings

    @property
    def num_windows(self) -> int:
        return int(len(self.windows.start))


def select_windows(samples: JointSamples, window_frames: int = WINDOW_FRAMES) -> Windows:
    """Disjoint windows of ``window_frames`` frames that pass the gap, segment, rest and
    finiteness rules (vectorised; no per-window Python)."""
    t = np.asarray(samples.t_s, dtype=np.float64)
    v = np.asarray(samples.velocity_rad_s, dtype=np.float64)
    u = _shifted_torque(samples)
    n_win = len(t) // window_frames
    if n_win == 0:
        return Windows(np.zeros(0, np.int64), np.zeros(0, np.int64))
    idx = np.arange(n_win * window_frames).reshape(n_win, window_frames)
    finite = np.isfinite(t[idx]).all(1) & np.isfinite(v[idx]).all(1) & np.isfinite(u[idx]).all(1)
    dt = np.diff(t[idx], axis=1)
    gap_ok = ((dt > 0) & (dt <= MAX_GAP_S)).all(1)
    if samples.segment is not None:
        seg = np.asarray(samples.segment)[idx]
        gap_ok &= (seg == seg[:, :1]).all(1)
    if samples.delay_frames:
        gap_ok &= idx[:, 0] >= samples.delay_frames
    speed = np.abs(v[np.isfinite(v)])
    rest_level = REST_FRACTION * (np.percentile(speed, 99) if speed.size else 0.0)
    with np.errstate(invalid="ignore"):
        moving = (np.abs(v[idx]) > rest_level).any(1)
    keep = finite & gap_ok & moving
    return Windows(
        start=idx[keep, 0].astype(np.int64),
        end=idx[keep, -1].astype(np.int64),
        skipped_gap=int((finite & ~gap_ok).sum()),
        skipped_rest=int((finite & gap_ok & ~moving).sum()),
        skipped_nonfinite=int((~finite).sum()),
    )


def fit_first_order(
    samples: JointSamples,
    *,
    with_friction: bool = True,
    strict: bool = True,
    window_frames: int = WINDOW_FRAMES,
) -> QuickFitResult:
    """Fit I, b (and f_c) by linear least squares over windows; see the module docstring.

    Raises QuickFitRefused (with the reason) for too few windows, a non-positive torque gain,
    a velocity that would grow on its own, collinear regressors, or, when ``strict``, any
    warning (condition number > 100, relative standard error > 10 %).
    """
    win = select_windows(samples, window_frames)
    if len(win.start) < MIN_INDEPENDENT_WINDOWS:
        raise QuickFitRefused(
            f"only {len(win.start)} usable windows of {window_frames} frames (need >= {MIN_INDEPENDENT_WINDOWS}); "
            f"skipped {win.skipped_rest} at rest, {win.skipped_gap} with a gap or split, "
            f"{win.skipped_nonfinite} non-finite"
        )
    x, y = _design(samples, win, with_friction)
    scale = np.linalg.norm(x, axis=0)
    if np.any(scale == 0):
        raise QuickFitRefused("a regressor is identically zero over the usable windows (no torque, speed or direction change)")
    xs = x / scale
    cond = float(np.linalg.cond(xs))
    if not np.isfinite(cond) or cond > _SINGULAR_CONDITION:
        raise QuickFitRefused(
            f"regressors are collinear (condition number {cond:.3g}): torque is a copy of velocity, as under "
            "closed-loop control at a steady setpoint; record open-loop, saturated or changing-setpoint data"
        )
    theta_s, *_ = np.linalg.lstsq(xs, y, rcond=None)
    theta = theta_s / scale
    resid = y - x @ theta
    est = covmod.estimate(xs, resid, [covmod.Segment(0, len(y), 1)], covmod.HAC)
    iid = covmod.estimate(xs, resid, [covmod.Segment(0, len(y), 1)], covmod.IID)
    model, stderr = _physical(theta, est.cov / np.outer(scale, scale), with_friction)
    _, stderr_iid = _physical(theta, iid.cov / np.outer(scale, scale), with_friction)
    warnings = _warnings(model, stderr, cond, with_friction)
    tss = float(((y - y.mean()) ** 2).sum())
    t = np.asarray(samples.t_s, dtype=np.float64)
    result = QuickFitResult(
        model=model,
        stderr=stderr,
        with_friction=with_friction,
        condition_number=cond,
        r_squared=1.0 - float(resid @ resid) / tss if tss > 0 else float("nan"),
        residual_rms_rad_s=float(np.sqrt(np.mean(resid**2))),
        windows=win,
        window_start_s=float(t[win.start[0]]),
        window_end_s=float(t[win.end[-1]]),
        warnings=tuple(warnings),
        bandwidth_windows=est.bandwidth_ticks,
        stderr_iid=stderr_iid,
    )
    if strict and warnings:
        raise QuickFitRefused("fit is not trustworthy: " + "; ".join(warnings))
    return result


def output_error_rms(model: FirstOrderModel, samples: JointSamples, windows: Windows) -> float:
    """RMS [rad/s] of model velocity against measured velocity over the windows: the model is
    started at each window's measured velocity and Euler-stepped with the recorded torque
    (vectorised across windows; one numpy step per frame of the window)."""
    if len(windows.start) == 0:
        return float("nan")
    t = np.asarray(samples.t_s, dtype=np.float64)
    v = np.asarray(samples.velocity_rad_s, dtype=np.float64)
    u = _shifted_torque(samples)
    length = int((windows.end - windows.start)[0]) + 1
    idx = windows.start[:, None] + np.arange(length)[None, :]
    sim = v[idx[:, 0]].copy()
    err2 = np.zeros_like(sim)
    for k in range(length - 1):
        dt = t[idx[:, k + 1]] - t[idx[:, k]]
        acc = (u[idx[:, k]] - model.viscous_nms_per_rad * sim - model.coulomb_nm * np.sign(v[idx[:, k]]))
        sim = sim + dt * acc / model.inertia_kgm2
        err2 += (sim - v[idx[:, k + 1]]) ** 2
    return float(np.sqrt(err2.sum() / (len(sim) * (length - 1))))


def _shifted_torque(samples: JointSamples) -> np.ndarray:
    u = np.asarray(samples.torque_nm, dtype=np.float64)
    d = int(samples.delay_frames)
    if d == 0:
        return u
    return np.concatenate([np.full(d, np.nan), u[:-d]])


def _design(samples: JointSamples, win: Windows, with_friction: bool) -> tuple[np.ndarray, np.ndarray]:
    """Regressors (W, 2|3) and response (W,) of the windowed equation."""
    t = np.asarray(samples.t_s, dtype=np.float64)
    v = np.asarray(samples.velocity_rad_s, dtype=np.float64)
    u = _shifted_torque(samples)
    length = int((win.end - win.start)[0]) + 1
    idx = win.start[:, None] + np.arange(length - 1)[None, :]
    dt = t[idx + 1] - t[idx]
    cols = [(u[idx] * dt).sum(1), -(v[idx] * dt).sum(1)]
    if with_friction:
        cols.append(-(np.sign(v[idx]) * dt).sum(1))
    y = v[win.end] - v[win.start]
    return np.column_stack(cols), y


def _physical(theta: np.ndarray, cov: np.ndarray, with_friction: bool) -> tuple[FirstOrderModel, FirstOrderModel]:
    """θ = (1/I, b/I, f_c/I) → (I, b, f_c) and their delta-method standard errors."""
    a = theta[0]
    if not np.isfinite(a) or a <= 0:
        raise QuickFitRefused(
            f"the torque term 1/I came out {a:.3g} (zero, negative or not finite): check the sign and units "
            "of the torque and velocity columns"
        )
    if theta[1] < 0:
        raise QuickFitRefused(
            f"the fitted damping b/I = {theta[1]:.3g} 1/s is negative: the velocity would grow on its own"
        )
    p = len(theta)
    values = [1.0 / a, theta[1] / a] + ([theta[2] / a] if with_friction else [])
    grads = [np.zeros(p), np.zeros(p)] + ([np.zeros(p)] if with_friction else [])
    grads[0][0] = -1.0 / a**2
    grads[1][0], grads[1][1] = -theta[1] / a**2, 1.0 / a
    if with_friction:
        grads[2][0], grads[2][2] = -theta[2] / a**2, 1.0 / a
    errs = [float(np.sqrt(max(g @ cov @ g, 0.0))) for g in grads]
    if not with_friction:
        values.append(0.0)
        errs.append(0.0)
    return FirstOrderModel(*map(float, values)), FirstOrderModel(*errs)


def _warnings(model: FirstOrderModel, stderr: FirstOrderModel, cond: float, with_friction: bool) -> list[str]:
    out = []
    if cond > MAX_CONDITION_NUMBER:
        out.append(
            f"condition number {cond:.1f} > {MAX_CONDITION_NUMBER:g}: the parameters trade off against each other "
            "(closed-loop data?)"
        )
    names = [("inertia_kgm2", "I"), ("viscous_nms_per_rad", "b")] + ([("coulomb_nm", "f_c")] if with_friction else [])
    for attr, label in names:
        value, err = getattr(model, attr), getattr(stderr, attr)
        rel = err / abs(value) if value != 0 else float("inf")
        if not rel <= MAX_RELATIVE_STANDARD_ERROR:
            out.append(f"{label} = {value:.4g} has standard error {err:.2g} ({100 * rel:.0f} % > "
                       f"{100 * MAX_RELATIVE_STANDARD_ERROR:.0f} %)")
    return out
