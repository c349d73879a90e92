"""One status per fitted parameter, decided by one rule (docs/fitting.md, "Parameter status").

A parameter of a fit is exactly one of:

- ``fixed``: the user froze it (not free); its value is the frozen one.
- ``held_at_prior``: free, but the fit held it at a stated prior value because the data do not
  determine it (e.g. the torque route's prior along unidentifiable base directions).
- ``not_identified``: free, but the data do not pin it down: its standard error is missing
  where one was due, not finite, zero (a value not estimated from the data), or its 95 %
  half-width exceeds half its bound range; or the fit's analysis flagged it (a weak direction,
  a joint that barely moved). Its value is whatever the search left.
- ``at_bound``: free, identified, and within ``AT_BOUND_FRACTION`` of its bound range from a
  bound, or with an unconstrained value beyond the bound: shown as "≥ lower" / "≤ upper".
- ``estimated``: free, identified, inside its bounds. The only status with a two-sided interval.

The order above is the precedence: a frozen parameter is never "not identified", an
unidentified one at a bound is "not identified" (the bound, not the data, holds it there).
The integer delay is estimated by a discrete search and has no interval (``interval`` None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from ..errors import FitError

AT_BOUND_FRACTION = 0.005  # of the bound range: the one at-bound tolerance (replay, trust, report, export)
UNIDENTIFIED_HALF_WIDTH = 0.5  # of the bound range: a wider 95 % half-width is "not identified"
T95_NORMAL = 1.959963984540054
NO_INTERVAL = "estimated; no 95 % interval computed"  # the reason of an estimate without error bars


class Status(str, Enum):
    """A parameter's status; the value is the stored (JSON) form."""

    ESTIMATED = "estimated"
    AT_BOUND = "at_bound"
    NOT_IDENTIFIED = "not_identified"
    HELD_AT_PRIOR = "held_at_prior"
    FIXED = "fixed"

    @property
    def label(self) -> str:
        """Plain words for tables and reports."""
        return {"estimated": "estimated", "at_bound": "at a bound", "not_identified": "not identified",
                "held_at_prior": "held at a prior", "fixed": "fixed"}[self.value]


@dataclass(frozen=True)
class ParameterStatus:
    """One parameter's status and the numbers that go with it (the parameter's own units).

    ``interval`` (low, high): the 95 % interval, present only when ``status`` is ESTIMATED
    (enforced). ``unconstrained_value``: where the parameter would go without its bounds, when
    known. ``prior``: the value it was held at (HELD_AT_PRIOR) or frozen at (FIXED).
    ``reason``: plain words for the status."""

    name: str
    status: Status
    value: float
    lower: float
    upper: float
    stderr: float | None
    interval: tuple[float, float] | None
    unconstrained_value: float | None
    prior: float | None
    reason: str

    def __post_init__(self) -> None:
        if self.interval is not None and self.status is not Status.ESTIMATED:
            raise FitError(f"{self.name}: a two-sided interval is only for an estimated parameter, "
                             f"not one that is {self.status.label}")

    @property
    def side(self) -> str | None:
        """'lower' / 'upper' for AT_BOUND, else None."""
        if self.status is not Status.AT_BOUND:
            return None
        return bound_side(self.value, self.lower, self.upper, self.unconstrained_value) or "lower"

    def display(self, digits: int = 4) -> str:
        """One cell: '0.4799 [0.4712, 0.4886]', '≥ 0 (unconstrained −0.031)', 'held at 0.074
        (prior)', 'not identified (0.31)', '0.2 (fixed)'."""
        f = lambda v: format_number(v, digits)  # noqa: E731
        if self.status is Status.ESTIMATED:
            return f(self.value) if self.interval is None else interval_text(self.value, *self.interval, digits)
        if self.status is Status.AT_BOUND:
            sign, bound = ("≥", self.lower) if self.side == "lower" else ("≤", self.upper)
            free = f" (unconstrained {f(self.unconstrained_value)})" if self.unconstrained_value is not None else ""
            return f"{sign} {f(bound)}{free}"
        if self.status is Status.HELD_AT_PRIOR:
            return f"held at {f(self.prior if self.prior is not None else self.value)} (prior)"
        if self.status is Status.FIXED:
            return f"{f(self.value)} (fixed)"
        return f"not identified ({f(self.value)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (status as its string value, interval as a list or None)."""
        d = asdict(self)
        d["status"] = self.status.value
        d["interval"] = None if self.interval is None else [float(self.interval[0]), float(self.interval[1])]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ParameterStatus:
        iv = d.get("interval")
        return cls(d["name"], Status(d["status"]), float(d["value"]), float(d["lower"]), float(d["upper"]),
                   d.get("stderr"), None if iv is None else (float(iv[0]), float(iv[1])),
                   d.get("unconstrained_value"), d.get("prior"), d.get("reason", ""))


