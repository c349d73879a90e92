"""Structures in a replay's joint position residual, each fitted alone by least squares
(fit/trust/adequacy.py lists them; docs/fitting.md says how to read them).

Residual `r = q_real − q_sim` (S, 7) [rad] over the clean intervals of a run. A cause the
model lacks acts as a torque `τ = c·u(t)` on a joint: `u` is a known shape (the weight of a
flange mass, the sign of velocity, velocity, acceleration, the rate of the commanded torque)
and `c` the unknown amount. Under joint impedance the residual it leaves is that torque seen
through the closed loop of the joint, `G(s) = 1 / (M·s² + D·s + K)` (M the joint's inertia
with the model's armature at the interval's mean pose, D the recorded damping gain plus the
model's viscous friction, K the recorded stiffness; one joint at a time, the couplings of the
mass matrix ignored), so each `u` is filtered by G (scipy `lfilter`, bilinear, zero initial
state: replay and recording start from the same state) and regressed on r. The coefficients
keep their physical units and one cause keeps one value across runs recorded with different
gains. Cartesian-impedance intervals have no joint gains: there the shapes are used unfiltered
and coefficients have no units. The time shift of the whole sim is searched directly.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.residual import GRAVITY_STEP_S, MAX_SHIFT_MS, STILL_RAD_S, ResidualSegment, Signature
from ..core.noise_floor import NoiseFloor

GRAVITY = np.array([0.0, 0.0, -9.81])  # [m/s²], the base frame's z up
JOINT_SHARE = 0.15  # a joint carrying this share of a structure's power is named
# name: (what the error does, the model term, unit of the difference, key, hint parameter)
_WORDS = {
    "friction": ("flips with the sign of velocity", "Coulomb friction", "N·m", "delta_nm"),
    "viscous": ("follows velocity", "viscous friction", "N·m·s/rad", "delta_nms_per_rad"),
    "inertia": ("follows acceleration", "inertia (armature)", "kg·m²", "delta_kgm2"),
}


class _Arm:
    """The replay's MuJoCo model and scratch data, for kinematics and joint inertias."""

    def __init__(self, model) -> None:
        import mujoco

        from ...sim import load_model
        from ...sim.arm_model.model import arm_index

        self.mj = mujoco
        self.model = model if model is not None else load_model()
        self.arm = arm_index(self.model)
        self.data = mujoco.MjData(self.model)
        self.jacp = np.zeros((3, self.model.nv))

    def gravity_row(self, q: np.ndarray) -> np.ndarray:
        """(7,) `Jₚ(q)ᵀ·g` at the `ee` site [N·m per kg]."""
        self.data.qpos[self.arm.qpos_adr] = q
        self.mj.mj_kinematics(self.model, self.data)
        self.mj.mj_comPos(self.model, self.data)
        self.mj.mj_jacSite(self.model, self.data, self.jacp, None, self.arm.ee_site)
        return GRAVITY @ self.jacp[:, self.arm.dof_adr]

    def link_inertia(self, q: np.ndarray) -> np.ndarray:
        """(7,) diagonal of the joint-space inertia at q without the model's armature [kg·m²]."""
        m, d = self.model, self.data
        self.gravity_row(q)  # kinematics and com positions at q
        self.mj.mj_crb(m, d)
        full = np.zeros((m.nv, m.nv))
        if hasattr(d, "qM"):  # MuJoCo 3: mj_fullM(m, dst, qM)
            self.mj.mj_fullM(m, full, d.qM)
        else:  # MuJoCo 4: mj_fullM(m, d, dst)
            self.mj.mj_fullM(m, d, full)
        dofs = self.arm.dof_adr
        return full[dofs, dofs] - m.dof_armature[dofs]


