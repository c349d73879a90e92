"""Two fits side by side: per parameter both values, their difference in combined standard
errors, a verdict, and the convention errors a disagreement usually means (`twinlake fit
compare FIT_A FIT_B`; docs/fitting.md, "When two fits disagree").

Per parameter *estimated* in both fits (fit/core/parameter_status.py: free, identified, not
at a bound): z = (b − a) / √(se_a² + se_b²); `agree` when |z| ≤ `threshold` (3 by default),
else `disagree`. A parameter at a bound in one fit and estimated in the other is compared with
the estimate's se alone (the bound is where the first fit's data pushed it; a sign flip shows
as friction pinned at 0 against a positive estimate); two at-bound values agree only when
equal. Every other parameter free in either fit (held at a prior, not identified, fixed in
one) is listed in `not_compared` with both statuses: a held value is not an estimate to test. The whole-ms delay is compared exactly. The
error bars are each fit's own (the torque route's are HAC, the replay fit's linearised); a
disagreement within the bars' own honesty can still be real: look at the size (`rel`).

Causes named when the pattern fits (heuristics, stated as such):
- **torque sign**: in one fit most friction / viscous / armature values that disagree sit at
  their lower bound 0 (or are negative) while the other's are positive: one fit's torques are
  negated (a sign convention of the log or a mapping);
- **gravity counted twice (or not at all)**: the payload mass differs by more than
  `GRAVITY_MASS_KG` or one fit's training torque residual is far above its noise floor while
  the payload/bias terms disagree: gravity is in one fit's torque once more than the model says;
- **friction counted twice**: the friction levels of one fit are about twice (or about 0 ×)
  the other's while the armature agrees (friction compensation added to a torque that has it);
- otherwise a disagreement usually means a replay bug, a torque convention the two fits read
  differently, or an effect one model lacks (`fit validate` on a held-out run tells which fits).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ...sim.arm_model.params import LAYOUT

THRESHOLD = 3.0
GRAVITY_MASS_KG = 1.0
FRICTION_GROUPS = ("mu_static", "mu_viscous", "armature")


@dataclass
class ParameterComparison:
    """One parameter: both values, standard errors (None: no bar), z, relative difference, verdict."""

    name: str
    a: float
    b: float
    se_a: float | None
    se_b: float | None
    z: float | None
    rel: float | None
    verdict: str  # agree | disagree


@dataclass(frozen=True)
class NotCompared:
    """A parameter free in at least one fit but not estimated in both: its value and status in each."""

    name: str
    a: float
    b: float
    status_a: str
    status_b: str


@dataclass
class Comparison:
    """The parameters compared, the overall verdict and the likely causes of a disagreement."""

    fit_a: str
    fit_b: str
    threshold: float
    parameters: list[ParameterComparison] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    not_compared: list[NotCompared] = field(default_factory=list)

    @property
    def disagreeing(self) -> list[ParameterComparison]:
        return [p for p in self.parameters if p.verdict == "disagree"]

    @property
    def verdict(self) -> str:
        return "disagree" if self.disagreeing else "agree"

    def to_dict(self) -> dict:
        def clean(row: dict) -> dict:
            return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}
        return {"fit_a": self.fit_a, "fit_b": self.fit_b, "threshold": self.threshold, "verdict": self.verdict,
                "causes": self.causes, "parameters": [clean(asdict(p)) for p in self.parameters],
                "not_compared": [asdict(p) for p in self.not_compared]}


def _bars(rec) -> dict[str, dict]:
    ident = rec.identifiability or {}
    return {e["name"]: e for e in ident.get("parameters", [])}


def _floor_ratio(rec) -> float | None:
    value = rec.extra.get("train_floor_ratio")
    return None if value is None or not np.isfinite(value) else float(value)


def _parameter(name: str, a: float, b: float, ea: dict, eb: dict, threshold: float) -> ParameterComparison:
    se_a = ea.get("stderr") if ea.get("free") else None
    se_b = eb.get("stderr") if eb.get("free") else None
    if name == "motor_delay_ms":
        z = None if a == b else float("inf")
        return ParameterComparison(name, a, b, None, None, z, None, "agree" if a == b else "disagree")
    parts = [s for s in (se_a, se_b) if s is not None and np.isfinite(s)]
    combined = float(np.sqrt(sum(s * s for s in parts))) if parts else 0.0
    diff = b - a
    z = diff / combined if combined > 0 else (0.0 if diff == 0 else float("inf"))
    rel = abs(diff) / max(abs(a), abs(b)) if max(abs(a), abs(b)) > 0 else 0.0
    return ParameterComparison(name, a, b, se_a, se_b, float(z), float(rel),
                               "agree" if abs(z) <= threshold else "disagree")


def _group(name: str) -> str:
    """The parameter group of a name (`mu_static_j3`: `mu_static`); a name outside the layout
    (a record of another tool's) is its own group."""
    return LAYOUT.group_of(name).name if name in LAYOUT.names else name


def causes(cmp: Comparison, rec_a, rec_b) -> list[str]:
    """The heuristics of the module docstring, as sentences."""
    out = []
    bad = [p for p in cmp.disagreeing if _group(p.name) in FRICTION_GROUPS]
    for label, mine, other in (("A", "a", "b"), ("B", "b", "a")):
        pinned = [p for p in bad if getattr(p, mine) <= 1e-6 and getattr(p, other) > 1e-3]
        if bad and len(pinned) >= max(2, len(bad) // 2):
            out.append(f"torque sign: fit {label}'s friction/armature sit at 0 where the other's are positive "
                       f"({len(pinned)} of {len(bad)} disagreeing): its torques look negated")
    mass = next((p for p in [*cmp.parameters, *cmp.not_compared] if p.name == "payload_mass"), None)
    ratios = [r for r in (_floor_ratio(rec_a), _floor_ratio(rec_b)) if r is not None]
    payloadish = [p for p in cmp.disagreeing if p.name.startswith(("payload", "tau_bias"))] + \
        [p for p in cmp.not_compared if p.name.startswith(("payload", "tau_bias")) and p.a != p.b]
    if (mass is not None and abs(mass.b - mass.a) > GRAVITY_MASS_KG) or (payloadish and ratios and max(ratios) > 10):
        out.append("gravity counted twice (or not at all): the payload / bias terms disagree"
                   + (f" (payload mass {mass.a:.3g} vs {mass.b:.3g} kg)" if mass is not None else "")
                   + (f", worst training residual {max(ratios):.1f}x its floor" if ratios else ""))
    levels = [p for p in cmp.parameters if _group(p.name) in ("mu_static", "mu_viscous") and min(p.a, p.b) > 0.05]
    arm = [p for p in cmp.parameters if _group(p.name) == "armature"]
    if levels and all(p.verdict == "agree" for p in arm):
        ratio = float(np.median([p.b / p.a for p in levels]))
        if abs(ratio - 2.0) < 0.3 or abs(ratio - 0.5) < 0.08:
            out.append(f"friction counted twice: fit B's friction levels are {ratio:.2f}x fit A's while the armature agrees")
    if cmp.disagreeing and not out:
        out.append("no convention pattern: a disagreement usually means a replay bug, a torque convention the fits "
                   "read differently, or an effect one model lacks; validate both on a held-out run")
    return out


def compare_fits(rec_a, rec_b, threshold: float = THRESHOLD) -> Comparison:
    """Compare two FitRecords (module docstring)."""
    from ...sim import LAYOUT
    from .statuses import fit_statuses
    from ..core.parameter_status import Status

    bars_a, bars_b = _bars(rec_a), _bars(rec_b)
    va, vb = rec_a.vector, rec_b.vector
    sa, sb = fit_statuses(rec_a), fit_statuses(rec_b)
    cmp = Comparison(rec_a.fit_id, rec_b.fit_id, float(threshold))
    COMPARABLE = {Status.ESTIMATED, Status.AT_BOUND}  # noqa: N806
    for i, name in enumerate(LAYOUT.names):
        ea, eb = bars_a.get(name, {}), bars_b.get(name, {})
        if sa[i].status is Status.FIXED and sb[i].status is Status.FIXED:
            continue
        if {sa[i].status, sb[i].status} <= COMPARABLE:  # an at-bound value's own se is no error bar
            ea = ea if sa[i].status is Status.ESTIMATED else {}
            eb = eb if sb[i].status is Status.ESTIMATED else {}
            cmp.parameters.append(_parameter(name, float(va[i]), float(vb[i]), ea, eb, threshold))
        else:
            cmp.not_compared.append(NotCompared(name, float(va[i]), float(vb[i]), sa[i].status.label,
                                                sb[i].status.label))
    cmp.causes = causes(cmp, rec_a, rec_b)
    return cmp


def comparison_json(cmp: Comparison) -> str:
    return json.dumps(cmp.to_dict(), indent=2)


__all__ = ["Comparison", "NotCompared", "ParameterComparison", "THRESHOLD", "compare_fits", "comparison_json"]
