"""The torque equations of one filtered segment: the known part, the columns and the rows used.

Row (k, j) of a segment says  y_kj = τ_j(k − d) − known_kj = A_kj · β + e_kj,  with
β = [rigid-body parameters (payload θ and/or the links' θ, 10 per body) | joint-local
parameters, group-major (group c of joint j at k_rigid + 7c + j)]. A is kept as two blocks:
R (T, 7, k_rigid) — the regressor's columns of the freed bodies — and L (T, 7, g) — joint j's
own columns (friction_basis.joint_columns) in row j only; the normal matrix is assembled from
them without ever forming the dense (7T, p) matrix.

Which rows are used: every recorded (usable) row under tanh; on the commanded route under
Stribeck the rows the rest rule keeps (soft_friction.py, applied by `with_rest_rule` once the
breakaway levels it needs are estimated). On the measured route every recorded row, whatever
the law: a row where joint j stands still (|filtered q̇_j| < STANDSTILL_SPEED_RAD_S) is the
static equation of the links and the payload; joint j's link-side friction there is
set-valued, a bounded unknown in [−mu_s, mu_s] left in the equation error (its friction-level
columns are zero on those rows), not a reason to drop the row.

known (T, 7) [N·m]:
- commanded: the nominal links' velocity and acceleration torque (their gravity is what the
  firmware compensates) minus the configured load's gravity (the firmware compensates it too);
- measured: the nominal links' whole torque, gravity included (none when the links are freed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..inputs.derivatives import Segment, lowpass
from .friction_basis import joint_columns
from .regressor import BODY_PARAMS, LINKS, RigidBodyModel
from .soft_friction import REST_VARIANTS, RestRule

FLANGE_LINK = LINKS - 1  # link 7's block in Pinocchio's θ
# Below this filtered speed a joint stands still for the measured route's standstill rows: a
# tenth of the friction columns' velocity scale, where tanh(q̇/v) is under 0.1 and the sign
# of q̇ is the noise's.
STANDSTILL_SPEED_RAD_S = 0.002
LEVEL_COLUMNS = ("mu_static", "mu_dynamic")


@dataclass(frozen=True)
class EquationSpec:
    """What the equations contain: the signal, the friction law, the joint-local groups
    (friction_basis), whether the payload and/or the links are free, the configured load's
    link-7-frame θ (10,) (commanded route) and the delays scanned."""

    signal: str
    law: str
    joint_groups: tuple[str, ...]
    payload: bool
    links: bool
    configured_theta: tuple[float, ...] = (0.0,) * 10
    delays: tuple[int, ...] = (0,)

    @property
    def bodies(self) -> list[str]:
        """The freed rigid bodies, in β's order."""
        if self.links:
            return [f"link{i}" for i in range(1, LINKS + 1)]
        return ["payload"] if self.payload else []

    def local_names(self) -> list[str]:
        """The joint-local column names of one joint, in order (a law may give two columns)."""
        cols = joint_columns(self.joint_groups, self.law, np.zeros(1), np.zeros(1), np.zeros(1))
        return list(cols)

    def names(self) -> list[str]:
        """β's parameter names."""
        rigid = [f"{b}_{p}" for b in self.bodies for p in BODY_PARAMS]
        local = [f"{c}_j{j}" for c in self.local_names() for j in range(1, 8)]
        return rigid + local