def flange_gravity_torque(q_rad: np.ndarray, t_s: np.ndarray | None = None, model=None,
                          arm: _Arm | None = None) -> np.ndarray:
    """(S, 7) joint torque [N·m per kg] of the weight of a point mass at the `ee` site (the
    flange) along the joint positions `q_rad` (S, 7): `Jₚ(q)ᵀ·(0, 0, −9.81)`. Evaluated every
    GRAVITY_STEP_S of `t_s` (every sample without times) and interpolated linearly."""
    arm = arm or _Arm(model)
    q = np.asarray(q_rad, dtype=np.float64)
    n = len(q)
    step = 1
    if t_s is not None and n > 1:
        dt = float(np.median(np.diff(t_s)))
        step = max(1, int(round(GRAVITY_STEP_S / dt))) if dt > 0 else 1
    idx = np.unique(np.r_[np.arange(0, n, step), n - 1]) if n else np.zeros(0, np.int64)
    coarse = np.array([arm.gravity_row(q[s]) for s in idx]).reshape(len(idx), 7)
    if len(idx) == n:
        return coarse
    samples = np.arange(n)
    return np.column_stack([np.interp(samples, idx, coarse[:, j]) for j in range(7)])


def _time_base(t_s: np.ndarray) -> np.ndarray:
    """`t_s` when strictly increasing, else a uniform grid of its median step (1 ms if none)."""
    t = np.asarray(t_s, dtype=np.float64)
    steps = np.diff(t)
    if len(t) < 2 or np.all(steps > 0):
        return t
    dt = float(np.median(steps[steps > 0])) if np.any(steps > 0) else 1e-3
    return np.arange(len(t)) * dt


def _loop_filter(seg: ResidualSegment, t_s: np.ndarray, arm: _Arm, armature, viscous):
    """u (S, 7) -> each joint's closed-loop deflection under torque u (S, 7) [rad]; identity
    for a Cartesian interval."""
    from scipy.signal import bilinear, lfilter

    if seg.k_nm_per_rad is None or seg.d_nms_per_rad is None or len(t_s) < 2:
        return lambda u: u
    dt = float(np.median(np.diff(t_s)))
    inertia = arm.link_inertia(np.mean(seg.q_real_rad, axis=0)) + np.asarray(armature)
    k = np.median(seg.k_nm_per_rad, axis=0)
    d = np.median(seg.d_nms_per_rad, axis=0) + np.asarray(viscous)
    coeffs = [bilinear([1.0], [inertia[j], d[j], k[j]], fs=1.0 / dt) for j in range(7)]
    return lambda u: np.column_stack([lfilter(b, a, u[:, j]) for j, (b, a) in enumerate(coeffs)])


class _Sums:
    """Σx·r and Σx² per joint of one regressor over all segments."""

    def __init__(self) -> None:
        self.xr = np.zeros(7)
        self.xx = np.zeros(7)

    def add(self, x: np.ndarray, r: np.ndarray) -> None:
        self.xr += np.sum(x * r, axis=0)
        self.xx += np.sum(x * x, axis=0)

    def per_joint(self) -> tuple[np.ndarray, np.ndarray]:
        """(coefficient (7,), power removed (7,)) with one coefficient per joint."""
        ok = self.xx > 0
        coef = np.where(ok, self.xr / np.where(ok, self.xx, 1.0), 0.0)
        return coef, np.where(ok, coef * self.xr, 0.0)


