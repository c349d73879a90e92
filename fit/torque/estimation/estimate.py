"""Weighted least squares of the torque equations, physical consistency and a correlation-robust
covariance.

- **Weights**: one noise level σ_j per joint, from the data: the residual standard deviation
  of joint j after an equally weighted first solve; rows of joint j weigh 1/σ_j².
- **Solve**: β̂ = (N + P)⁻¹ (b + P β_nom), N = Σ AᵀWA, b = Σ AᵀWy, P the prior of
  base_params.analyse (zero where the data identify the parameters).
- **Bounds and physical consistency** (`constrain`): when β̂ breaks a bound (the parameter
  layout's, both sides: friction, viscous, armature, asymmetry, bias; the payload's mass,
  centre of mass and moments) or a body's pseudo-inertia is not positive definite (mass > 0,
  inertia positive definite and meeting the triangle inequalities), the same weighted
  criterion (β − β̂)ᵀ(N + P)(β − β̂) — the bounded least-squares problem itself, up to a
  constant — is minimised over box-bounded linear parameters and bodies: the links in
  log-Cholesky coordinates (Rucker & Wensing 2022, RA-L 7(2)), the payload in (mass, centre
  of mass, log-Cholesky of its second moment about the centre of mass), whose mass and
  centre-of-mass bounds are then box bounds (scipy `least_squares`, TRF).
- **Covariance** (`hac_covariance`): Cov = (N+P)⁻¹ S (N+P)⁻¹ with S the Newey–West (Bartlett
  kernel) long-run covariance of the per-tick scores g_t = Σ_j w_j a_tj e_tj, bandwidth L from
  Andrews' (1991) AR(1) plug-in rule on the residuals (at most a tenth of the samples), so
  time-correlated equation errors widen the bars instead of shrinking them. The Bartlett sum
  is computed exactly as overlapping block sums: S = (1/L)·Σ_t h_t h_tᵀ, h_t = Σ_{s=t}^{t+L−1} g_s,
  per segment (zeros where a row was left out). The error bars are those of the unconstrained
  estimate; a parameter moved by the constraints is flagged `constrained`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from threadpoolctl import threadpool_limits


@dataclass
class BodyBlock:
    """Ten consecutive parameters (Pinocchio's order) that must be a physical rigid body.
    A body with `mass_kg` / `com_m` bounds (the flange payload: the layout's payload_mass and
    payload_com_* bounds) is solved in (mass, centre of mass, log-Cholesky of its second moment
    about the centre of mass) so those bounds are box bounds; `inertia_max_kgm2` caps its
    principal moments about the centre of mass (the layout's payload_i* upper bound). Those
    bounds hold in the frame (`frame_rotation` (3, 3), `frame_position_m` (3,)) given in the
    body's own (the flange frame in link 7's)."""

    start: int
    mass_kg: tuple[float, float] | None = None
    com_m: tuple[float, float] | None = None
    inertia_max_kgm2: float | None = None
    frame_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    frame_position_m: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @property
    def bounded(self) -> bool:
        return self.mass_kg is not None


# The smallest eigenvalue every identified body's pseudo-inertia keeps [kg·m² on the Σ block,
# kg on the mass]: a body the data push onto the physical boundary (a link whose principal
# moments the torques cannot tell apart ends planar, A + B = C) stays 2e-7 kg·m² inside the
# triangle inequalities, so the 9 digits an MJCF export writes do not break them (MuJoCo
# refuses A + B < C).
PSEUDO_INERTIA_MARGIN = 1e-7


def pseudo_inertia(theta: np.ndarray) -> np.ndarray:
    """The 4 × 4 pseudo-inertia J = [[Σ, h], [hᵀ, m]], Σ = ½ tr(I)·1 − I, of θ (10,)."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = theta
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    j = np.zeros((4, 4))
    j[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    j[:3, 3] = j[3, :3] = (hx, hy, hz)
    j[3, 3] = m
    return j


def theta_from_pseudo(j: np.ndarray) -> np.ndarray:
    """θ (10,) of a pseudo-inertia J."""
    sigma = j[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.array([j[3, 3], *j[:3, 3], inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2],
                     inertia[1, 2], inertia[2, 2]])


def from_log_cholesky(z: np.ndarray) -> np.ndarray:
    """θ (10,) of log-Cholesky coordinates z = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3):
    J = U Uᵀ + PSEUDO_INERTIA_MARGIN · 1, so every body it gives is strictly inside the physical set."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = z
    u = np.exp(a) * np.array([[np.exp(d1), s12, s13, t1], [0, np.exp(d2), s23, t2], [0, 0, np.exp(d3), t3],
                              [0, 0, 0, 1.0]])
    return theta_from_pseudo(u @ u.T + PSEUDO_INERTIA_MARGIN * np.eye(4))


def to_log_cholesky(theta: np.ndarray) -> np.ndarray:
    """Log-Cholesky coordinates of θ (`from_log_cholesky`'s inverse); a J with an eigenvalue
    below 2·PSEUDO_INERTIA_MARGIN is first clipped there (the nearest body inside, in that sense)."""
    j = pseudo_inertia(theta)
    w, v = np.linalg.eigh(j)
    j = (v * np.maximum(w, 2.0 * PSEUDO_INERTIA_MARGIN)) @ v.T - PSEUDO_INERTIA_MARGIN * np.eye(4)
    flip = np.eye(4)[::-1]
    lower = np.linalg.cholesky(flip @ j @ flip)
    u = flip @ lower @ flip  # upper triangular, J = U Uᵀ
    s = u[3, 3]
    return np.array([np.log(s), np.log(u[0, 0] / s), np.log(u[1, 1] / s), np.log(u[2, 2] / s),
                     u[0, 1] / s, u[1, 2] / s, u[0, 2] / s, u[0, 3] / s, u[1, 3] / s, u[2, 3] / s])


def from_mass_com(z: np.ndarray, block: BodyBlock) -> np.ndarray:
    """θ (10,) (body frame) of z = (m, cx, cy, cz, d1, d2, d3, s12, s23, s13): mass [kg],
    centre of mass [m] and the second moment about it Σ_c = U Uᵀ + 2·PSEUDO_INERTIA_MARGIN·1 (U
    upper triangular, exp(d) on its diagonal), both in the block's frame, Σ_c scaled down when
    a moment about the centre of mass would exceed the block's `inertia_max_kgm2`."""
    inertia_max = block.inertia_max_kgm2
    m, c = z[0], np.asarray(z[1:4])
    d1, d2, d3, s12, s23, s13 = z[4:]
    u = np.array([[np.exp(d1), s12, s13], [0, np.exp(d2), s23], [0, 0, np.exp(d3)]])
    sigma = u @ u.T + 2.0 * PSEUDO_INERTIA_MARGIN * np.eye(3)
    if inertia_max is not None:
        top = float(np.max(np.trace(sigma) - np.diag(sigma)))
        if top > inertia_max:
            sigma = sigma * (inertia_max / top)
    r = block.frame_rotation
    c = block.frame_position_m + r @ c
    j = np.zeros((4, 4))
    j[:3, :3] = r @ sigma @ r.T + m * np.outer(c, c)
    j[:3, 3] = j[3, :3] = m * c
    j[3, 3] = m
    return theta_from_pseudo(j)


def mass_com_inertia(theta: np.ndarray, block: BodyBlock) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass [kg], centre of mass (3,) [m], second moment about it Σ_c (3, 3) [kg·m²]) of θ in
    the block's frame; the centre of mass is NaN without mass."""
    m = float(theta[0])
    c = np.asarray(theta[1:4]) / m if abs(m) > 1e-12 else np.full(3, np.nan)
    sigma = pseudo_inertia(theta)[:3, :3] - m * np.outer(np.nan_to_num(c), np.nan_to_num(c))
    r = block.frame_rotation
    return m, r.T @ (c - block.frame_position_m), r.T @ sigma @ r


def to_mass_com(theta: np.ndarray, block: BodyBlock) -> np.ndarray:
    """`from_mass_com`'s coordinates of θ, mass and centre of mass clipped into the block's
    bounds and Σ_c's eigenvalues to at least 4·PSEUDO_INERTIA_MARGIN (a start inside)."""
    lo_m, hi_m = block.mass_kg
    m_hat, c, sigma = mass_com_inertia(theta, block)
    m = float(np.clip(m_hat, max(lo_m, 2.0 * PSEUDO_INERTIA_MARGIN), hi_m))
    c = np.clip(np.nan_to_num(c), *block.com_m)
    w, v = np.linalg.eigh(0.5 * (sigma + sigma.T))
    sigma = (v * np.maximum(w, 4.0 * PSEUDO_INERTIA_MARGIN)) @ v.T - 2.0 * PSEUDO_INERTIA_MARGIN * np.eye(3)
    flip = np.eye(3)[::-1]
    u = flip @ np.linalg.cholesky(flip @ sigma @ flip) @ flip
    return np.array([m, *c, np.log(u[0, 0]), np.log(u[1, 1]), np.log(u[2, 2]), u[0, 1], u[1, 2], u[0, 2]])


def body_ok(theta: np.ndarray, block: BodyBlock) -> bool:
    """θ is physical and, for a bounded body, its mass and centre of mass inside the bounds."""
    if not is_physical(theta):
        return False
    if not block.bounded:
        return True
    m, c, sigma = mass_com_inertia(theta, block)
    lo_c, hi_c = block.com_m
    top = float(np.max(np.trace(sigma) - np.diag(sigma)))
    return bool(block.mass_kg[0] <= m <= block.mass_kg[1] and np.all((c >= lo_c) & (c <= hi_c))
                and (block.inertia_max_kgm2 is None or top <= block.inertia_max_kgm2))


def is_physical(theta: np.ndarray) -> bool:
    """Mass > 0 and a positive-definite pseudo-inertia (inertia PD, triangle inequalities), its
    smallest eigenvalue at least half PSEUDO_INERTIA_MARGIN (what `from_log_cholesky` gives, with room for rounding)."""
    return bool(np.linalg.eigvalsh(pseudo_inertia(theta)).min() >= 0.5 * PSEUDO_INERTIA_MARGIN)


def constrain(beta_hat: np.ndarray, normal: np.ndarray, lower: np.ndarray, upper: np.ndarray,
              bodies: list[BodyBlock]) -> tuple[np.ndarray, bool]:
    """The physically consistent β nearest β̂ in the metric of `normal` (p, p); lower/upper (p,)
    bounds of the linear parameters (±inf where none). Returns (β, moved)."""
    in_body = np.zeros(len(beta_hat), dtype=bool)
    for b in bodies:
        in_body[b.start:b.start + 10] = True
    ok = np.all(beta_hat[~in_body] >= lower[~in_body]) and np.all(beta_hat[~in_body] <= upper[~in_body])
    ok = ok and all(body_ok(beta_hat[b.start:b.start + 10], b) for b in bodies)
    if ok:
        return beta_hat.copy(), False
    w, v = np.linalg.eigh(0.5 * (normal + normal.T))
    root = (v * np.sqrt(np.maximum(w, 0.0))).T  # rootᵀ root = normal
    lin = np.nonzero(~in_body)[0]

    def body_of(b: BodyBlock, z: np.ndarray) -> np.ndarray:
        return from_mass_com(z, b) if b.bounded else from_log_cholesky(z)

    def beta_of(x: np.ndarray) -> np.ndarray:
        beta = np.empty_like(beta_hat)
        beta[lin] = x[:len(lin)]
        with np.errstate(over="ignore", invalid="ignore"):  # a trial step may overflow exp: least_squares backs off
            for i, b in enumerate(bodies):
                beta[b.start:b.start + 10] = body_of(b, x[len(lin) + 10 * i:len(lin) + 10 * (i + 1)])
        return beta

    x0 = np.concatenate([np.clip(beta_hat[lin], lower[lin], upper[lin]),
                         *[to_mass_com(beta_hat[b.start:b.start + 10], b) if b.bounded
                           else to_log_cholesky(beta_hat[b.start:b.start + 10]) for b in bodies]])
    lo = np.concatenate([lower[lin], *[_body_box(b)[0] for b in bodies]])
    hi = np.concatenate([upper[lin], *[_body_box(b)[1] for b in bodies]])
    x0 = np.clip(x0, lo, hi)

    def jacobian(x: np.ndarray) -> np.ndarray:
        """root · dβ/dx: identity for the linear parameters, a 10 × 10 central difference per body."""
        d = np.zeros((len(beta_hat), len(x)))
        d[lin, np.arange(len(lin))] = 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            for i, b in enumerate(bodies):
                k = len(lin) + 10 * i
                for c in range(10):
                    up, down = x[k:k + 10].copy(), x[k:k + 10].copy()
                    up[c] += 1e-7
                    down[c] -= 1e-7
                    d[b.start:b.start + 10, k + c] = (body_of(b, up) - body_of(b, down)) / 2e-7
        return root @ d

    # one BLAS thread: TRF takes an SVD of this small (p × p) Jacobian per iteration, which more
    # threads only slow down (on the shared 2 cores: 25 CPU s instead of 4 for a +links fit)
    with np.errstate(over="ignore", invalid="ignore"), threadpool_limits(limits=1, user_api="blas"):
        sol = optimize.least_squares(lambda x: root @ (beta_of(x) - beta_hat), x0, jac=jacobian, bounds=(lo, hi),
                                     method="trf", x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=500)
    return beta_of(sol.x), True


def _body_box(b: BodyBlock) -> tuple[np.ndarray, np.ndarray]:
    """The box of a body's coordinates: mass (at least 2·PSEUDO_INERTIA_MARGIN: a body has
    mass) and centre of mass for a bounded body, none for log-Cholesky."""
    if not b.bounded:
        return np.full(10, -np.inf), np.full(10, np.inf)
    lo = np.full(10, -np.inf)
    hi = np.full(10, np.inf)
    lo[0], hi[0] = max(b.mass_kg[0], 2.0 * PSEUDO_INERTIA_MARGIN), b.mass_kg[1]
    lo[1:4], hi[1:4] = b.com_m
    return lo, hi


def bartlett_bandwidth(residuals: np.ndarray, max_lag: int) -> int:
    """Andrews (1991) AR(1) plug-in bandwidth for the Bartlett kernel from residuals (T, k)
    (NaN rows ignored), clamped to 1..max_lag."""
    num = den = 0.0
    for col in residuals.T:
        x = col[np.isfinite(col)]
        if len(x) < 10:
            continue
        x = x - x.mean()
        var = float(x @ x)
        if var <= 0:
            continue
        rho = float(np.clip((x[1:] @ x[:-1]) / var, -0.999, 0.999))
        s4 = (var / len(x)) ** 2
        num += 4 * rho**2 * s4 / ((1 - rho) ** 6 * (1 + rho) ** 2)
        den += s4 / (1 - rho) ** 4
    if den == 0:
        return 1
    n = len(residuals)
    lag = 1.1447 * (num / den * n) ** (1.0 / 3.0)
    return int(np.clip(np.ceil(lag), 1, max(1, max_lag)))


def hac_long_run(scores: list[np.ndarray], lag: int) -> np.ndarray:
    """Σ over segments of the Bartlett-kernel long-run covariance of the scores (T_s, p):
    (1/L)·Σ_t h_t h_tᵀ with h_t the sums of L consecutive scores (segments shorter than L are
    one block)."""
    p = scores[0].shape[1]
    out = np.zeros((p, p))
    for g in scores:
        width = min(lag, len(g))
        c = np.vstack([np.zeros((1, p)), np.cumsum(g, axis=0)])
        h = c[width:] - c[:-width]
        out += (h.T @ h) / width * (len(g) / (len(g) - width + 1))  # as many blocks as lags
    return out


def hac_covariance(normal: np.ndarray, scores: list[np.ndarray], lag: int) -> np.ndarray:
    """Cov = N⁻¹ S N⁻¹ (pseudo-inverse when singular), S = hac_long_run(scores, lag)."""
    inv = np.linalg.pinv(normal)
    cov = inv @ hac_long_run(scores, lag) @ inv
    return 0.5 * (cov + cov.T)


__all__ = ["BodyBlock", "bartlett_bandwidth", "body_ok", "constrain", "from_log_cholesky", "from_mass_com", "hac_covariance", "hac_long_run",
           "is_physical", "mass_com_inertia", "pseudo_inertia", "theta_from_pseudo", "to_log_cholesky", "to_mass_com"]
