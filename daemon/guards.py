"""fr3_stack's excitation-client guards: the one owner of their rules (docs/daemon.md).

fr3_stack's `examples/joint_sysid.py` checks, before each command it streams, the latest state
it has received from the daemon's PUB socket; the first check that fails aborts the run (and
requests termination). The streaming checks, with its defaults:

- `state_age`: the state's age ≤ `stale_after` (0.2 s);
- `joint_range`: every q strictly inside the joint range minus the 10 % repulsion zone;
- `speed`: max |dq| ≤ the plan's `max_velocity` (0.1 rad/s, also its preflight bound);
- `tracking`: max |q − r| ≤ `tracking_error` (0.05 rad), where r is, by `tracking_rule`:
  - `anchor`: the anchor q0, the pose read before the run. This is what the client's code
    compares (its `last_target` is never updated), so no joint may leave its start by more
    than the bound. The project enforces this rule by default (DEFAULT_TRACKING_RULE): it is
    what a real run of that client does;
  - `target`: the last sent target, what the client's documentation states.
  Both are always evaluated and reported; only the chosen one stops a run.
- lateness ≤ `max_lateness` (0.05 s): wall-clock only (the live path checks it itself).

Every function here is vectorised: arrays (..., G, 7) of G checked states (the leading axes
for a population of episodes), G the sends.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..sim.fr3 import REPULSION_LOWER_RAD, REPULSION_UPPER_RAD

TRACKING_RULES = ("anchor", "target")
DEFAULT_TRACKING_RULE = "anchor"
STATE_PERIOD_S = 0.005  # the daemon publishes its state every 5 ms (kStatePeriodMs)
TRACKING_ANCHOR, TRACKING_TARGET, SPEED, STATE_AGE, JOINT_RANGE = (
    "tracking_anchor", "tracking_target", "speed", "state_age", "joint_range")
GUARDS = (TRACKING_ANCHOR, TRACKING_TARGET, SPEED, STATE_AGE, JOINT_RANGE)
_WHAT = {TRACKING_ANCHOR: "tracking error (anchor rule: |q − anchor|, fr3_stack's code)",
         TRACKING_TARGET: "tracking error (documented rule: |q − last sent target|)",
         SPEED: "joint speed |dq|", STATE_AGE: "state age", JOINT_RANGE: "joint position past the repulsion limit"}
_UNIT = {TRACKING_ANCHOR: "rad", TRACKING_TARGET: "rad", SPEED: "rad/s", STATE_AGE: "s", JOINT_RANGE: "rad"}


@dataclass(frozen=True)
class GuardBounds:
    """The streaming guards' bounds (fr3_stack's defaults): tracking error [rad] under
    `tracking_rule`, joint speed [rad/s] (the plan's max_velocity), state age [s], lateness [s]."""

    tracking_error: float = 0.05
    max_velocity: float = 0.1
    stale_after: float = 0.2
    max_lateness: float = 0.05
    tracking_rule: str = DEFAULT_TRACKING_RULE

    def validate(self) -> "GuardBounds":
        """Raise ValueError naming the bad bound; returns self."""
        for key, unit in (("tracking_error", "rad"), ("max_velocity", "rad/s"), ("stale_after", "s"),
                          ("max_lateness", "s")):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"--{key.replace('_', '-')}: expected a finite number > 0 {unit}, got {value}")
        if self.tracking_rule not in TRACKING_RULES:
            raise ValueError(f"--tracking-rule: expected one of {', '.join(TRACKING_RULES)}, got {self.tracking_rule!r}")
        return self

    @property
    def enforced(self) -> tuple[str, ...]:
        """The guards that stop a run: tracking under the chosen rule, speed, state age, range."""
        return ("tracking_" + self.tracking_rule, SPEED, STATE_AGE, JOINT_RANGE)

    def bound(self, guard: str) -> float:
        """The bound of `guard` (0 for joint_range: its value is the depth into the zone)."""
        return {TRACKING_ANCHOR: self.tracking_error, TRACKING_TARGET: self.tracking_error,
                SPEED: self.max_velocity, STATE_AGE: self.stale_after, JOINT_RANGE: 0.0}[guard]

    def to_dict(self) -> dict:
        """fr3_stack's `guard_settings` keys plus max_velocity and tracking_rule."""
        return asdict(self)

    @classmethod
    def from_metadata(cls, meta: dict | None, **overrides) -> "GuardBounds":
        """Bounds from an excitation metadata.json (its plan's max_velocity, its
        guard_settings), fr3_stack's defaults for what it lacks; `overrides` not None win."""
        meta = meta or {}
        found = {}
        plan = meta.get("plan") if isinstance(meta.get("plan"), dict) else {}
        settings = meta.get("guard_settings") if isinstance(meta.get("guard_settings"), dict) else {}
        if isinstance(plan.get("max_velocity"), (int, float)):
            found["max_velocity"] = float(plan["max_velocity"])
        for key in ("tracking_error", "stale_after", "max_lateness"):
            if isinstance(settings.get(key), (int, float)):
                found[key] = float(settings[key])
        if settings.get("tracking_rule") in TRACKING_RULES:
            found["tracking_rule"] = settings["tracking_rule"]
        found |= {k: v for k, v in overrides.items() if v is not None}
        return replace(cls(), **found).validate()


