"""One verdict per fit: *trusted*, *usable with caveats* or *not trusted*, with its reasons in
plain words, most important first (docs/fitting.md, "The verdict").

`decide(evidence)` is the one place the evidence a fit has is put together:

- **not trusted** when the model does not explain its own training data (the residual over
  the declared multiple of the noise floor; the adequacy line names the likely cause, e.g. an
  unmodelled flange payload), when a held-out run is not explained or fails `fit validate`'s
  declared thresholds, or when none of the parameters the user freed is identified;
- **usable with caveats** when nothing above holds but: no held-out assessment (the best a
  fit can be without one), the local search stopped at its iteration cap still gaining
  ("not converged"), the search's own gates failed, freed parameters not identified, at a
  bound, held at a prior or with wide intervals (named), a disagreement with the latest fit of
  the other route on the same training runs, a spread over seeds, or a training residual that
  could not be assessed against its noise floor;
- **trusted** otherwise: explained to the noise floor on training and on at least one held-out
  run, converged, every freed parameter estimated within its bounds.

The evidence is gathered from the lake by fit/reports/verdict_record.py; this module only decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..core.parameter_status import NO_INTERVAL, ParameterStatus, Status

WIDE_HALF_WIDTH = 0.1  # an estimated parameter's 95 % half-width over this share of its bound range is "wide"
MAX_NAMES = 8  # names listed in one reason before "and N more"


class Level(str, Enum):
    """The three levels; the value is the stored form."""

    TRUSTED = "trusted"
    CAVEATS = "usable with caveats"
    NOT_TRUSTED = "not trusted"


@dataclass(frozen=True)
class Check:
    """One assessment of the fit on some data: `ok` True (explained / passed), False (not),
    None (could not be assessed); `held_out` whether the data were not trained on."""

    subject: str  # e.g. "training", "held-out demo/run2"
    text: str  # the adequacy or validation line
    ok: bool | None
    held_out: bool


@dataclass(frozen=True)
class Agreement:
    """The comparison with the latest fit of the other route on the same training runs."""

    other_fit: str
    other_method: str
    disagreeing: tuple[str, ...]  # estimated parameters that disagree
    causes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """Everything a verdict is decided from (fit/reports/verdict_record.py gathers it)."""

    fit_id: str
    method: str
    checks: tuple[Check, ...]
    statuses: tuple[ParameterStatus, ...]
    convergence: str | None = None  # the "not converged: ..." note of the local search
    gate_failure: str | None = None  # the local gates' line when they did not accept the result
    agreement: Agreement | None = None
    seed_spread: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"fit": self.fit_id, "method": self.method,
                "checks": [vars(c) for c in self.checks],
                "convergence": self.convergence, "gate_failure": self.gate_failure,
                "agreement": None if self.agreement is None else {
                    "other_fit": self.agreement.other_fit, "other_method": self.agreement.other_method,
                    "disagreeing": list(self.agreement.disagreeing), "causes": list(self.agreement.causes)},
                "seed_spread": list(self.seed_spread)}


@dataclass(frozen=True)
class Verdict:
    """A level and its reasons, most important first (for *trusted*: what supports it)."""

    level: Level
    reasons: tuple[str, ...]
    statuses: tuple[ParameterStatus, ...] = field(default=(), compare=False)

    def line(self) -> str:
        """'verdict: <level> — <first reason>; <second>; ...'."""
        return f"verdict: {self.level.value}" + (f" — {'; '.join(self.reasons)}" if self.reasons else "")

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level.value, "reasons": list(self.reasons),
                "parameter_status": [s.to_dict() for s in self.statuses]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(Level(d["level"]), tuple(d.get("reasons") or ()),
                   tuple(ParameterStatus.from_dict(s) for s in d.get("parameter_status") or ()))


def names(items: Sequence[str]) -> str:
    """'a, b, c' (at most MAX_NAMES, then 'and N more')."""
    head = ", ".join(items[:MAX_NAMES])
    return head + (f" and {len(items) - MAX_NAMES} more" if len(items) > MAX_NAMES else "")


def _freed(statuses: Sequence[ParameterStatus]) -> list[ParameterStatus]:
    return [s for s in statuses if s.status is not Status.FIXED]


def _wide(s: ParameterStatus) -> bool:
    if s.status is not Status.ESTIMATED or s.interval is None or not s.upper > s.lower:
        return False
    return (s.interval[1] - s.interval[0]) / 2 > WIDE_HALF_WIDTH * (s.upper - s.lower)


def _said(c: Check) -> str:
    """A check in words, its subject once."""
    return c.text if c.text.startswith(c.subject) else f"{c.subject}: {c.text}"


def _blocking(ev: Evidence) -> list[str]:
    """The reasons that make a fit not trusted, most important first."""
    out = [c.text if "does not explain" in c.text else f"the model does not explain its own training data: {c.text}"
           for c in ev.checks if not c.held_out and c.ok is False]
    out += [_said(c) for c in ev.checks if c.held_out and c.ok is False]
    freed = _freed(ev.statuses)
    identified = [s for s in freed if s.status in (Status.ESTIMATED, Status.AT_BOUND)]
    if freed and not identified:
        out.append(f"none of the {len(freed)} freed parameters is identified by the data")
    return out


def _parameter_caveats(statuses: Sequence[ParameterStatus]) -> list[str]:
    freed = _freed(statuses)
    of = f" of {len(freed)} freed"
    out = []
    unid = [s.name for s in freed if s.status is Status.NOT_IDENTIFIED]
    if unid:
        out.append(f"not identified ({len(unid)}{of}): {names(unid)}")
    bound = [f"{s.name} {s.display(4)}" for s in freed if s.status is Status.AT_BOUND]
    if bound:
        out.append(f"at a bound ({len(bound)}{of}; the optimum is probably outside the box): {names(bound)}")
    wide = [s.name for s in freed if _wide(s)]
    if wide:
        out.append(f"wide 95 % intervals (half-width over {100 * WIDE_HALF_WIDTH:.0f} % of the bound range): {names(wide)}")
    bare = [s.name for s in freed if s.status is Status.ESTIMATED and s.reason == NO_INTERVAL]
    if bare:
        out.append(f"no error bars stored ({len(bare)}{of}): their uncertainty is unknown: {names(bare)}")
    prior = [s.name for s in freed if s.status is Status.HELD_AT_PRIOR]
    if prior:
        out.append(f"held at a prior, not estimated ({len(prior)}{of}): {names(prior)}")
    return out


def _caveats(ev: Evidence) -> list[str]:
    """The reasons for *usable with caveats*, most important first."""
    held = [c for c in ev.checks if c.held_out]
    unknown = [c for c in held if c.ok is None]
    out = []
    if not held:
        out.append("not validated on held-out runs: validate it on runs it did not train on")
    elif not any(c.ok is not None for c in held):
        out.append(f"not validated on held-out runs ({'; '.join(_said(c) for c in unknown)})")
    if ev.convergence:
        out.append(ev.convergence)
    if ev.gate_failure:
        out.append(f"the search's gates did not accept its local result: {ev.gate_failure}")
    out += _parameter_caveats(ev.statuses)
    if ev.agreement is not None and ev.agreement.disagreeing:
        a = ev.agreement
        out.append(f"disagrees with {a.other_method} fit {a.other_fit} on the same training runs: "
                   f"{names(list(a.disagreeing))}" + (f" ({a.causes[0]})" if a.causes else ""))
    if ev.seed_spread:
        out.append(f"optima of different seeds spread over 10 % of the range: {names(list(ev.seed_spread))}")
    out += [_said(c) for c in ev.checks if not c.held_out and c.ok is None]
    return out


def _support(ev: Evidence) -> list[str]:
    """What a trusted fit's verdict rests on."""
    freed = _freed(ev.statuses)
    out = [_said(c) for c in ev.checks if c.ok]
    out.append(f"all {len(freed)} freed parameters estimated inside their bounds")
    if ev.agreement is not None:
        out.append(f"agrees with {ev.agreement.other_method} fit {ev.agreement.other_fit} on its estimated parameters")
    return out


def decide(ev: Evidence) -> Verdict:
    """The verdict (module docstring); its reasons most important first."""
    blocking = _blocking(ev)
    caveats = _caveats(ev)
    if blocking:
        return Verdict(Level.NOT_TRUSTED, tuple(blocking + caveats), ev.statuses)
    if caveats:
        return Verdict(Level.CAVEATS, tuple(caveats), ev.statuses)
    return Verdict(Level.TRUSTED, tuple(_support(ev)), ev.statuses)


__all__ = ["Agreement", "Check", "Evidence", "Level", "MAX_NAMES", "Verdict", "WIDE_HALF_WIDTH", "decide", "names"]