def format_number(v: float | None, digits: int = 4) -> str:
    """`digits` significant figures, '—' for None, '∞' for infinities."""
    if v is None:
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}g}"


def interval_text(value: float, low: float, high: float, digits: int = 4) -> str:
    """'2.6995 [2.6980, 2.7010]': the interval to 2 significant digits of its half-width, the
    value to the same decimals and never fewer than `digits` significant digits."""
    half = (high - low) / 2.0
    if not (math.isfinite(half) and half > 0 and math.isfinite(value)) or max(abs(value), abs(low), abs(high)) >= 1e6:
        return f"{format_number(value, digits)} [{format_number(low, digits)}, {format_number(high, digits)}]"
    places = max(0, 1 - math.floor(math.log10(half)))
    shown = max(places, digits - 1 - math.floor(math.log10(abs(value)))) if value != 0 else places
    if shown > 9:
        return f"{format_number(value, digits)} [{format_number(low, digits)}, {format_number(high, digits)}]"
    return f"{value:.{shown}f} [{low:.{places}f}, {high:.{places}f}]"


def bound_side(value: float, lower: float, upper: float, unconstrained_value: float | None = None,
               fraction: float = AT_BOUND_FRACTION) -> str | None:
    """'lower' / 'upper' when `value` is within `fraction` of the range from that bound (or the
    unconstrained value lies beyond it), else None. A zero-width range is no bound hit."""
    span = upper - lower
    if not span > 0:
        return None
    if unconstrained_value is not None and math.isfinite(unconstrained_value):
        if unconstrained_value < lower:
            return "lower"
        if unconstrained_value > upper:
            return "upper"
    tol = fraction * span
    if value <= lower + tol:
        return "lower"
    if value >= upper - tol:
        return "upper"
    return None


def _stderr_problem(stderr: float | None, lower: float, upper: float, t95: float, needs_stderr: bool) -> str | None:
    """Why a standard error says the data do not identify the parameter, or None."""
    if stderr is None:
        return "no standard error could be computed" if needs_stderr else None
    if not math.isfinite(stderr):
        return "its standard error is not finite (the data do not constrain it)"
    if stderr <= 0:
        return "its standard error is zero (the value was not estimated from the data)"
    if upper > lower and t95 * stderr > UNIDENTIFIED_HALF_WIDTH * (upper - lower):
        return (f"its 95 % half-width {format_number(t95 * stderr, 3)} exceeds half its bound range "
                f"[{format_number(lower)}, {format_number(upper)}]")
    return None


