"""Joint excitation plans with fr3_stack's `joint_sysid.py` semantics (fr3_stack `examples/joint_sysid.py`, docs/daemon.md).

Modes: `hold`, `sine` and `chirp` (one joint at a time, with gaps) and `multisine` (all
selected joints together, inverse-frequency tone weights summing to `amplitude_deg`, or, when
`tone_table` is given, each joint's own (amplitude, frequency, phase[, sweep]) components as a
designed excitation chooses them: twinlake/excitation_design/; a component with a sweep
β ≠ 0 [Hz/s] is a linear chirp from f to f + β·seconds over the segment). Each
segment is shaped by the seventh-order (C3) smoothstep envelope, so the offset and its first
three derivatives vanish at segment ends. `reference(plan, q0, t)` returns absolute targets
[rad] and analytic derivatives [rad/s, rad/s², rad/s³], arrays (n, 7); `preflight` checks
the joint range (outside the 10 % repulsion zone) and the derivative peaks at 1 kHz.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..sim import Q_MAX, Q_MIN

MODES = ("hold", "sine", "chirp", "multisine")
Q_LOWER = Q_MIN + 0.1 * (Q_MAX - Q_MIN)
Q_UPPER = Q_MAX - 0.1 * (Q_MAX - Q_MIN)
PREVIEW_ANCHOR_Q = np.array([0.0, -0.6, 0.0, -1.8, 0.0, 1.8, 0.7])
PREFLIGHT_RATE_HZ = 1000.0


@dataclass(frozen=True)
class Plan:
    """An excitation plan; defaults are fr3_stack's (J1 sine, 1°, 0.1 Hz, 24 s total)."""

    mode: str = "sine"
    joints: tuple[int, ...] = (1,)
    amplitude_deg: float = 1.0
    seconds: float = 20.0
    ramp: float = 5.0
    hold: float = 2.0
    gap: float = 2.0
    f0: float = 0.1
    f1: float = 0.5
    tones: tuple[float, ...] = (0.1, 0.23, 0.41)
    seed: int = 0
    rate: float = 60.0
    max_velocity: float = 0.1
    max_acceleration: float = 0.3
    max_jerk: float = 2.0
    # multisine only: per joint J1..J7 a tuple of (amplitude [rad], f [Hz], phase [rad]) tones,
    # or (amplitude, f, phase, sweep [Hz/s]) linear chirps f → f + sweep·seconds;
    # empty: fr3_stack's shared `tones` with inverse-frequency weights and seeded phases
    tone_table: tuple = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["joints"], d["tones"] = list(self.joints), list(self.tones)
        if self.tone_table:
            d["tone_table"] = [[list(t) for t in joint] for joint in self.tone_table]
        else:
            d.pop("tone_table")
        return d

    def joint_amplitudes_rad(self) -> np.ndarray:
        """(7,) bound of each joint's |offset| [rad]: amplitude_deg on the moving joints, or
        the sum of a designed joint's tone amplitudes."""
        out = np.zeros(7)
        if self.mode == "hold":
            return out
        for j in self.joints:
            out[j - 1] = (sum(abs(t[0]) for t in self.tone_table[j - 1]) if self.tone_table
                          else math.radians(self.amplitude_deg))
        return out

    @property
    def segments(self) -> int:
        return len(self.joints) if self.mode in ("sine", "chirp") else 1

    @property
    def total_s(self) -> float:
        """2·hold + segments·seconds + (segments − 1)·gap [s]."""
        return 2 * self.hold + self.segments * self.seconds + (self.segments - 1) * self.gap


OPTION = {"amplitude_deg": "--amplitude-deg", "seconds": "--seconds", "ramp": "--ramp", "hold": "--hold",
          "gap": "--gap", "f0": "--f0", "f1": "--f1", "seed": "--seed", "rate": "--rate",
          "max_velocity": "--max-velocity", "max_acceleration": "--max-acceleration", "max_jerk": "--max-jerk"}
"""The `twinlake excite` option of each plan field (fr3_stack's joint_sysid.py names): refusals
name the option the user typed, not the field."""
_UNITS = {"max_velocity": "rad/s", "max_acceleration": "rad/s²", "max_jerk": "rad/s³"}


