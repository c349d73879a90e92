"""The parameter space of a fit: which parameters are searched, their bounds, and which are
frozen at a value.

The parameters, their order, names and default bounds are `twinlake.sim.LAYOUT`'s:
FrankaTwin's 29 (armature, mu_static, dynamic_ratio, mu_viscous per joint, then
`motor_delay_ms`), then the groups FrankaTwin does not have (the true payload), which a fit
holds frozen at their nominal values (`LAYOUT.default_frozen`) unless a spec or a preset frees
them; so the default fit searches FrankaTwin's 29. Continuous parameters are searched in the normalised box [0, 1]
(`lo + z·(hi − lo)`); the layout's integer parameters are whole 1 kHz ticks searched as
categorical choices (see fit/replay/search.py): the shared delay among `delay_choices` and, when freed
(`+joint-delay`), each joint's delay offset among `offset_choices(j)` (its delay is
clip(motor_delay_ms + offset_j, 0, 4) ms, twinlake.sim.arm_model.params.joint_delay_ticks).

Spec syntax (`--params`, repeatable, comma-separated items; or a JSON file of the same):

    armature=0:0.6          re-bound a group          (JSON: "armature": [0, 0.6])
    mu_viscous_j3=0.5:2     re-bound one parameter
    j7=0.2                  freeze every parameter of joint 7 at 0.2 (rarely useful)
    dynamic_ratio=1         freeze a group at a value (JSON: "dynamic_ratio": 1)
    motor_delay_ms=3        freeze the delay (alias: delay)
    motor_delay_ms=1:3      search delays 1, 2, 3 only
    payload_mass=0:3        free a frozen-by-default group within bounds
    motor_delay_offset_ms_j3=-1:1   free joint 3's delay offset (whole ms, within ±2)
    +payload                a preset (PRESETS): free payload_mass and payload_com_x/y/z at
                            their default bounds
    +smooth-friction        the smooth (tanh) friction law, dynamic_ratio frozen at 1
    +sigmoid-friction       the sigmoid law of Gaz et al. 2019, its shape (sigmoid_phi2/3) free
    +asymmetry, +bias       free coulomb_asymmetry / tau_bias (per joint) at their default bounds
    +joint-delay            free motor_delay_offset_ms (per joint, −2..+2 ms around the shared delay)
    +links                  free link_mass_scale (per link, 0.8..1.2: its mass and inertia / the model's;
                            the firmware compensates the model's weight, the twin feels the rest)
    +load-friction          free coulomb_load_per_nm (per joint: the Coulomb level grows by k·|τ_m|)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...contracts.jsonfile import read_json_object
from ...sim.arm_model.params import LAYOUT, MAX_DELAY_MS
from ..errors import SettingError
from .parameter_status import bound_side

# the search's categorical coordinates (fit/replay/search.py): the shared delay and its per-joint offsets
_DELAY = LAYOUT.index("motor_delay_ms")
_OFFSETS = tuple(range(*LAYOUT.slice("motor_delay_offset_ms").indices(LAYOUT.size)))
if set(LAYOUT.integer_indices) != {_DELAY, *_OFFSETS}:
    raise ImportError("fit/core/space.py searches motor_delay_ms and motor_delay_offset_ms as the layout's only "
                      f"integer parameters; LAYOUT has {[LAYOUT.names[i] for i in LAYOUT.integer_indices]}")

@dataclass(frozen=True)
class Preset:
    """A name in `--params`: frees `free` at their default bounds, freezes `freeze` (selector
    -> value) and, if set, chooses the friction law."""

    free: tuple[str, ...] = ()
    freeze: tuple[tuple[str, float], ...] = ()
    friction_law: str | None = None


PRESETS: dict[str, Preset] = {
    "+payload": Preset(free=("payload_mass", "payload_com")),
    "+asymmetry": Preset(free=("coulomb_asymmetry",)),
    "+bias": Preset(free=("tau_bias",)),
    "+joint-delay": Preset(free=("motor_delay_offset_ms",)),
    # the links as they are (twinlake.sim.arm_model.links): each link's mass scale, the firmware keeping the model's
    "+links": Preset(free=("link_mass_scale",)),
    "+load-friction": Preset(free=("coulomb_load_per_nm",)),
    # the smooth law has one Coulomb level (mu_static): dynamic_ratio has no effect, so it is frozen
    "+smooth-friction": Preset(freeze=(("dynamic_ratio", 1.0),), friction_law="tanh"),
    # Gaz et al. 2019: φ1 = 2·mu_static, the shape φ2, φ3 per joint searched
    "+sigmoid-friction": Preset(free=("sigmoid_phi2", "sigmoid_phi3"), freeze=(("dynamic_ratio", 1.0),),
                                friction_law="sigmoid"),
}
FRICTION_LAWS = ("stribeck", "tanh", "sigmoid")  # twinlake.sim.arm_model.plant.FRICTION_LAWS (checked by a test)


def select(selector: str) -> list[int]:
    """Indices (into `LAYOUT.names`) named by a selector: a group (`armature`), a joint (`j3`),
    a parameter name (`mu_static_j3`) or `delay`. ValueError with the choices otherwise."""
    return LAYOUT.select(selector)


@dataclass(frozen=True)
class ParameterSpace:
    """Bounds (n, 2) and frozen values of the n = `LAYOUT.size` parameters.

    `frozen` maps a parameter index to its fixed value. Everything else is free: the
    continuous free indices are `free_indices`, the delay (if free) takes values
    `delay_choices` (whole ms within its bounds). `friction_law` is the plant's friction law
    the parameters mean (FRICTION_LAWS; FrankaTwin's Stribeck law by default).
    """

    bounds: np.ndarray = field(default_factory=lambda: np.array(LAYOUT.bounds, dtype=np.float64))
    frozen: dict[int, float] = field(default_factory=lambda: dict(LAYOUT.default_frozen))
    friction_law: str = "stribeck"

    def __post_init__(self) -> None:
        if self.friction_law not in FRICTION_LAWS:
            raise SettingError("friction_law", None,
                               f"friction law {self.friction_law!r}: expected one of {', '.join(FRICTION_LAWS)}")
        b = np.array(self.bounds, dtype=np.float64).reshape(LAYOUT.size, 2)
        for i, (lo, hi) in enumerate(b):
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise SettingError("params", None, f"bounds of {LAYOUT.names[i]}: expected finite lo <= hi, got [{lo}, {hi}]")
        b.setflags(write=False)
        object.__setattr__(self, "bounds", b)
        object.__setattr__(self, "frozen", {int(k): float(v) for k, v in sorted(self.frozen.items())})
        for i in (_DELAY, *_OFFSETS):
            if i not in self.frozen and not _whole(b[i]).size:
                raise SettingError("params", None, f"{LAYOUT.names[i]} bounds {b[i].tolist()} contain no whole {LAYOUT.units[i]}")

    @property
    def free_indices(self) -> np.ndarray:
        """Indices of the continuous parameters CMA-ES searches, (n_free,) int64."""
        return np.array(
            [i for i in range(LAYOUT.size) if i != _DELAY and i not in _OFFSETS and i not in self.frozen],
            dtype=np.int64)

    @property
    def delay_choices(self) -> np.ndarray:
        """Whole-ms delays the search may choose, (n_delays,) int64 (one value if frozen)."""
        if _DELAY in self.frozen:
            return np.array([int(round(self.frozen[_DELAY]))], dtype=np.int64)
        return _whole(self.bounds[_DELAY])

    def offset_choices(self, joint: int) -> np.ndarray:
        """Whole-ms delay offsets of joint `joint` (0-based) the search may choose, int64 (one
        value if frozen)."""
        i = _OFFSETS[joint]
        if i in self.frozen:
            return np.array([int(round(self.frozen[i]))], dtype=np.int64)
        return _whole(self.bounds[i])

    @property
    def free_offset_joints(self) -> list[int]:
        """The joints (0-based) whose delay offset is searched (more than one choice)."""
        return [j for j in range(len(_OFFSETS)) if len(self.offset_choices(j)) > 1]

    @property
    def base_offsets(self) -> np.ndarray:
        """(7,) int64 offsets a candidate takes unless the search chooses them: the frozen value,
        else the choice nearest 0 (every joint at the shared delay when 0 is allowed)."""
        return np.array([min(self.offset_choices(j).tolist(), key=lambda v: (abs(v), v)) for j in range(len(_OFFSETS))],
                        dtype=np.int64)

    @property
    def free_names(self) -> list[str]:
        names = [LAYOUT.names[i] for i in self.free_indices]
        return (names + ([LAYOUT.names[_DELAY]] if len(self.delay_choices) > 1 else [])
                + [LAYOUT.names[_OFFSETS[j]] for j in self.free_offset_joints])

    def delay_of(self, params: np.ndarray) -> int:
        """The whole-ms delay of an (n,) parameter vector."""
        return int(round(np.asarray(params)[_DELAY]))

    def offsets_of(self, params: np.ndarray) -> np.ndarray:
        """The whole-ms delay offsets (7,) int64 of an (n,) parameter vector."""
        return np.rint(np.asarray(params, dtype=np.float64)[list(_OFFSETS)]).astype(np.int64)

    def with_offsets(self, offsets: np.ndarray) -> "ParameterSpace":
        """This space with every delay offset frozen at `offsets` (7,) (the continuous stages
        between two offset choices)."""
        frozen = dict(self.frozen)
        frozen.update({i: float(v) for i, v in zip(_OFFSETS, np.asarray(offsets).reshape(len(_OFFSETS)))})
        return ParameterSpace(bounds=self.bounds, frozen=frozen, friction_law=self.friction_law)

    def effective_delay(self, delay: int, offset: int) -> int:
        """One joint's delay [whole ms] of a shared delay and its offset (clipped to 0..MAX_DELAY_MS)."""
        return int(min(max(int(delay) + int(offset), 0), MAX_DELAY_MS))

    def decode(self, z: np.ndarray, delays: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
        """Full (P, n) parameter matrix from normalised free coordinates z (P, n_free) in
        [0, 1] (clipped), integer delays (P,) and delay offsets (P, 7) or (7,) (None:
        `base_offsets`)."""
        z = np.clip(np.asarray(z, dtype=np.float64).reshape(len(delays), -1), 0.0, 1.0)
        out = np.empty((len(delays), LAYOUT.size), dtype=np.float64)
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        out[:] = 0.5 * (lo + hi)
        for i, v in self.frozen.items():
            out[:, i] = v
        free = self.free_indices
        out[:, free] = lo[free] + z * (hi[free] - lo[free])
        out[:, _DELAY] = np.asarray(delays, dtype=np.float64)
        out[:, list(_OFFSETS)] = self.base_offsets if offsets is None else np.asarray(offsets, dtype=np.float64)
        return out

    def encode(self, params: np.ndarray) -> np.ndarray:
        """Normalised free coordinates (P, n_free) of a (P, n) matrix (inverse of decode)."""
        p = np.atleast_2d(np.asarray(params, dtype=np.float64))
        free = self.free_indices
        lo, hi = self.bounds[free, 0], self.bounds[free, 1]
        span = np.where(hi > lo, hi - lo, 1.0)
        return np.clip((p[:, free] - lo) / span, 0.0, 1.0)

    def at_bounds(self, params: np.ndarray) -> list[str]:
        """Names of free parameters of an (n,) vector at a bound, by the one at-bound tolerance
        (fit/core/parameter_status.py, `AT_BOUND_FRACTION` of the range)."""
        p = np.asarray(params, dtype=np.float64).reshape(LAYOUT.size)
        return [LAYOUT.names[i] for i in self.free_indices
                if bound_side(float(p[i]), float(self.bounds[i, 0]), float(self.bounds[i, 1])) is not None]

    def to_json(self) -> dict:
        """Plain JSON form (stored in the fit's settings)."""
        return {
            "bounds": {n: self.bounds[i].tolist() for i, n in enumerate(LAYOUT.names)},
            "frozen": {LAYOUT.names[i]: v for i, v in self.frozen.items()},
            "friction_law": self.friction_law,
        }

    @classmethod
    def from_json(cls, doc: dict) -> "ParameterSpace":
        """The space of `to_json`; a parameter a stored space does not name (a fit made before
        its group existed) takes its default bounds and, if frozen by default, its nominal."""
        stored = doc["bounds"]
        bounds = np.array([stored.get(n, LAYOUT.bounds[i].tolist()) for i, n in enumerate(LAYOUT.names)],
                          dtype=np.float64)
        frozen = {i: v for i, v in LAYOUT.default_frozen.items() if LAYOUT.names[i] not in stored}
        frozen.update({LAYOUT.index(n): float(v) for n, v in doc.get("frozen", {}).items()})
        return cls(bounds=bounds, frozen=frozen, friction_law=doc.get("friction_law", "stribeck"))


def _whole(bounds: np.ndarray) -> np.ndarray:
    """The whole values within [lo, hi], int64."""
    lo, hi = bounds
    return np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.int64)


PARAMS = "params"
"""The setting the specs come from (`FitSettings.space`'s source); the CLI names its option."""


def _refused(where: str, message: str) -> SettingError:
    """A spec refused: `where` is the setting (`params`, with a preset after ': ') or a spec
    file's path, named in the message."""
    setting, _, inner = where.partition(": ")
    if setting == PARAMS:
        return SettingError(PARAMS, None, f"{inner}: {message}" if inner else message)
    return SettingError(PARAMS, None, f"{where}: {message}")


def _apply(bounds: np.ndarray, frozen: dict[int, float], selector: str, value: Any, where: str) -> None:
    idx = select(selector)
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise _refused(where, f"{selector}: expected [lo, hi], got {value!r}")
        lo, hi = (float(v) for v in value)
        if not lo <= hi:
            raise _refused(where, f"{selector}: expected lo <= hi, got {lo}:{hi}")
        for i in set(idx) & set(_OFFSETS):  # the engines clamp an offset to its group's bounds
            g_lo, g_hi = LAYOUT.group_of(LAYOUT.names[i]).bounds
            if lo < g_lo or hi > g_hi or not _whole(np.array([lo, hi])).size:
                raise _refused(where, f"{LAYOUT.names[i]}: expected whole ms within {g_lo:g}..{g_hi:g}, "
                                 f"got {lo:g}:{hi:g}")
        for i in idx:
            bounds[i] = (lo, hi)
            frozen.pop(i, None)
    else:
        v = float(value)
        if not math.isfinite(v):
            raise _refused(where, f"{selector}: expected a finite value, got {value!r}")
        for i in set(idx) & set(LAYOUT.integer_indices):
            group = LAYOUT.group_of(LAYOUT.names[i])
            lo, hi = group.bounds
            if v != round(v) or not lo <= v <= hi:
                raise _refused(where, f"{LAYOUT.names[i]}: expected a whole number of {group.unit} in "
                                 f"{lo:g}..{hi:g}, got {v}")
        for i in idx:
            frozen[i] = v


def _apply_preset(bounds: np.ndarray, frozen: dict[int, float], name: str, where: str) -> str | None:
    """Apply a preset (free, freeze); returns the friction law it chooses (None: none)."""
    if name not in PRESETS:
        raise _refused(where, f"unknown preset {name!r}: expected one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    for selector in preset.free:
        for i in select(selector):
            bounds[i] = LAYOUT.bounds[i]
            frozen.pop(i, None)
    for selector, value in preset.freeze:
        _apply(bounds, frozen, selector, value, f"{where}: {name}")
    return preset.friction_law


def _parse_item(item: str, where: str) -> tuple[str, Any]:
    if "=" not in item:
        raise _refused(where, f"{item!r}: expected NAME=VALUE or NAME=LO:HI")
    name, _, rhs = item.partition("=")
    try:
        if ":" in rhs:
            lo, _, hi = rhs.partition(":")
            return name.strip(), [float(lo), float(hi)]
        return name.strip(), float(rhs)
    except ValueError:
        raise _refused(where, f"{item!r}: expected numbers in NAME=VALUE or NAME=LO:HI") from None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. a name too long to be a path
        return False


def parse_space(specs: Iterable[str] = (), base: ParameterSpace | None = None,
                friction_law: str | None = None) -> ParameterSpace:
    """Apply `--params` specs (items like `armature=0:0.6`, `dynamic_ratio=1`, a preset such
    as `+payload`, or a path to a JSON file `{"armature": [0, 0.6], "dynamic_ratio": 1}`) in
    order, on top of `base` (the layout's default bounds, FrankaTwin's 29 free, the groups
    beyond them frozen at nominal). friction_law (`fit run --friction-law`) sets the law after
    the specs (a preset such as `+smooth-friction` sets it too); else the base's."""
    base = base or ParameterSpace()
    bounds = np.array(base.bounds, dtype=np.float64)
    frozen = dict(base.frozen)
    law = base.friction_law
    for spec in specs:
        path = Path(spec)
        if "=" not in spec and (spec.endswith(".json") or _is_file(path)):
            doc = read_json_object(path, "parameter spec file", "a JSON object of NAME: value or [lo, hi]")
            for name, value in doc.items():
                _apply(bounds, frozen, name, value, str(path))
            continue
        for item in filter(None, (s.strip() for s in spec.split(","))):
            if item.startswith("+"):
                law = _apply_preset(bounds, frozen, item, PARAMS) or law
                continue
            name, value = _parse_item(item, PARAMS)
            _apply(bounds, frozen, name, value, PARAMS)
    return ParameterSpace(bounds=bounds, frozen=frozen, friction_law=friction_law or law)
