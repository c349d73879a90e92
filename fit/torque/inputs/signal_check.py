"""Does the torque mean what its mapping says? A check of each run the torque route reads,
stored with the fit (`torque_json.signal_check`) and printed as an adequacy line.

The link-side measured torque (libfranka `tau_J`) contains the links' gravity g(q); the
commanded torque does not (the robot adds gravity after it). So per joint j, with g(q) the
nominal links' gravity torque (the arm model, no payload):

- **over a moving run** (g_j varies by more than `MIN_SPREAD_NM` over the run): a_j of the
  least-squares fit τ_j ≈ a_j·g_j + b_j·m_j + c_j, m_j the nominal links' inertia and Coriolis
  torque (so motion that follows the pose, as a multisine's does, is not taken for gravity; the
  intercept takes a sensor offset), read at 200 Hz;
- **at rest** (one pose, g_j barely varies; |g_j| at least `MIN_LEVEL_NM`): the level
  a_j = mean(τ_j) / mean(g_j) over the rows where every joint stands still.

a_j is the share of the links' gravity in the signal: about 1 or more for a measured torque (a
payload's gravity grows with the links', so a heavy tool gives 2 and more; the dynamics move
it too), ≈ 0 for a commanded one, negative for a joint whose sign is inverted. A measured
signal with |a_j| under `ZERO_SHARE` on most informative joints is gravity-compensated: "map
it as tau_commanded"; a commanded one with a_j over `COMMANDED_GRAVITY_SHARE` (0.75: an
unconfigured flange load's gravity shows in it too) on most is a measured torque;
a joint under −`ONE_SHARE` is a flipped sign ("the sign of J3 looks inverted"). Joints whose gravity torque is too small to tell (J1, whose
axis is vertical, always) are listed as not informative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_SPREAD_NM = 1.0  # g_j's standard deviation over a run that makes its slope informative
MIN_LEVEL_NM = 2.0  # |mean g_j| at rest that makes its level informative
ZERO_SHARE = 0.3  # |a_j| below: no gravity in the signal
ONE_SHARE = 0.5  # below −ONE_SHARE: inverted gravity
# a commanded torque over this share on most joints carries the links' gravity: a flange load the
# robot was not told of shows in tau_cmd too (0.15–0.29 for the bench's 1.1 kg, more for heavier)
COMMANDED_GRAVITY_SHARE = 0.75
REST_SPEED_RAD_S = 0.01  # every joint's |q̇| below this: a standstill row for the level
CHECK_CUTOFF_HZ = 10.0  # the check's own low-pass of q and dq (motion torques from their gradient)


@dataclass
class SignalCheck:
    """Per joint (7,) the gravity share a_j (NaN: not informative) and how it was measured
    ('slope' | 'level' | None), the findings (plain sentences with the mapping fix) and
    whether the signal looks as its mapping says (`ok`)."""

    signal: str
    share: np.ndarray
    method: list[str | None]
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def line(self) -> tuple[str, bool | None]:
        """(text, passed) for the adequacy lines."""
        told = [f"J{j + 1} {a:+.2f}" for j, a in enumerate(self.share) if np.isfinite(a)]
        if not told:
            return (f"signal check ({self.signal}): no joint's gravity torque varies or stands high enough to tell "
                    "whether the torque contains gravity", None)
        shares = "gravity share " + ", ".join(told)
        if self.ok:
            return (f"signal check ({self.signal}): looks as mapped ({shares})", True)
        return (f"signal check ({self.signal}): {'; '.join(self.findings)} ({shares})", False)

    def to_dict(self) -> dict:
        return {"signal": self.signal, "gravity_share": [None if not np.isfinite(a) else round(float(a), 4) for a in self.share],
                "method": self.method, "findings": self.findings, "ok": self.ok,
                "meaning": "share of the nominal links' gravity torque in the signal: slope over a moving run, "
                           "level at rest; measured ≥ about 1 (a payload adds), commanded ≈ 0, an inverted joint < 0"}


def _share(q: np.ndarray, dq: np.ndarray, tau: np.ndarray, gravity: np.ndarray, motion: np.ndarray
           ) -> tuple[np.ndarray, list]:
    share, method = np.full(7, np.nan), [None] * 7
    ok = np.all(np.isfinite(tau), axis=1)
    rest = ok & np.all(np.abs(dq) < REST_SPEED_RAD_S, axis=1)
    for j in range(7):
        g, t = gravity[ok, j], tau[ok, j]
        if len(g) > 10 and np.std(g) > MIN_SPREAD_NM:  # τ ≈ a·g + b·(inertia, Coriolis) + c: a, with the motion apart
            x = np.column_stack([g, motion[ok, j], np.ones(len(g))])
            share[j], method[j] = float(np.linalg.lstsq(x, t, rcond=None)[0][0]), "slope"
        elif rest.sum() > 10 and abs(gravity[rest, j].mean()) > MIN_LEVEL_NM:
            share[j], method[j] = float(tau[rest, j].mean() / gravity[rest, j].mean()), "level"
    return share, method


def _run_share(run, rigid) -> tuple[np.ndarray, list]:
    """One run's shares: its finite rows every CHECK_STEP, q and dq low-passed at CHECK_CUTOFF_HZ
    (at most 0.3 × the rate), q̈ their gradient; the nominal links' gravity and motion torques."""
    from .derivatives import lowpass

    keep = np.all(np.isfinite(run.q), axis=1) & np.all(np.isfinite(run.dq), axis=1)
    if keep.sum() < 20:
        return np.full(7, np.nan), [None] * 7
    t_s = run.seq[keep] * 1e-3
    rate = 1.0 / max(float(np.median(np.diff(t_s))), 1e-6)
    cutoff = min(CHECK_CUTOFF_HZ, 0.3 * rate)
    q, dq = lowpass(run.q[keep], cutoff, rate), lowpass(run.dq[keep], cutoff, rate)
    ddq = np.gradient(dq, t_s, axis=0)
    step = slice(None, None, max(1, int(round(rate / 200.0))))
    q, dq, ddq, tau = q[step], dq[step], ddq[step], run.tau[keep][step]
    motion = rigid.regressor(q, dq, ddq, gravity=False) @ rigid.theta_nominal
    return _share(q, dq, tau, rigid.gravity_torque(q), motion)


