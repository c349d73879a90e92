"""Every parameter's status for a stored fit (fit/core/parameter_status.py's one rule applied
to a `FitRecord`): the fit's settings say what was frozen and the bounds, its stored error bars
(`identifiability_json`, replay or torque route) say the rest.

`fit_statuses(rec)` → one `ParameterStatus` per `LAYOUT` name, in layout order;
`intervals_agree(ident, statuses)` → the stored error-bar block with each parameter's `status`
added and its two-sided interval kept only when the status is *estimated* (the invariant every
summary, table, report and export is built on).
"""

from __future__ import annotations

import copy
from typing import Any

from ...sim.arm_model.params import LAYOUT
from ..core.parameter_status import ParameterStatus, Status, statuses_from_identifiability

DISCRETE = frozenset(LAYOUT.names[i] for i in LAYOUT.integer_indices)


def fit_statuses(rec) -> list[ParameterStatus]:
    """The status of each of the fit's `LAYOUT.size` parameters (layout order)."""
    from ..core.space import ParameterSpace

    settings = rec.settings or {}
    ident = rec.identifiability
    space = ParameterSpace.from_json(settings["space"]) if "space" in settings else ParameterSpace()
    if settings.get("method") == "torque" and ident is not None:  # its space only carries the friction law
        frozen = {p["name"] for p in ident.get("parameters", []) if not p.get("free") and not p.get("scanned")}
    elif "space" in settings or ident is None:
        frozen = {LAYOUT.names[i] for i in space.frozen}
    else:  # an import with error bars: they say what was free
        frozen = set()
    values = dict(zip(LAYOUT.names, rec.vector.tolist()))
    bounds = {n: (float(space.bounds[i, 0]), float(space.bounds[i, 1])) for i, n in enumerate(LAYOUT.names)}
    return statuses_from_identifiability(ident, LAYOUT.names, values, bounds, frozen=frozen, discrete=DISCRETE)


def intervals_agree(ident: dict[str, Any] | None, statuses: list[ParameterStatus]) -> dict[str, Any] | None:
    """A copy of the stored error bars where each parameter carries its `status` and keeps its
    95 % interval only when estimated (else `ci95_low`/`ci95_high` are None)."""
    if ident is None:
        return None
    by_name = {s.name: s for s in statuses}
    out = copy.deepcopy(ident)
    for p in out.get("parameters", []):
        st = by_name.get(p["name"])
        if st is None:
            continue
        p["status"] = st.status.value
        if st.status is not Status.ESTIMATED or st.interval is None:
            p["ci95_low"] = p["ci95_high"] = None
    return out


__all__ = ["fit_statuses", "intervals_agree"]
