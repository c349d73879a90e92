"""Low-rate robot state: what quasi-static rows carry, and nothing they do not.

franka_ros publishes the robot state at 30 Hz by default (franka_state_controller's
`publish_rate`). Differentiating 30 Hz samples gives no usable q̈ (and a 1 kHz filter design
makes no sense there), so below `LOW_RATE_HZ` the route does not form the dynamic equations.
It keeps the rows where every joint stands still (|q̇_j| < `STILL_RAD_S`) and reads them as
the static equation of the measured (link-side) torque,

    tau_J(q) = g(q; nominal links) + g(q; payload m, c) + offset,

solved for the payload's mass and centre of mass (flange frame, inside the layout's bounds:
scipy `least_squares`, TRF) and the seven sensor offsets. A centre-of-mass component the poses
do not determine (one pose fixes only the components perpendicular to gravity, and the
payload's torques there are collinear with the offsets) is flagged unidentifiable through the
same undetermined-share rule as the dynamic route (base_params). Every dynamic parameter (the
payload's inertia, link-side friction and viscous) is flagged unidentifiable with the reason.
Commanded torques at rest carry no equation (the stuck friction is set-valued): refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ...errors import DataError
from ....sim import LAYOUT
from ..estimation.base_params import analyse

LOW_RATE_HZ = 200.0  # below this sample rate the route is quasi-static
STILL_RAD_S = 0.01  # every joint under this speed: a quasi-static row
NAMES = ("payload_mass", "payload_com_x", "payload_com_y", "payload_com_z") + tuple(f"tau_offset_j{j}" for j in range(1, 8))
DYNAMIC = ("payload_ixx", "payload_iyy", "payload_izz") + tuple(
    f"{g}_j{j}" for g in ("mu_static", "dynamic_ratio", "mu_viscous") for j in range(1, 8))


def sample_rate_hz(runs: list) -> float:
    """The slowest run's sample rate [Hz] from its recorded times (1 kHz when none is recorded)."""
    rates = []
    for r in runs:
        t = None if r.t_s is None else r.t_s[np.isfinite(r.t_s)]
        rates.append(1000.0 if t is None or len(t) < 3 else 1.0 / max(float(np.median(np.diff(t))), 1e-9))
    return min(rates)


@dataclass
class QuasiStatic:
    """The solution: x (11,) (mass [kg], CoM (3,) [m] flange frame, offsets (7,) [N·m]), its
    unconstrained start, standard errors (11,) (NaN: not finite), the undetermined share per
    entry, rows used, residual σ per joint [N·m], the rate [Hz], the reason the dynamic
    parameters are not identified."""

    x: np.ndarray
    stderr: np.ndarray
    share: np.ndarray
    rows: int
    sigma_nm: np.ndarray
    rate_hz: float
    reason: str
    poses: int


def _rows(runs, rigid):
    """Stacked quasi-static rows: (gravity regressor of link 7 (n, 7, 4), known links' gravity (n, 7), tau (n, 7), q)."""
    qs, taus = [], []
    for r in runs:
        ok = np.all(np.isfinite(r.q), axis=1) & np.all(np.isfinite(r.tau), axis=1) & np.all(np.isfinite(r.dq), axis=1)
        still = ok & np.all(np.abs(np.nan_to_num(r.dq)) < STILL_RAD_S, axis=1)
        qs.append(r.q[still])
        taus.append(r.tau[still])
    q, tau = np.vstack(qs), np.vstack(taus)
    if len(q) < 3:
        raise DataError("low-rate robot state: fewer than 3 rows at rest (every |dq| < "
                         f"{STILL_RAD_S} rad/s): nothing quasi-static to identify")
    zeros = np.zeros_like(q)
    y_full = rigid.regressor(q, zeros, zeros, gravity=True)
    return y_full[:, :, 60:64], y_full @ rigid.theta_nominal, tau, q