def check(signal: str, runs: list, rigid) -> SignalCheck:
    """The SignalCheck of `signal` ('measured' | 'commanded') over runs (RunSamples: seq, q,
    dq, tau (N, 7)) with the arm model `rigid` (regressor.RigidBodyModel: the nominal links'
    gravity, inertia and Coriolis torques). Each joint's share is the median over the runs that
    inform it."""
    per_run = [_run_share(r, rigid) for r in runs]
    share = np.full(7, np.nan)
    method: list[str | None] = [None] * 7
    for j in range(7):
        found = [(s[j], m[j]) for s, m in per_run if np.isfinite(s[j])]
        if found:
            share[j] = float(np.median([a for a, _ in found]))
            method[j] = found[0][1]
    out = SignalCheck(signal, share, method)
    informative = np.isfinite(share)
    if not informative.any():
        return out
    zero = informative & (np.abs(share) < ZERO_SHARE)
    gravity = informative & (share > COMMANDED_GRAVITY_SHARE)
    flipped = informative & (share < -ONE_SHARE)
    joints = lambda mask: ", ".join(f"J{j + 1}" for j in np.flatnonzero(mask))  # noqa: E731
    if signal == "measured" and zero.sum() * 2 >= informative.sum():
        out.findings.append(f"tau_J carries no gravity on {joints(zero)}: it looks gravity-compensated, a commanded or "
                            "external torque (map it as tau_commanded, or fit the commanded torque)")
    elif signal == "commanded" and gravity.sum() * 2 >= informative.sum():
        out.findings.append(f"tau_cmd carries the links' gravity on {joints(gravity)}: it looks like a measured "
                            "link-side torque (map it as tau_measured, or fit the measured torque)")
    for j in np.flatnonzero(flipped):
        out.findings.append(f"the sign of J{j + 1} looks inverted (its torque follows −g(q)): negate "
                            f"{'tau_J' if signal == 'measured' else 'tau_cmd'}{j + 1} in the mapping")
    return out


__all__ = ["COMMANDED_GRAVITY_SHARE", "MIN_LEVEL_NM", "MIN_SPREAD_NM", "ONE_SHARE", "ZERO_SHARE", "SignalCheck", "check"]