def validate_plan(plan: Plan) -> Plan:
    """Raise ValueError naming the first bad option (`--ramp`, `--seconds`, ...) and its
    allowed range; returns the plan."""
    numbers = {k: v for k, v in plan.to_dict().items() if k not in ("mode", "joints", "tones", "tone_table")}
    for key, value in numbers.items():
        if not math.isfinite(float(value)):
            raise ValueError(f"{OPTION[key]}: expected a finite number, got {value}")
    if not all(math.isfinite(f) for f in plan.tones):
        raise ValueError(f"--tones: expected finite frequencies in Hz, got {_listed(plan.tones)}")
    if plan.mode not in MODES:
        raise ValueError(f"--mode: expected one of {', '.join(MODES)}, got {plan.mode!r}")
    if not plan.joints or len(set(plan.joints)) != len(plan.joints) or not all(1 <= j <= 7 for j in plan.joints):
        raise ValueError(f"--joints: expected distinct joints in 1..7, got {_listed(plan.joints) or 'none'}")
    for key, unit in (("amplitude_deg", "°"), ("seconds", " s"), ("ramp", " s")):
        if getattr(plan, key) <= 0:
            raise ValueError(f"{OPTION[key]}: expected > 0{unit}, got {getattr(plan, key):g}")
    if 2 * plan.ramp > plan.seconds:
        raise ValueError(f"--ramp {plan.ramp:g} s needs --seconds ≥ {2 * plan.ramp:g} (a fade-in and a fade-out "
                         f"of --ramp in each segment), got --seconds {plan.seconds:g}; or lower --ramp to "
                         f"≤ {plan.seconds / 2:g} s")
    for key in ("hold", "gap"):
        if getattr(plan, key) < 0:
            raise ValueError(f"{OPTION[key]}: expected ≥ 0 s, got {getattr(plan, key):g}")
    if plan.total_s > 600:
        raise ValueError(f"the run would last {plan.total_s:g} s (2·--hold + --seconds per segment + --gap "
                         "between segments); expected total duration ≤ 600 s: lower --seconds, --hold or --gap, "
                         "or excite fewer --joints per run")
    if plan.f0 <= 0 or plan.f1 < plan.f0:
        raise ValueError(f"--f0/--f1: expected 0 < --f0 ≤ --f1 (Hz), got --f0 {plan.f0:g}, --f1 {plan.f1:g}")
    if not plan.tones or any(f <= 0 for f in plan.tones):
        raise ValueError(f"--tones: expected one or more frequencies > 0 Hz, got {_listed(plan.tones) or 'none'}")
    _validate_tone_table(plan)
    if plan.seed < 0:
        raise ValueError(f"--seed: expected ≥ 0, got {plan.seed}")
    if not 10 <= plan.rate <= 200:
        raise ValueError(f"--rate: expected 10..200 Hz, got {plan.rate:g}")
    if plan.ramp * plan.rate < 5:
        raise ValueError(f"--ramp {plan.ramp:g} s at --rate {plan.rate:g} Hz is {plan.ramp * plan.rate:g} commands; "
                         f"a ramp needs ≥ 5: raise --ramp to ≥ {5 / plan.rate:g} s or --rate to "
                         f"≥ {5 / plan.ramp:g} Hz")
    highest = {"sine": plan.f0, "chirp": plan.f1, "multisine": max(plan.tones)}.get(plan.mode)
    if highest is not None and highest > plan.rate / 20:
        which = {"sine": "--f0", "chirp": "--f1", "multisine": "--tones"}[plan.mode]
        raise ValueError(f"{which}: the highest frequency {highest:g} Hz exceeds --rate/20 = {plan.rate / 20:g} Hz; "
                         f"raise --rate to ≥ {20 * highest:g} Hz (at most 200) or lower {which}")
    for key in ("max_velocity", "max_acceleration", "max_jerk"):
        if getattr(plan, key) <= 0:
            raise ValueError(f"{OPTION[key]}: expected > 0 {_UNITS[key]}, got {getattr(plan, key):g}")
    return plan