def classify(name: str, value: float, lower: float, upper: float, *, free: bool = True,
             stderr: float | None = None, interval: tuple[float, float] | None = None,
             t95: float = T95_NORMAL, unconstrained_value: float | None = None, prior: float | None = None,
             unidentified: str | None = None, needs_stderr: bool = True) -> ParameterStatus:
    """The one rule (module docstring), from a parameter's fitted `value`, bounds, whether it
    was `free`, its standard error (None: not computed; NaN/inf: unbounded), its 95 %
    `interval` (default value ± t95·stderr), its `unconstrained_value`, the `prior` it was held
    at (free parameters: HELD_AT_PRIOR), and `unidentified`: the fit's own reason it is not
    identified (a weak direction, a joint that barely moved), or None. `needs_stderr`: False
    for a parameter that never has one (the discrete delay)."""
    def make(status: Status, reason: str, iv=None, pr=None) -> ParameterStatus:
        return ParameterStatus(name, status, float(value), float(lower), float(upper), stderr, iv,
                               unconstrained_value, pr, reason)

    if not free:
        return make(Status.FIXED, "frozen by the fit's settings", pr=float(value) if prior is None else prior)
    if prior is not None:
        return make(Status.HELD_AT_PRIOR, f"held at the prior {format_number(prior)}: the data do not determine it",
                    pr=prior)
    side = bound_side(value, lower, upper, unconstrained_value)
    problem = unidentified or _stderr_problem(stderr, lower, upper, t95, needs_stderr)
    if problem:
        at = f"; it also sits at its {side} bound" if side else ""
        return make(Status.NOT_IDENTIFIED, problem + at)
    if side is not None:
        bound = lower if side == "lower" else upper
        beyond = (f"; unconstrained it would be {format_number(unconstrained_value)}"
                  if unconstrained_value is not None else "")
        return make(Status.AT_BOUND, f"at its {side} bound {format_number(bound)}{beyond}: the optimum is "
                    "probably outside the box")
    if interval is None and stderr is not None:
        interval = (float(value) - t95 * stderr, float(value) + t95 * stderr)
    why = "estimated from the data" if interval is not None else \
        (NO_INTERVAL if needs_stderr else "estimated by a discrete search; no interval")
    return make(Status.ESTIMATED, why, iv=interval)


def statuses_from_identifiability(ident: Mapping[str, Any] | None, names: Iterable[str],
                                  values: Mapping[str, float], bounds: Mapping[str, tuple[float, float]],
                                  frozen: Iterable[str] = (), discrete: Iterable[str] = ()) -> list[ParameterStatus]:
    """Every parameter's status from a stored ``identifiability_json`` dict (replay or torque
    fit; None: no error bars stored). Per parameter entry, optional keys ``prior`` and
    ``unconstrained_value`` are honoured; flag ``unidentifiable`` is the fit's own reason;
    a free continuous parameter whose stored stderr is null had a non-finite one.
    `frozen`: names the settings froze; `discrete`: names never in the Jacobian."""
    stored = {p["name"]: p for p in (ident or {}).get("parameters", [])}
    frozen, discrete = set(frozen), set(discrete)
    out = []
    for name in names:
        p = stored.get(name)
        lo, hi = bounds[name]
        value = float(values[name])
        if p is None:  # no error bars for it
            out.append(classify(name, value, lo, hi, free=name not in frozen, needs_stderr=False))
            continue
        free = bool(p.get("free")) or (name in discrete and name not in frozen)
        se = p.get("stderr")
        if free and se is None and name not in discrete and p.get("prior") is None:
            se = math.inf  # stored JSON has no infinity
        iv = (p["ci95_low"], p["ci95_high"]) if p.get("ci95_low") is not None and p.get("ci95_high") is not None else None
        flags = p.get("flags") or []
        why = "the fit's analysis flags it unidentifiable (a weak direction or a joint that barely moved)" \
            if "unidentifiable" in flags else None
        out.append(classify(name, value, float(p.get("lower_bound", lo)), float(p.get("upper_bound", hi)),
                            free=free and name not in frozen, stderr=se, interval=iv,
                            unconstrained_value=p.get("unconstrained_value"), prior=p.get("prior"),
                            unidentified=why, needs_stderr=name not in discrete))
    return out


def count(statuses: Iterable[ParameterStatus]) -> dict[str, int]:
    """How many parameters per status value (every status present, zero included)."""
    out = {s.value: 0 for s in Status}
    for st in statuses:
        out[st.status.value] += 1
    return out


__all__ = ["AT_BOUND_FRACTION", "NO_INTERVAL", "ParameterStatus", "Status", "T95_NORMAL", "UNIDENTIFIED_HALF_WIDTH",
           "bound_side", "classify", "count", "format_number", "interval_text", "statuses_from_identifiability"]