def residual_signatures(segments: Sequence[ResidualSegment], floor: NoiseFloor, *, armature, viscous,
                        model=None) -> list[Signature]:
    """The structures of the residual of `segments` replayed with a model of `armature` (7,)
    [kg·m²] and `mu_viscous` `viscous` (7,) [N·m·s/rad], most explanatory first."""
    res = [s.q_real_rad - s.q_sim_rad for s in segments]
    n = sum(len(r) for r in res)
    power = float(sum(np.sum(r ** 2) for r in res))
    excess = power - n * float(np.sum(floor.q_rad ** 2))
    scale = excess if excess > 0 else power
    if not scale > 0:
        return []
    arm = _Arm(model)
    joint_space = all(s.k_nm_per_rad is not None for s in segments)
    sums = {k: _Sums() for k in ("payload", "friction", "viscous", "inertia", "delay")}
    bias_sum = np.zeros(7)
    for seg, r in zip(segments, res):
        bias_sum += r.sum(axis=0)
        t = _time_base(seg.t_s)
        loop = _loop_filter(seg, t, arm, armature, viscous)
        if seg.k_nm_per_rad is not None:
            sums["payload"].add(loop(flange_gravity_torque(seg.q_real_rad, t, arm=arm)), r)
        dq = seg.dq_sim_rad_s
        if dq is None or len(dq) < 3:
            continue
        sums["friction"].add(loop(np.sign(dq) * (np.abs(dq) > STILL_RAD_S)), r)
        sums["viscous"].add(loop(dq), r)
        sums["inertia"].add(loop(np.gradient(dq, t, axis=0)), r)
        if seg.tau_sim_nm is not None:
            sums["delay"].add(loop(np.gradient(seg.tau_sim_nm, t, axis=0)), r)
    out = [_bias(bias_sum / n, n, scale)]
    if np.sum(sums["payload"].xx) > 0:
        out.append(_payload(sums["payload"], scale))
    model_values = {"friction": None, "viscous": viscous, "inertia": armature}
    for name in ("friction", "viscous", "inertia"):
        if np.sum(sums[name].xx) > 0:
            out.append(_per_joint(name, sums[name], scale, joint_space, model_values[name]))
    if np.sum(sums["delay"].xx) > 0:
        out.append(_delay(sums["delay"], scale, joint_space))
    shift = _time_shift(segments, res, n, scale)
    if shift is not None:
        out.append(shift)
    return sorted(out, key=lambda s: (-s.explained, s.name))


def _joints(power: np.ndarray) -> tuple[int, ...]:
    """1-based joints carrying at least JOINT_SHARE of a structure's power (7,)."""
    total = float(np.sum(power))
    if not total > 0:
        return ()
    return tuple(int(j) + 1 for j in np.flatnonzero(power >= JOINT_SHARE * total))


def _names(joints: tuple[int, ...]) -> str:
    return "/".join(f"J{j}" for j in joints)


def _share(removed: float, scale: float) -> float:
    return float(min(max(removed / scale, 0.0), 1.0))


def _bias(mean: np.ndarray, n: int, scale: float) -> Signature:
    power = n * mean ** 2
    joints = _joints(power)
    offsets = ", ".join(f"J{j} {1e3 * mean[j - 1]:+.3g} mrad" for j in joints)
    return Signature("bias", _share(float(power.sum()), scale), joints, {"offset_rad": mean.tolist()},
                     f"a constant offset (recorded − sim) on {_names(joints)}: {offsets}")


def _payload(s: _Sums, scale: float) -> Signature:
    xr, xx = float(s.xr.sum()), float(s.xx.sum())
    mass = xr / xx
    joints = _joints(mass ** 2 * s.xx)
    if mass >= 0:
        text = (f"a deflection on {_names(joints)} that follows the gravity torque of a {mass:.3g} kg point "
                "mass at the flange (an unmodelled payload)")
    else:
        text = (f"a deflection on {_names(joints)} that follows the gravity torque of {mass:.3g} kg at the "
                "flange (the robot compensates a heavier load than it carries: check its declared payload)")
    return Signature("payload", _share(xr * mass, scale), joints, {"mass_kg": mass}, text)


# the parameter group whose layout bounds limit each term's suggested change
_BOUNDED_BY = {"friction": "mu_static", "viscous": "mu_viscous", "inertia": "armature"}


def suggested_change(name: str, j: int, delta: float, unit: str, model_value: float | None) -> str:
    """One joint's suggested change, never past the parameter's bounds: beyond them, the most
    the bounds allow and that this term alone cannot explain the rest."""
    from ...sim import LAYOUT

    lo, hi = LAYOUT.bounds[LAYOUT.names.index(f"{_BOUNDED_BY[name]}_j{j}")]
    if model_value is None:  # the model's own value unknown here: the change may span the range at most
        lo, hi, model_value = -(hi - lo), hi - lo, 0.0
    allowed = float(np.clip(model_value + delta, lo, hi)) - model_value
    if abs(allowed - delta) <= 1e-9 * max(abs(delta), 1.0):
        return f"J{j} {delta:+.3g} {unit}"
    return (f"J{j} at most {allowed:+.3g} {unit} (to its bound; the residual asks for more than this term "
            "can give: not this term alone)")