def _listed(values) -> str:
    return " ".join(f"{v:g}" for v in values)


def _validate_tone_table(plan: Plan) -> None:
    if not plan.tone_table:
        return
    if plan.mode != "multisine" or len(plan.tone_table) != 7:
        raise ValueError("--design: the designed tone table needs 7 joints' tones of a multisine plan, "
                         f"got {len(plan.tone_table)} for --mode {plan.mode}")
    for j, joint in enumerate(plan.tone_table, start=1):
        for tone in joint:
            if len(tone) not in (3, 4) or not all(math.isfinite(float(x)) for x in tone) or tone[1] <= 0:
                raise ValueError(f"--design: tone table J{j}: expected (amplitude_rad, f_hz > 0, phase_rad"
                                 f"[, sweep_hz_s]), got {tone}")
            end = tone[1] + (tone[3] if len(tone) == 4 else 0.0) * plan.seconds
            if end <= 0:
                raise ValueError(f"--design: tone table J{j}: the chirp {tone} sweeps to {end:g} Hz over --seconds "
                                 f"{plan.seconds:g}; expected > 0 Hz")
            if max(tone[1], end) > plan.rate / 20:
                raise ValueError(f"--design: tone table J{j}: {max(tone[1], end):g} Hz exceeds --rate/20 = "
                                 f"{plan.rate / 20:g} Hz; raise --rate")


def envelope(s: np.ndarray, seconds: float, ramp: float) -> tuple[np.ndarray, ...]:
    """Seventh-order smoothstep w(s) and its first three time derivatives, arrays like s."""
    s = np.asarray(s, dtype=np.float64)
    u = np.clip(np.minimum(s, seconds - s) / ramp, 0.0, 1.0)
    inner = (u > 0) & (u < 1)
    direction = np.where(s <= seconds / 2, 1.0, -1.0) / ramp
    w = 35 * u**4 - 84 * u**5 + 70 * u**6 - 20 * u**7
    w1 = (140 * u**3 - 420 * u**4 + 420 * u**5 - 140 * u**6) * direction
    w2 = (420 * u**2 - 1680 * u**3 + 2100 * u**4 - 840 * u**5) * direction**2
    w3 = (840 * u - 5040 * u**2 + 8400 * u**3 - 4200 * u**4) * direction**3
    return w, np.where(inner, w1, 0.0), np.where(inner, w2, 0.0), np.where(inner, w3, 0.0)


def _tones(plan: Plan, joint: int) -> list[tuple[float, float, float, float]]:
    """(amplitude [rad], f [Hz], sweep [Hz/s], phase [rad]) per tone for one joint."""
    amp = math.radians(plan.amplitude_deg)
    if plan.mode == "sine":
        return [(amp, plan.f0, 0.0, 0.0)]
    if plan.mode == "chirp":
        return [(amp, plan.f0, (plan.f1 - plan.f0) / plan.seconds, 0.0)]
    if plan.tone_table:
        return [(float(t[0]), float(t[1]), float(t[3]) if len(t) == 4 else 0.0, float(t[2]))
                for t in plan.tone_table[joint - 1]]
    inv = np.array([1.0 / f for f in plan.tones])
    weights = inv / inv.sum()
    phases = np.random.default_rng(plan.seed).uniform(0, 2 * np.pi, (7, len(plan.tones)))[joint - 1]
    return [(amp * w, f, 0.0, float(p)) for w, f, p in zip(weights, plan.tones, phases)]


def _signal(tones, s: np.ndarray) -> tuple[np.ndarray, ...]:
    y = [np.zeros_like(s) for _ in range(4)]
    for a, f, sweep, phi in tones:
        phase = 2 * np.pi * (f * s + 0.5 * sweep * s**2) + phi
        omega = 2 * np.pi * (f + sweep * s)
        beta = 2 * np.pi * sweep
        sin, cos = np.sin(phase), np.cos(phase)
        y[0] += a * sin
        y[1] += a * omega * cos
        y[2] += a * (beta * cos - omega**2 * sin)
        y[3] += a * (-3 * omega * beta * sin - omega**3 * cos)
    return tuple(y)


