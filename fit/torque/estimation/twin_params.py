"""From a torque Solution to the twin's parameters: DynamicsParams, and error bars in the same
`identifiability_json` form the replay fit stores (so `fit show` and `fit compare` read both).

Mapping (commanded route): armature, mu_static, mu_viscous, coulomb_asymmetry and tau_bias
are β's entries of those names; dynamic_ratio = mu_dynamic / mu_static (Stribeck; clipped to
the twin's [0, 1]); the payload's mass, centre of mass (flange frame) and the diagonal of its
inertia about the centre of mass (flange axes; the twin holds no products of inertia, they are
kept in torque_json) from its link-7-frame θ (regressor.payload_from_theta); the delay is the
scanned one (discrete, no error bar; flagged unidentifiable when an adjacent delay fits within
the χ² 95 % point, findings.delay_undetermined). Error bars of derived values by the delta method (a
central-difference Jacobian of the map). Groups the route did not estimate keep the nominal
value (the `start` parameters) and are reported as not free.
"""

from __future__ import annotations

import json

import numpy as np

from ....sim import LAYOUT, DynamicsParams
from ...core.parameter_status import UNIDENTIFIED_HALF_WIDTH as UNIDENTIFIABLE_HALF_WIDTH
from ..model.regressor import RigidBodyModel
from .solve import Solution

PAYLOAD_NAMES = ("payload_mass", "payload_com_x", "payload_com_y", "payload_com_z",
                 "payload_ixx", "payload_iyy", "payload_izz")
DIRECT_GROUPS = ("armature", "mu_static", "mu_viscous", "coulomb_asymmetry", "tau_bias")
COVARIANCE_METHOD = "torque_hac_plus_rest_systematic"  # identifiability_json["covariance"]["method"]
# A twin parameter's gradient (in β's unit-diagonal coordinates) with this share along the
# unidentifiable directions is set by the prior alone ("held at a prior"); above
# UNDETERMINED_SHARE the data leave part of it undetermined (flag "unidentifiable").
HELD_SHARE = 0.999
UNDETERMINED_SHARE = 1e-3


def _payload_values(rigid: RigidBodyModel, theta: np.ndarray) -> np.ndarray:
    m, com, inertia = rigid.payload_from_theta(theta)
    return np.array([m, *com, *np.diag(inertia)])


def derived(sol: Solution, rigid: RigidBodyModel, beta: np.ndarray) -> dict[str, float]:
    """The twin parameter names this solution determines -> value at β."""
    index = {n: i for i, n in enumerate(sol.names)}
    out: dict[str, float] = {}
    for group in DIRECT_GROUPS:
        for j in range(1, 8):
            name = f"{group}_j{j}"
            if name in index:
                out[name] = float(beta[index[name]])
    for j in range(1, 8):
        if f"mu_dynamic_j{j}" in index:
            mu_s, mu_d = beta[index[f"mu_static_j{j}"]], beta[index[f"mu_dynamic_j{j}"]]
            out[f"dynamic_ratio_j{j}"] = float(mu_d / mu_s) if mu_s > 1e-9 else 1.0
    if "payload_m" in index:
        start = index["payload_m"]
        out.update(zip(PAYLOAD_NAMES, _payload_values(rigid, beta[start:start + 10]).tolist()))
    return out


def delta_covariance(sol: Solution, rigid: RigidBodyModel) -> tuple[list[str], np.ndarray]:
    """The `derived` values' names (LAYOUT order) and their covariance (k, k) by the delta method
    at β (a central-difference Jacobian; `sol.cov`: HAC plus the systematic part)."""
    names, cov, _ = delta_method(sol, rigid)
    return names, cov