@dataclass
class SegmentEquations:
    """One segment's blocks at its T sampled ticks `index` (into the segment's full-rate
    ticks): R (T, 7, k), L (T, 7, g), known (T, 7), rows (T, 7) bool used, seq (T,); the
    torques tau (filtered) and tau_raw (as recorded) at the full rate (T_full, 7);
    variant_rows: per soft_friction.REST_VARIANTS the rows (T, 7) that rule would use
    (Stribeck; empty under tanh, where no row is left out); recorded (T, 7) the rows before
    any rest rule, dq and ddq (T_full, 7) the filtered signals it reads [rad/s, rad/s²] and
    reach [ticks] how far the filter spreads a row; standstill (T, 7) the measured route's
    rows where the joint stands still (friction levels zero there); inertia_diag (T, 7) [kg·m²] the
    nominal links' M_jj(q) (zeros without an armature column) and dq_residual (U, 7) [rad/s]
    the recorded minus the low-passed dq on the usable ticks, with cutoff_hz: what
    noise_bias.py needs."""

    R: np.ndarray
    L: np.ndarray
    known: np.ndarray
    tau: np.ndarray
    tau_raw: np.ndarray
    rows: np.ndarray
    seq: np.ndarray
    index: np.ndarray
    variant_rows: tuple[np.ndarray, ...] = ()
    recorded: np.ndarray | None = None
    dq: np.ndarray | None = None
    ddq: np.ndarray | None = None
    reach: int = 0
    inertia_diag: np.ndarray | None = None
    dq_residual: np.ndarray | None = None
    cutoff_hz: float = 0.0
    standstill: np.ndarray | None = None

    def target(self, delay: int, raw: bool = False) -> np.ndarray:
        """y (T, 7) = τ(k − delay) − known (NaN where k − delay is before the segment)."""
        tau = self.tau_raw if raw else self.tau
        src = self.index - delay
        y = tau[np.maximum(src, 0)] - self.known
        y[src < 0] = np.nan
        return y

    def predict(self, beta: np.ndarray) -> np.ndarray:
        """A·β (T, 7) [N·m] (without the known part)."""
        k = self.R.shape[2]
        g = self.L.shape[2]
        local = beta[k:].reshape(g, 7)  # group-major
        return self.R @ beta[:k] + np.einsum("tjc,cj->tj", self.L, local)


def build(seg: Segment, spec: EquationSpec, rigid: RigidBodyModel, step: int = 1) -> SegmentEquations:
    """The equations of one segment (module docstring) at every `step`-th tick (the signals
    are low-passed first, so a step up to f_s / (4 f_c) loses no information)."""
    usable = seg.usable.copy()
    dmax = max(spec.delays)
    for d in range(1, dmax + 1):  # the delayed torque rows must be recorded ones
        usable[d:] &= seg.usable[:len(seg.usable) - d]
    usable[:dmax] = False
    index = np.arange(0, len(seg.seq), max(1, int(step)))
    q, dq, ddq = seg.q[index], seg.dq[index], seg.ddq[index]
    y_full = rigid.regressor(q, dq, ddq, gravity=True)
    nominal = rigid.theta_nominal
    if spec.signal == "commanded":  # the firmware compensates the nominal links' and the configured load's gravity
        known = y_full @ nominal - rigid.gravity_torque(q, np.asarray(spec.configured_theta))
    else:
        known = np.zeros(q.shape) if spec.links else y_full @ nominal
    if spec.links:
        R = y_full
    elif spec.payload:
        R = y_full[:, :, 10 * FLANGE_LINK:]
    else:
        R = np.zeros((len(q), 7, 0))
    local = []
    rows = np.repeat(usable[index, None], 7, axis=1)
    still = np.abs(dq) < STANDSTILL_SPEED_RAD_S if spec.signal == "measured" else np.zeros(q.shape, dtype=bool)
    for j in range(7):  # formed at the full rate from the recorded dq, then filtered as the torque
        cols = joint_columns(spec.joint_groups, spec.law, seg.dq_raw[:, j], seg.dq_next[:, j], seg.ddq[:, j])
        full = np.column_stack(list(cols.values())) if cols else np.zeros((len(seg.seq), 0))
        smooth = lowpass(full, seg.cutoff_hz) if full.shape[1] else full
        for c, name in enumerate(cols):
            if name in ("armature", "mu_viscous"):  # linear in filtered signals already
                smooth[:, c] = full[:, c]
        smooth = smooth[index]
        for c, name in enumerate(cols):
            if name in LEVEL_COLUMNS:  # standing still: the level is a bounded unknown, not sign(noise)·mu
                smooth[still[:, j], c] = 0.0
        local.append(smooth)
    L = np.stack(local, axis=1)
    inertia = rigid.inertia_diagonal(q) if "armature" in spec.joint_groups else np.zeros(q.shape)
    return SegmentEquations(R=np.ascontiguousarray(R), L=L, known=known, tau=seg.tau, tau_raw=seg.tau_raw, rows=rows,
                            seq=seg.seq[index], index=index, recorded=rows.copy(), dq=seg.dq, ddq=seg.ddq,
                            reach=int(np.ceil(1000.0 / seg.cutoff_hz)), inertia_diag=inertia,
                            dq_residual=(seg.dq_raw - seg.dq)[seg.usable], cutoff_hz=float(seg.cutoff_hz),
                            standstill=still)