def offsets(plan: Plan, t: np.ndarray) -> np.ndarray:
    """Offset from the anchor and its derivatives: array (4, n, 7) [rad, rad/s, rad/s², rad/s³]."""
    t = np.asarray(t, dtype=np.float64)
    out = np.zeros((4, t.size, 7))
    if plan.mode == "hold":
        return out
    groups = [[j] for j in plan.joints] if plan.segments > 1 else [list(plan.joints)]
    for k, joints in enumerate(groups):
        start = plan.hold + k * (plan.seconds + plan.gap)
        s = t - start
        active = (s >= 0) & (s <= plan.seconds)
        if not active.any():
            continue
        sa = s[active]
        w = envelope(sa, plan.seconds, plan.ramp)
        for j in joints:
            out[:, active, j - 1] = enveloped(w, _signal(_tones(plan, j), sa))
    return out


def enveloped(w, y) -> np.ndarray:
    """The offset w·y and its first three derivatives by Leibniz's rule, stacked (4, ...):
    `w` the envelope and `y` the signal, each four arrays (value and three derivatives) that
    broadcast together."""
    return np.stack([w[0] * y[0], w[1] * y[0] + w[0] * y[1], w[2] * y[0] + 2 * w[1] * y[1] + w[0] * y[2],
                     w[3] * y[0] + 3 * w[2] * y[1] + 3 * w[1] * y[2] + w[0] * y[3]])


def reference(plan: Plan, q0, t) -> np.ndarray:
    """Absolute reference: (4, n, 7) with q = q0 + offset and the offset's derivatives."""
    out = offsets(plan, t)
    out[0] += np.asarray(q0, dtype=np.float64)
    return out


def sample_times(plan: Plan, rate_hz: float | None = None) -> np.ndarray:
    """linspace(0, total, ceil(total·rate) + 1) at the plan's rate (or `rate_hz`)."""
    rate = plan.rate if rate_hz is None else rate_hz
    return np.linspace(0.0, plan.total_s, int(math.ceil(plan.total_s * rate)) + 1)


def peaks(plan: Plan) -> dict[str, list[float]]:
    """Per-joint peaks of |offset| and its derivatives sampled at 1 kHz."""
    off = np.abs(offsets(plan, sample_times(plan, PREFLIGHT_RATE_HZ))).max(axis=1)
    keys = ("offset_rad", "velocity_rad_s", "acceleration_rad_s2", "jerk_rad_s3")
    return {k: [float(x) for x in off[i]] for i, k in enumerate(keys)}


def preflight(plan: Plan, q0) -> dict[str, list[float]]:
    """Check the plan from anchor q0 [rad] (7,); raise ValueError, else return `peaks`."""
    q0 = np.asarray(q0, dtype=np.float64)
    if q0.shape != (7,) or not np.isfinite(q0).all():
        raise ValueError(f"anchor q0: expected 7 finite joint angles, got {q0.tolist()}")
    exc = plan.joint_amplitudes_rad()
    low, high = q0 - exc <= Q_LOWER, q0 + exc >= Q_UPPER
    if (low | high).any():
        j = int(np.flatnonzero(low | high)[0])
        raise ValueError(f"joint {j + 1}: anchor {q0[j]:.4f} rad ± {exc[j]:.4f} rad reaches the joint-limit "
                         f"repulsion zone (allowed ({Q_LOWER[j]:.4f}, {Q_UPPER[j]:.4f}) rad): lower "
                         "--amplitude-deg or start the arm further from the limit")
    found = peaks(plan)
    for key, name, limit, unit in (("velocity_rad_s", "velocity", plan.max_velocity, "rad/s"),
                                   ("acceleration_rad_s2", "acceleration", plan.max_acceleration, "rad/s²"),
                                   ("jerk_rad_s3", "jerk", plan.max_jerk, "rad/s³")):
        worst = int(np.argmax(found[key]))
        if found[key][worst] > limit:
            raise ValueError(f"reference {name} peak {found[key][worst]:.4g} {unit} exceeds --max-{name} {limit:g} "
                             f"on joint {worst + 1}; lower --amplitude-deg or the frequencies (--f0/--f1/--tones), "
                             f"or raise --max-{name}")
    return found
