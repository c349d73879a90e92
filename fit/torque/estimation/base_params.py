"""Identifiable (base) parameters from the data: which combinations of the named parameters the
torque equations determine, and a stated prior that holds the rest at the nominal model.

Method: the weighted normal matrix N = AᵀWA (p × p) is scaled to unit diagonal
(D = diag(N)^−½, Ns = D·N·D) and diagonalised. A direction v with eigenvalue
λ < `UNIDENTIFIABLE_RATIO`² · λ_max (singular value ratio 1e-6) is unidentifiable: the data do not
move the fit along it. Each is reported as the combination of named parameters it is
(components D·v over 0.1 of the largest, in the parameters' own units), and the prior
ρ·(β − β_nom)ᵀ P (β − β_nom), P = Σ (D v)(D v)ᵀ / |D v|², with ρ = `PRIOR_WEIGHT` · λ_max of N,
holds the fit at the nominal model along exactly those directions and nowhere else: it is
never a silent zero. Directions with a ratio below 1e-3 are listed as weak (identified, but
with large error bars).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

UNIDENTIFIABLE_RATIO = 1e-6
WEAK_RATIO = 1e-3
PRIOR_WEIGHT = 1e-6
COMPONENT_SHOWN = 0.1


@dataclass
class Identifiability:
    """Base-parameter analysis of one normal matrix: the prior matrix (p, p) to add to N and
    the directions found (each: 'ratio' of singular values, 'components' name -> weight)."""

    prior: np.ndarray
    null_scaled: np.ndarray | None = None  # (p, k) the unidentifiable directions, unit, in unit-diagonal coordinates
    scale: np.ndarray | None = None  # (p,) diag(N)^−½ (1 for a column never excited): β = scale ∘ u
    unidentifiable: list[dict] = field(default_factory=list)
    weak: list[dict] = field(default_factory=list)
    rank: int = 0
    condition_number: float = float("nan")

    def undetermined_share(self, gradient: np.ndarray) -> float:
        """The share (0..1) of a linear functional's gradient (p,) (β's units) that lies along
        the unidentifiable directions, in unit-diagonal coordinates: 0 the data determine it, 1
        only the prior does."""
        g = np.asarray(gradient, float) * self.scale
        size = float(np.linalg.norm(g))
        if self.null_scaled is None or self.null_scaled.shape[1] == 0 or size == 0:
            return 0.0
        return float(np.linalg.norm(self.null_scaled.T @ g) / size)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "condition_number": self.condition_number,
                "unidentifiable": self.unidentifiable, "weak": self.weak,
                "prior": f"held at the nominal model along the unidentifiable directions, weight "
                         f"{PRIOR_WEIGHT:g} x the largest eigenvalue of the normal matrix"}


def _combination(names: list[str], direction: np.ndarray) -> dict[str, float]:
    big = np.abs(direction).max()
    order = np.argsort(-np.abs(direction))
    return {names[i]: round(float(direction[i] / big), 4) for i in order if abs(direction[i]) >= COMPONENT_SHOWN * big}


def analyse(normal: np.ndarray, names: list[str]) -> Identifiability:
    """The base-parameter analysis of a normal matrix (p, p) with parameter names (p,). A
    column the data never excite (zero diagonal) is reported on its own; the eigen-analysis
    runs over the others."""
    p = len(names)
    diag = np.diag(normal).copy()
    rho = PRIOR_WEIGHT * float(np.max(diag)) if p and np.max(diag) > 0 else 1.0
    out = Identifiability(prior=np.zeros((p, p)))
    dead = np.nonzero(diag <= 0)[0]
    out.scale = np.where(diag > 0, 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0)), 1.0)
    null = []
    for j in dead:
        null.append(np.eye(p)[j])
        out.prior[j, j] += rho
        out.unidentifiable.append({"ratio": 0.0, "components": {names[j]: 1.0}, "reason": "never excited"})
    live = np.nonzero(diag > 0)[0]
    if len(live):
        scale = 1.0 / np.sqrt(diag[live])
        scaled = normal[np.ix_(live, live)] * scale[:, None] * scale[None, :]
        eig, vec = np.linalg.eigh(scaled)
        ratio = np.sqrt(np.maximum(eig, 0.0) / max(eig.max(), 1e-300))
        live_names = [names[i] for i in live]
        for i in np.argsort(ratio):
            direction = scale * vec[:, i]
            if ratio[i] < UNIDENTIFIABLE_RATIO:
                full = np.zeros(p)
                full[live] = vec[:, i]
                null.append(full)
                unit = direction / np.linalg.norm(direction)
                out.prior[np.ix_(live, live)] += rho * np.outer(unit, unit)
                out.unidentifiable.append({"ratio": float(ratio[i]), "components": _combination(live_names, direction)})
            elif ratio[i] < WEAK_RATIO:
                out.weak.append({"ratio": float(ratio[i]), "components": _combination(live_names, direction)})
        kept = ratio[ratio >= UNIDENTIFIABLE_RATIO]
    out.null_scaled = np.column_stack(null) if null else np.zeros((p, 0))
    if len(live):
        out.rank = int(len(kept))
        out.condition_number = float(1.0 / kept.min()) if len(kept) else float("inf")
    return out


__all__ = ["Identifiability", "PRIOR_WEIGHT", "UNIDENTIFIABLE_RATIO", "WEAK_RATIO", "analyse"]