def with_rest_rule(eq: SegmentEquations, rule: RestRule | None) -> SegmentEquations:
    """`eq` with the rows (and the REST_VARIANTS' rows) `rule` keeps (soft_friction.py); with
    no rule (the tanh law: nothing set-valued) every recorded row and no variants."""
    if rule is None:
        return replace(eq, rows=eq.recorded.copy(), variant_rows=())
    rows = eq.recorded.copy()
    variant_rows = tuple(eq.recorded.copy() for _ in REST_VARIANTS)
    for j in range(7):
        rows[:, j] &= rule.at_level(j, eq.dq[:, j], eq.ddq[:, j], eq.reach)[eq.index]
        for v, alt in zip(REST_VARIANTS, variant_rows):
            alt[:, j] &= rule.at_level(j, eq.dq[:, j], eq.ddq[:, j], int(round(eq.reach * v.reach_factor)),
                                       v.margin_factor)[eq.index]
    return replace(eq, rows=rows, variant_rows=variant_rows)


def normal_equations(eqs: list[SegmentEquations], weights: np.ndarray, targets: list[np.ndarray]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """N (p, p) = Σ AᵀWA and b (p, D) = Σ AᵀWy over the used rows; weights (7,) per joint;
    targets: per segment a (T, 7, D) stack of D right-hand sides."""
    k, g = eqs[0].R.shape[2], eqs[0].L.shape[2]
    p = k + 7 * g
    n_mat = np.zeros((p, p))
    d = targets[0].shape[2]
    b = np.zeros((p, d))
    for eq, y in zip(eqs, targets):
        for j in range(7):
            use = eq.rows[:, j]
            r, loc, yj = eq.R[use, j, :], eq.L[use, j, :], y[use, j, :]
            w = weights[j]
            idx = k + 7 * np.arange(g) + j
            n_mat[:k, :k] += w * (r.T @ r)
            cross = w * (r.T @ loc)
            n_mat[:k, idx] += cross
            n_mat[idx, :k] += cross.T
            n_mat[np.ix_(idx, idx)] += w * (loc.T @ loc)
            b[:k] += w * (r.T @ yj)
            b[idx] += w * (loc.T @ yj)
    return n_mat, b


def scores(eq: SegmentEquations, weights: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """g (T, p): per tick Σ_j w_j a_tj e_tj over the used rows (zero elsewhere)."""
    k, g = eq.R.shape[2], eq.L.shape[2]
    e = np.where(eq.rows, np.nan_to_num(residual), 0.0) * weights[None, :]
    out = np.zeros((len(e), k + 7 * g))
    out[:, :k] = np.einsum("tjc,tj->tc", eq.R, e)
    out[:, k:] = np.einsum("tjc,tj->tcj", eq.L, e).reshape(len(e), 7 * g)
    return out


__all__ = ["STANDSTILL_SPEED_RAD_S", "EquationSpec", "SegmentEquations", "build", "normal_equations", "scores", "with_rest_rule"]