def _per_joint(name: str, s: _Sums, scale: float, joint_space: bool, model_values=None) -> Signature:
    coef, removed = s.per_joint()
    joints = _joints(removed)
    what, term, unit, key = _WORDS[name]
    delta = -coef  # τ = −Δ·u: the robot has Δ more of the term than the model
    if joint_space:
        base = [None] * 7 if model_values is None else [float(v) for v in np.asarray(model_values).reshape(-1)]
        amounts = ", ".join(suggested_change(name, j, float(delta[j - 1]), unit, base[j - 1]) for j in joints)
        text = f"error that {what} on {_names(joints)}: the robot's {term} exceeds the model's by ≈ {amounts}"
    else:
        text = f"error that {what} on {_names(joints)} ({term}?)"
    return Signature(name, _share(float(removed.sum()), scale), joints,
                     {key: delta.tolist() if joint_space else None}, text)


def _delay(s: _Sums, scale: float, joint_space: bool) -> Signature:
    """One extra delay Δ for all joints: τ_robot(t) ≈ τ(t) − Δ·dτ/dt."""
    xr, xx = float(s.xr.sum()), float(s.xx.sum())
    delta_ms = -1e3 * xr / xx
    joints = _joints((xr / xx) ** 2 * s.xx)
    more = "more" if delta_ms > 0 else "less"
    text = (f"error that follows the rate of the commanded torque on {_names(joints)}: the robot applies its "
            f"torque ≈ {abs(delta_ms):.2g} ms {'later' if delta_ms > 0 else 'earlier'} than the model ({more} delay)")
    return Signature("delay", _share(xr * xr / xx, scale), joints,
                     {"delta_ms": delta_ms if joint_space else None}, text)


def _time_shift(segments: Sequence[ResidualSegment], res: list[np.ndarray], n: int, scale: float) -> Signature | None:
    """The shift of the sim (whole samples, within ±MAX_SHIFT_MS) that best matches the recording."""
    usable = []
    for seg, r in zip(segments, res):
        dt = float(np.median(np.diff(seg.t_s))) if len(seg.t_s) > 2 else 0.0
        m = int(MAX_SHIFT_MS * 1e-3 / dt) if dt > 0 else 0
        if m >= 1 and len(r) > 4 * m:
            usable.append((seg, m, dt))
    if not usable:
        return None
    m = min(u[1] for u in usable)
    shifts = np.arange(-m, m + 1)
    sse = np.zeros(len(shifts))
    kept = 0
    for seg, _, _dt in usable:
        real = seg.q_real_rad[m:len(seg.q_real_rad) - m]
        kept += len(real)
        for i, s in enumerate(shifts):
            sse[i] += np.sum((real - seg.q_sim_rad[m + s:len(seg.q_sim_rad) - m + s]) ** 2)
    best = int(np.argmin(sse))
    shift_ms = float(shifts[best]) * 1e3 * float(np.median([u[2] for u in usable]))
    removed = (sse[m] - sse[best]) * n / max(kept, 1)
    if shifts[best] > 0:
        text = f"the recording matches the sim shifted {shift_ms:.3g} ms later (a clock or time-base offset?)"
    elif shifts[best] < 0:
        text = f"the recording matches the sim shifted {-shift_ms:.3g} ms earlier (a clock or time-base offset?)"
    else:
        text = "no time shift of the sim improves the match"
    return Signature("time_shift", _share(removed, scale), (), {"shift_ms": shift_ms}, text)


__all__ = ["flange_gravity_torque", "residual_signatures"]