def solve(runs: list, rigid, rate_hz: float) -> QuasiStatic:
    """The QuasiStatic solution of the runs' rows at rest (module docstring)."""
    g7, known, tau, q = _rows(runs, rigid)
    y = tau - known
    r, p = rigid.flange_rotation, rigid.flange_position_m
    bounds = dict(zip(LAYOUT.names, LAYOUT.bounds))

    def model(x):
        m, c = x[0], p + r @ x[1:4]
        return np.einsum("tjc,c->tj", g7, np.concatenate([[m], m * c])) + x[None, 4:]

    def jac(x):
        m, c = x[0], p + r @ x[1:4]
        out = np.zeros(y.shape + (11,))
        out[:, :, 0] = g7[:, :, 0] + g7[:, :, 1:4] @ c
        out[:, :, 1:4] = m * (g7[:, :, 1:4] @ r)
        out[:, :, 4:] = np.eye(7)[None, :, :]
        return out.reshape(-1, 11)

    lo = np.array([2e-7, *[bounds["payload_com_x"][0]] * 3, *[-np.inf] * 7])
    hi = np.array([bounds["payload_mass"][1], *[bounds["payload_com_x"][1]] * 3, *[np.inf] * 7])
    x0 = np.concatenate([[0.5 * (lo[0] + min(hi[0], 1.0))], np.zeros(3), np.median(y, axis=0)])
    sol = optimize.least_squares(lambda x: (model(x) - y).reshape(-1), x0, jac=jac, bounds=(lo, hi), method="trf",
                                 xtol=1e-12, ftol=1e-12, gtol=1e-12)
    resid = (model(sol.x) - y)
    sigma = np.sqrt(np.mean(resid ** 2, axis=0))
    j = jac(sol.x) / np.repeat(np.maximum(sigma, 1e-6)[None, :], len(y), axis=0).reshape(-1, 1)
    normal = j.T @ j
    cov = np.linalg.pinv(normal)
    base = analyse(normal, list(NAMES))
    share = np.array([base.undetermined_share(np.eye(11)[i]) for i in range(11)])
    se = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
    poses = len(np.unique(np.round(q, 2), axis=0))
    reason = (f"robot state at {rate_hz:.0f} Hz (below {LOW_RATE_HZ:g} Hz): no acceleration is differentiated from it, "
              f"so only the {len(y)} rows at rest (every |dq| < {STILL_RAD_S} rad/s) are used, as the static "
              "equation; the dynamic parameters (inertia, friction, viscous) are not identified from them")
    return QuasiStatic(sol.x, se, share, int(len(y)), sigma, rate_hz, reason, poses)


def entries(qs: QuasiStatic, start_values: dict[str, float], undetermined: float = 1e-3) -> list[dict]:
    """identifiability_json parameter entries (the route's form) for every LAYOUT parameter."""
    out = []
    fitted = dict(zip(NAMES[:4], qs.x[:4]))
    for i, name in enumerate(LAYOUT.names):
        lo, hi = LAYOUT.bounds[i]
        entry = {"name": name, "value": float(fitted.get(name, start_values[name])), "free": False, "stderr": None,
                 "ci95_low": None, "ci95_high": None, "lower_bound": float(lo), "upper_bound": float(hi),
                 "seed_min": None, "seed_max": None, "flags": [], "unconstrained_value": None, "prior": None}
        if name in fitted:
            k = NAMES.index(name)
            se = float(qs.stderr[k]) if np.isfinite(qs.stderr[k]) else None
            entry.update(free=True, stderr=se, undetermined_share=round(float(qs.share[k]), 6))
            if se is not None:
                entry.update(ci95_low=entry["value"] - 1.96 * se, ci95_high=entry["value"] + 1.96 * se)
            if qs.share[k] > undetermined or se is None:
                entry["flags"].append("unidentifiable")
        elif name in DYNAMIC:
            entry.update(free=True, flags=["unidentifiable"], reason=qs.reason)
        out.append(entry)
    return out


__all__ = ["DYNAMIC", "LOW_RATE_HZ", "NAMES", "QuasiStatic", "STILL_RAD_S", "entries", "sample_rate_hz", "solve"]
