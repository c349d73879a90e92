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
OLS covariance ``s²(XᵀX)⁻¹`` through the delta method.

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

WINDOW_FRAMES = 10
MAX_GAP_S = 0.1
REST_FRACTION = 0.02
MIN_INDEPENDENT_WINDOWS = 20
MAX_CONDITION_NUMBER = 100.0
MAX_RELATIVE_STANDARD_ERROR = 0.10
_SINGULAR_CONDITION = 1e10


class QuickFitRefused(ValueError):
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
                raise ValueError(f"JointSamples.{name} has {len(getattr(self, name))} rows, expected {n} (as t_s)")
        if self.segment is not None and len(self.segment) != n:
            raise ValueError(f"JointSamples.segment has {len(self.segment)} rows, expected {n} (as t_s)")
        if self.delay_frames < 0:
            raise ValueError(f"JointSamples.delay_frames is {self.delay_frames}, expected >= 0")


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
    dof = max(len(y) - x.shape[1], 1)
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(xs.T @ xs) / np.outer(scale, scale)
    model, stderr = _physical(theta, cov, with_friction)
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


@dataclass(frozen=True)
class GapReport:
    """Inputs of the markdown gap report: the fit against the profile in use, for one joint."""

    run_label: str
    joint: int
    result: QuickFitResult
    sim_model: FirstOrderModel
    profile_label: str
    fit_output_error_rad_s: float
    sim_output_error_rad_s: float
    notes: tuple[str, ...] = ()

    def markdown(self) -> str:
        """The report text (deterministic for the same inputs)."""
        r, s = self.result, self.sim_model
        verdict = "trustworthy (no warnings)" if r.trustworthy else "NOT TRUSTWORTHY: read the warnings"
        rows = [
            ("effective inertia I", "kg·m²", r.model.inertia_kgm2, r.stderr.inertia_kgm2, s.inertia_kgm2),
            ("viscous damping b", "N·m·s/rad", r.model.viscous_nms_per_rad, r.stderr.viscous_nms_per_rad,
             s.viscous_nms_per_rad),
        ]
        if r.with_friction:
            rows.append(("Coulomb friction f_c", "N·m", r.model.coulomb_nm, r.stderr.coulomb_nm, s.coulomb_nm))
        lines = [
            f"# Quick-fit gap report: {self.run_label}, joint J{self.joint}",
            "",
            f"First-order model `I·d(dq)/dt = tau_cmd − b·dq − f_c·sign(dq)` fitted by least squares over "
            f"{r.num_windows} windows of {WINDOW_FRAMES} frames ({r.window_start_s:.3f} s to {r.window_end_s:.3f} s). "
            f"Compared with the profile in use: {self.profile_label}.",
            "",
            f"**Verdict: {verdict}.**",
            "",
            "| quantity | unit | fit | standard error | sim (profile) | sim − fit | (sim − fit)/fit |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for name, unit, val, err, sim in rows:
            rel = f"{100 * (sim - val) / val:+.1f} %" if val != 0 else "n/a"
            lines.append(f"| {name} | {unit} | {val:.4g} | {err:.2g} | {sim:.4g} | {sim - val:+.4g} | {rel} |")
        lines += [
            f"| time constant I/b | s | {r.model.time_constant_s:.4g} | | {s.time_constant_s:.4g} | | |",
            "",
            "| diagnostic | value |",
            "|---|---:|",
            f"| condition number (column-scaled) | {r.condition_number:.1f} (warn above {MAX_CONDITION_NUMBER:g}) |",
            f"| R² of the window equation | {r.r_squared:.4f} |",
            f"| window residual RMS | {r.residual_rms_rad_s:.3g} rad/s |",
            f"| output error RMS, fitted model | {self.fit_output_error_rad_s:.3g} rad/s |",
            f"| output error RMS, sim model | {self.sim_output_error_rad_s:.3g} rad/s |",
            f"| windows used / at rest / gap or split / non-finite | {r.num_windows} / {r.windows.skipped_rest} / "
            f"{r.windows.skipped_gap} / {r.windows.skipped_nonfinite} |",
            "",
            "## Warnings",
            "",
        ]
        lines += [f"- {w}" for w in r.warnings] or ["- none"]
        lines += [
            "",
            "## Notes",
            "",
            "- This report never changes the profile. What to change is your decision.",
            "- The sim's I is the MuJoCo mass-matrix diagonal for this joint, averaged over the windows' "
            "configurations, plus the profile's armature; its f_c is mu_static × dynamic_ratio, its b mu_viscous.",
            "- A clean diagnostic does not prove a first-order model represents the joint (coupling to the other "
            "joints is ignored) or that it predicts another run: validate on a held-out run.",
        ]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def sim_joint_model(params, joint: int, q_samples: np.ndarray, model_path: str | None = None) -> FirstOrderModel:
    """The profile's first-order numbers for ``joint`` (1-based): I = MuJoCo mass-matrix diagonal
    (links + the profile's armature) averaged over ``q_samples`` (K, 7) [rad]; b = mu_viscous;
    f_c = mu_static · dynamic_ratio."""
    import mujoco

    from ..sim import load_model
    from ..sim.model import arm_index

    model = load_model(model_path)
    arm = arm_index(model)
    model.dof_armature[arm.dof_adr] = params.armature
    data = mujoco.MjData(model)
    full = np.zeros((model.nv, model.nv))
    diag = []
    for q in np.atleast_2d(q_samples):
        data.qpos[arm.qpos_adr] = q
        mujoco.mj_fwdPosition(model, data)
        if hasattr(data, "qM"):  # MuJoCo 3: mj_fullM(m, dst, qM)
            mujoco.mj_fullM(model, full, data.qM)
        else:  # MuJoCo 4: mj_fullM(m, d, dst)
            mujoco.mj_fullM(model, data, full)
        diag.append(full[arm.dof_adr[joint - 1], arm.dof_adr[joint - 1]])
    j = joint - 1
    return FirstOrderModel(float(np.mean(diag)), float(params.mu_viscous[j]),
                           float(params.mu_static[j] * params.dynamic_ratio[j]))


def quick_fit_run(lake, run: str, joint: int, *, profile=None, profile_label: str = "nominal (Menagerie)",
                  with_friction: bool = True, delay_ms: int = 0, strict: bool = True,
                  min_duration_s: float = 0.5) -> GapReport:
    """Quick-fit one joint of a run's clean intervals (selector ``[ROBOT/]RUN``) and compare it
    with ``profile`` (a DynamicsParams; default nominal). Raises QuickFitRefused or ValueError."""
    from .intervals import read_frames, resolve
    from ..sim import DynamicsParams

    if not 1 <= joint <= 7:
        raise ValueError(f"--joint {joint}: expected a joint number 1..7")
    refs = resolve(lake, [run], min_duration_s=min_duration_s)
    tables = read_frames(lake, refs)
    need = ["t_s", f"dq{joint}", f"tau_cmd{joint}"] + [f"q{k}" for k in range(1, 8)]
    cols: dict[str, list[np.ndarray]] = {n: [] for n in need}
    segment = []
    for i, (ref, table) in enumerate(zip(refs, tables)):
        for n in need:
            if n not in table.column_names:
                raise ValueError(f"run {ref.robot}/{ref.run}: frames have no column {n!r}")
            arr = table.column(n).to_numpy(zero_copy_only=False).astype(np.float64)
            if n != "t_s" and np.all(np.isnan(arr)):
                raise ValueError(f"run {ref.robot}/{ref.run}: column {n!r} was not recorded (all null)")
            cols[n].append(arr)
        segment.append(np.full(table.num_rows, i))
    c = {n: np.concatenate(v) for n, v in cols.items()}
    samples = JointSamples(c["t_s"], c[f"tau_cmd{joint}"], c[f"dq{joint}"], np.concatenate(segment), int(delay_ms))
    result = fit_first_order(samples, with_friction=with_friction, strict=strict)
    params = profile if profile is not None else DynamicsParams.nominal()
    picks = result.windows.start[np.linspace(0, result.num_windows - 1, min(50, result.num_windows)).astype(int)]
    q = np.column_stack([c[f"q{k}"] for k in range(1, 8)])[picks]
    sim = sim_joint_model(params, joint, q)
    label = f"{refs[0].robot}/{refs[0].run} ({len(refs)} clean interval(s))"
    notes = (f"torque delay assumed: {int(delay_ms)} ms",) if delay_ms else ()
    return GapReport(label, joint, result, sim, profile_label, output_error_rms(result.model, samples, result.windows),
                     output_error_rms(sim, samples, result.windows), notes)