def delta_method(sol: Solution, rigid: RigidBodyModel) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(`derived` names in LAYOUT order, their covariance (k, k), the Jacobian (k, p) of the map
    β -> them at β)."""
    found = derived(sol, rigid, sol.beta)
    names = [n for n in LAYOUT.names if n in found]
    jac = np.zeros((len(names), len(sol.beta)))
    step = 1e-6 * np.maximum(np.abs(sol.beta), 1e-3)
    for i in range(len(sol.beta)):
        up, down = sol.beta.copy(), sol.beta.copy()
        up[i] += step[i]
        down[i] -= step[i]
        fu, fd = derived(sol, rigid, up), derived(sol, rigid, down)
        jac[:, i] = [(fu[n] - fd[n]) / (2 * step[i]) for n in names]
    cov = jac @ sol.cov @ jac.T
    return names, 0.5 * (cov + cov.T), jac


def dynamics_params(sol: Solution, rigid: RigidBodyModel, start: DynamicsParams) -> DynamicsParams:
    """`start` with every parameter the solution determines replaced (ratio clipped to [0, 1],
    payload inertia clipped at 0, delay = the scanned one when the delay was scanned)."""
    values = LAYOUT.named(start)
    for name, value in derived(sol, rigid, sol.beta).items():
        group = LAYOUT.group_of(name)
        if group.per_joint:
            values[group.name][LAYOUT.joint_of(name) - 1] = value
        else:
            values[group.name] = value
    values["dynamic_ratio"] = np.clip(values["dynamic_ratio"], 0.0, 1.0).tolist()
    for axis in "xyz":
        values[f"payload_i{axis}{axis}"] = max(0.0, values[f"payload_i{axis}{axis}"])
    values["payload_mass"] = max(0.0, values["payload_mass"])
    if sol.notes.delay_scanned:
        values["motor_delay_ms"] = int(sol.delay)
    return DynamicsParams.from_vector(LAYOUT.vector(values))


def identifiability_json(sol: Solution, rigid: RigidBodyModel, params: DynamicsParams, note: str | None = None) -> str:
    """The replay fit's identifiability_json form: one entry per twin parameter (free = this
    route determined it), standard errors from `sol.cov` (HAC plus the systematic part), normal
    95 % intervals, the base-parameter directions as weak directions, flags `constrained` /
    `unidentifiable` (an unidentifiable base direction, or — the replay fit's rule,
    fit/trust/identifiability.py — a 95 % half-width over half the bound range); per parameter
    `unconstrained_value` (at β̂, before bounds and consistency), `prior` (the value the prior
    holds it at when only the prior sets it) and `undetermined_share`, the inputs of
    fit/core/parameter_status; no non-finite or subnormal number (`finite`); `note` (what the bars contain, `fit show` prints it) as `error_bar_note`;
    the free parameters' full covariance (delta method, their own units) as `covariance`."""
    names, cov, jac = delta_method(sol, rigid)
    stderr = {n: finite(np.sqrt(v)) if v >= 0 else None for n, v in zip(names, np.diag(cov))}
    share = {n: sol.base.undetermined_share(g) for n, g in zip(names, jac)}
    free_values = derived(sol, rigid, sol.beta_hat)
    vec = LAYOUT.vector(LAYOUT.named(params))
    entries = []
    for i, name in enumerate(LAYOUT.names):
        lo, hi = LAYOUT.bounds[i]
        fitted = name in share
        se = stderr.get(name)
        value = finite(vec[i])
        flags, prior = [], None
        if fitted and sol.constrained:
            flags.append("constrained")
        if fitted and share[name] > HELD_SHARE:  # only the prior sets it: held at the nominal model
            prior = value
        elif fitted and (share[name] > UNDETERMINED_SHARE or se is None):
            flags.append("unidentifiable")
        elif se is not None and 1.96 * se > UNIDENTIFIABLE_HALF_WIDTH * (hi - lo):  # the replay fit's own rule
            flags.append("unidentifiable")
        if name == "motor_delay_ms" and sol.notes.delay_scanned and sol.notes.delay_undetermined:
            flags.append("unidentifiable")  # the scan's neighbours fit as well (findings.delay_undetermined)
        entries.append({"name": name, "value": value, "free": fitted,
                        "stderr": se, "ci95_low": None if se is None else finite(value - 1.96 * se),
                        "ci95_high": None if se is None else finite(value + 1.96 * se),
                        "lower_bound": float(lo), "upper_bound": float(hi), "seed_min": None, "seed_max": None,
                        "flags": flags, "unconstrained_value": finite(free_values.get(name, np.nan)) if fitted else None,
                        "prior": prior, "undetermined_share": round(share[name], 6) if name in share else None}
                       | ({"scanned": bool(sol.notes.delay_scanned)} if name == "motor_delay_ms" else {}))
    weak = [{"singular_value": d["ratio"], "half_width_fraction": None, "components": d["components"]}
            for d in sol.base.unidentifiable + sol.base.weak]
    return json.dumps({"method": "torque_wls_hac_v1",
                       "jacobian": "the torque equations' regressor (linear in the parameters)",
                       "condition_number": sol.base.condition_number, "sigma2": None, "dof": int(sol.rows),
                       "parameters": entries, "weak_directions": weak, "seeds": 0, "error_bar_note": note,
                       "covariance": {"names": names, "method": COVARIANCE_METHOD, "bandwidth_ticks": int(sol.bandwidth),
                                      "dof": int(sol.rows), "description": (note or "").removeprefix("error bars: "),
                                      "matrix": [[finite(v, 0.0) for v in row] for row in cov]}})


def finite(x: float, fallback: float | None = None) -> float | None:
    """x as a float for a stored record: `fallback` when not finite, 0.0 when subnormal (a
    denormal is a zero the solver did not round; nothing measured is that small)."""
    x = float(x)
    if not np.isfinite(x):
        return fallback
    return 0.0 if abs(x) < np.finfo(float).tiny else x


__all__ = ["COVARIANCE_METHOD", "DIRECT_GROUPS", "HELD_SHARE", "PAYLOAD_NAMES", "UNDETERMINED_SHARE", "delta_covariance",
           "delta_method", "derived", "dynamics_params", "finite", "identifiability_json"]
