"""Does the torque mean what its mapping says? A check of each run the torque route reads,
stored with the fit (`torque_json.signal_check`) and printed as an adequacy line.

The link-side measured torque (libfranka `tau_J`) contains the links' gravity g(q); the
commanded torque does not (the robot adds gravity after it). So per joint j, with g(q) the
nominal links' gravity torque (the arm model, no payload):

- **over a moving run** (g_j varies by more than `MIN_SPREAD_NM` over the run): the slope a_j
  of the least-squares line τ_j ≈ a_j·g_j + c_j (the intercept takes a sensor offset);
- **at rest** (one pose, g_j barely varies; |g_j| at least `MIN_LEVEL_NM`): the level
  a_j = mean(τ_j) / mean(g_j) over the rows where every joint stands still.

a_j is the share of the links' gravity in the signal: ≈ 1 for a measured torque (a payload,
the links' own differences and the dynamics move it by tens of per cent), ≈ 0 for a commanded
one, ≈ −1 for a joint whose sign is inverted. A measured signal with a_j within `ZERO_SHARE`
of 0 on most informative joints is gravity-compensated: "map it as tau_commanded"; a commanded
one with a_j near 1 on most is a measured torque; a single joint near −1 is a flipped sign
("the sign of J3 looks inverted"). Joints whose gravity torque is too small to tell (J1, whose
axis is vertical, always) are listed as not informative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_SPREAD_NM = 1.0  # g_j's standard deviation over a run that makes its slope informative
MIN_LEVEL_NM = 2.0  # |mean g_j| at rest that makes its level informative
ZERO_SHARE = 0.3  # |a_j| below: no gravity in the signal
ONE_SHARE = 0.5  # |a_j − 1| (or |a_j + 1|) below: gravity (or inverted gravity)
REST_SPEED_RAD_S = 0.01  # every joint's |q̇| below this: a standstill row for the level
CHECK_STEP = 5  # every how many rows the check reads (gravity varies slowly; 200 Hz is plenty)


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
                           "level at rest; measured ≈ 1, commanded ≈ 0, an inverted joint ≈ −1"}


def _share(q: np.ndarray, dq: np.ndarray, tau: np.ndarray, gravity: np.ndarray) -> tuple[np.ndarray, list]:
    share, method = np.full(7, np.nan), [None] * 7
    ok = np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(tau), axis=1)
    rest = ok & np.all(np.abs(np.nan_to_num(dq, nan=np.inf)) < REST_SPEED_RAD_S, axis=1)
    for j in range(7):
        g, t = gravity[ok, j], tau[ok, j]
        if len(g) > 10 and np.std(g) > MIN_SPREAD_NM:
            gc = g - g.mean()
            share[j], method[j] = float(gc @ (t - t.mean()) / (gc @ gc)), "slope"
        elif rest.sum() > 10 and abs(gravity[rest, j].mean()) > MIN_LEVEL_NM:
            share[j], method[j] = float(tau[rest, j].mean() / gravity[rest, j].mean()), "level"
    return share, method


def check(signal: str, runs: list, gravity_of) -> SignalCheck:
    """The SignalCheck of `signal` ('measured' | 'commanded') over runs (RunSamples: q, dq,
    tau (N, 7)); gravity_of: q (N, 7) -> the nominal links' gravity torque (N, 7) [N·m]. Each
    joint's share is the median over the runs that inform it."""
    step = lambda a: a[::CHECK_STEP]  # noqa: E731
    per_run = [_share(step(r.q), step(r.dq), step(r.tau), gravity_of(np.nan_to_num(step(r.q)))) for r in runs]
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
    one = informative & (np.abs(share - 1.0) < ONE_SHARE)
    flipped = informative & (np.abs(share + 1.0) < ONE_SHARE)
    joints = lambda mask: ", ".join(f"J{j + 1}" for j in np.flatnonzero(mask))  # noqa: E731
    if signal == "measured" and zero.sum() * 2 >= informative.sum():
        out.findings.append(f"tau_J carries no gravity on {joints(zero)}: it looks gravity-compensated, a commanded or "
                            "external torque (map it as tau_commanded, or fit with --torque commanded)")
    elif signal == "commanded" and one.sum() * 2 >= informative.sum():
        out.findings.append(f"tau_cmd carries the links' gravity on {joints(one)}: it looks like a measured "
                            "link-side torque (map it as tau_measured, or fit with --torque measured)")
    expected = one if signal == "measured" else zero
    for j in np.flatnonzero(flipped):
        out.findings.append(f"the sign of J{j + 1} looks inverted (its torque follows −g(q)): negate "
                            f"{'tau_J' if signal == 'measured' else 'tau_cmd'}{j + 1} in the mapping")
    if signal == "measured" and not out.findings:
        odd = informative & ~expected
        if odd.any():
            out.findings.append(f"{joints(odd)}: the torque holds {', '.join(f'{share[j]:.2f}' for j in np.flatnonzero(odd))} "
                                "of the links' gravity (expected ≈ 1): a scale or a mapping error")
    return out


__all__ = ["MIN_LEVEL_NM", "MIN_SPREAD_NM", "ONE_SHARE", "ZERO_SHARE", "SignalCheck", "check"]