@dataclass(frozen=True)
class GuardEvent:
    """One guard's value at one check: time [s], worst joint (1-based; None for state age),
    the value (unit of the guard) and its bound."""

    guard: str
    t_s: float
    joint: int | None
    value: float
    bound: float

    def describe(self) -> str:
        where = f" on J{self.joint}" if self.joint else ""
        return (f"{_WHAT[self.guard]} {self.value:.4g} {_UNIT[self.guard]}{where} at t = {self.t_s:.3f} s "
                f"(bound {self.bound:g} {_UNIT[self.guard]})")

    def to_dict(self) -> dict:
        return asdict(self)


def guard_values(q: np.ndarray, dq: np.ndarray, anchor: np.ndarray, last_sent: np.ndarray,
                 state_age_s: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per guard: (value (..., G), worst joint index (..., G), 0-based) of the checked states
    q, dq (..., G, 7) against the anchor (7,) or (..., 1, 7) and the last sent targets (G, 7)
    (NaN rows: nothing sent yet, the documented rule skips them); state ages (G,) [s]."""
    def worst(err):
        err = np.where(np.isnan(err), -np.inf, err)
        joint = np.argmax(err, axis=-1)
        return np.take_along_axis(err, joint[..., None], axis=-1)[..., 0], joint

    depth = np.maximum(REPULSION_LOWER_RAD - q, q - REPULSION_UPPER_RAD)
    age = np.broadcast_to(np.asarray(state_age_s, dtype=np.float64), q.shape[:-1])
    return {TRACKING_ANCHOR: worst(np.abs(q - anchor)), TRACKING_TARGET: worst(np.abs(q - last_sent)),
            SPEED: worst(np.abs(dq)), STATE_AGE: (age, np.full(age.shape, -1)), JOINT_RANGE: worst(depth)}


def tripped(guard: str, value: np.ndarray, bound: float) -> np.ndarray:
    """Where the guard fires: value above the bound (joint range: at or past the limit; a
    non-finite value always fires, as the client refuses non-finite state)."""
    with np.errstate(invalid="ignore"):
        over = value >= bound if guard == JOINT_RANGE else value > bound
    return over | np.isnan(value)


def first_abort(values: dict[str, tuple[np.ndarray, np.ndarray]], bounds: GuardBounds) -> tuple[np.ndarray, np.ndarray]:
    """From `guard_values`: (first check index (...,) that fires an enforced guard, −1 none;
    its guard's index into `bounds.enforced`, −1 none). Ties at one check go to the earlier
    guard in `enforced`."""
    fired = np.stack([tripped(g, values[g][0], bounds.bound(g)) for g in bounds.enforced])  # (E, ..., G)
    any_check = fired.any(axis=0)
    first = np.where(any_check.any(axis=-1), np.argmax(any_check, axis=-1), -1)
    at = np.take_along_axis(fired, np.maximum(first, 0)[None, ..., None], axis=-1)[..., 0]  # (E, ...)
    which = np.where(first >= 0, np.argmax(at, axis=0), -1)
    return first, which


def send_checks(command_ticks: np.ndarray, row_targets: np.ndarray, tick_s: float = 0.001):
    """Where the client checks, on a 1 kHz robot: before each sent row i (at tick k_i), on the
    state of the daemon's latest publication (tick k_i − k_i mod 5). Returns (state ticks (n,),
    state ages (n,) [s], the last sent target before each row (n, 7), NaN before the first)."""
    ticks = np.asarray(command_ticks, dtype=np.int64)
    state = ticks - ticks % round(STATE_PERIOD_S / tick_s)
    last_sent = np.vstack([np.full((1, 7), np.nan), np.asarray(row_targets, dtype=np.float64)[:-1]])
    return state, (ticks - state) * tick_s, last_sent


@dataclass
class GuardMonitor:
    """The guards over one run, fed in order (chunks of checks): the first trip and the peak
    of every guard, and where the enforced ones first fire."""

    bounds: GuardBounds
    anchor: np.ndarray
    stop_at_abort: bool = False
    checks: int = 0
    first: dict = field(default_factory=dict)  # guard -> GuardEvent
    peak: dict = field(default_factory=dict)  # guard -> GuardEvent

    def feed(self, t_s: np.ndarray, q: np.ndarray, dq: np.ndarray, last_sent: np.ndarray,
             state_age_s: np.ndarray) -> int | None:
        """Check G states (q, dq (G, 7) at times t_s (G,) [s]); returns the index of the first
        check that fires an enforced guard, when one does, else None. With `stop_at_abort`
        nothing after that check is recorded (the run ends there)."""
        if len(t_s) == 0 or (self.stop_at_abort and self.abort() is not None):
            return None
        values = guard_values(q, dq, self.anchor, last_sent, state_age_s)
        fires = {g: tripped(g, v, self.bounds.bound(g)) for g, (v, _j) in values.items()}
        hits = [int(np.argmax(fires[g])) for g in self.bounds.enforced if fires[g].any()]
        stop = min(hits) if hits else None
        n = stop + 1 if self.stop_at_abort and stop is not None else len(t_s)
        for guard, (value, joint) in values.items():
            value, joint, fired = value[:n], joint[:n], np.flatnonzero(fires[guard][:n])
            bound = self.bounds.bound(guard)
            event = lambda i: GuardEvent(guard, float(t_s[i]), None if joint[i] < 0 else int(joint[i]) + 1,  # noqa: E731
                                         float(value[i]), bound)
            finite = np.where(np.isfinite(value), value, -np.inf)
            i = int(np.argmax(finite))
            if np.isfinite(finite[i]) and (guard not in self.peak or value[i] > self.peak[guard].value):
                self.peak[guard] = event(i)
            if fired.size and guard not in self.first:
                self.first[guard] = event(int(fired[0]))
        self.checks += n
        return stop

    def abort(self) -> GuardEvent | None:
        """The enforced guard that fires first (where fr3_stack's client would abort)."""
        events = [self.first[g] for g in self.bounds.enforced if g in self.first]
        return min(events, key=lambda e: e.t_s) if events else None

    def report(self, enforced: bool, note: str = "") -> dict:
        """The JSON `guards` section: bounds, the rule, where the client would abort (or None),
        each guard's first trip and peak, whether the recording stopped there."""
        abort = self.abort()
        return {"bounds": self.bounds.to_dict(), "tracking_rule": self.bounds.tracking_rule,
                "enforced": enforced, "checks": self.checks,
                "would_abort": None if abort is None else abort.to_dict(),
                "verdict": "passes fr3_stack's guards" if abort is None else
                f"fr3_stack's client would abort: {abort.describe()}",
                "first_trip": {g: self.first[g].to_dict() if g in self.first else None for g in GUARDS},
                "peak": {g: self.peak[g].to_dict() if g in self.peak else None for g in GUARDS},
                "note": note}


def report_lines(report: dict) -> list[str]:
    """Readable lines of a `GuardMonitor.report`: the verdict, then the other rule's result."""
    lines = [report["verdict"] + (" (the recording stops there: --enforce-guards)"
                                  if report["enforced"] and report["would_abort"] else "")]
    for guard in (TRACKING_ANCHOR, TRACKING_TARGET, SPEED):
        trip, peak = report["first_trip"][guard], report["peak"][guard]
        if trip is not None and (report["would_abort"] or {}).get("guard") != guard:
            lines.append(f"  also: {GuardEvent(**trip).describe()}")
        elif trip is None and peak is not None:
            lines.append(f"  peak {GuardEvent(**peak).describe()}")
    return lines


__all__ = ["DEFAULT_TRACKING_RULE", "GUARDS", "GuardBounds", "GuardEvent", "GuardMonitor", "STATE_PERIOD_S",
           "TRACKING_RULES", "first_abort", "guard_values", "report_lines", "send_checks", "tripped"]
