"""FrankaTwin's dynamics parameters of the simulated FR3: the registry `LAYOUT` (names, order in
the vector, units, bounds, nominal values, FrankaTwin's names), the named form
`DynamicsParams`, and profile / `sysid_best_params.json` I/O.

`LAYOUT` is the one place that knows the parameter vector: the population engine, the fit's
parameter space, identifiability, the FrankaTwin importer and the benchmarks ask it for names,
indices and slices (`LAYOUT.take(matrix, "mu_static")`, `LAYOUT.index("motor_delay_ms")`).
It starts with FrankaTwin's 29-value vector (isaaclab_sysid `sysid_franka_osc.py`,
`NUM_PARAMS`): armature, mu_static, dynamic_ratio, mu_viscous per joint J1..J7, then
motor_delay_ms; then the groups FrankaTwin does not have, each frozen at its nominal value in a
fit unless freed (`frozen_by_default`): the true payload at the flange (mass, centre of mass,
diagonal inertia; nominal: none), the Coulomb asymmetry and a constant torque bias per joint
(nominal 0), the sigmoid law's shape, and a per-joint offset of the motor delay (whole ms,
nominal 0: every joint has `motor_delay_ms`), the links' mass scales (nominal 1: the model's
links) and the load-dependent Coulomb friction (nominal 0). A FrankaTwin-length (29,) vector is accepted wherever a
vector is (`from_vector`, `params_matrix`): the other groups take their nominal values.
Adding a parameter is one `ParameterGroup` in `_GROUPS` and a `DynamicsParams` field of the
same name (plus its physics); see docs/simulation.md, "Parameters".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...contracts.jsonfile import read_json_object

from .layout import JOINT_COUNT, ParameterGroup, ParameterLayout
from .load import EndLoad

PROFILE_SCHEMA = "twinlake.profile/v1"
MAX_DELAY_MS = 4
MAX_DELAY_OFFSET_MS = 2  # default bounds ±2 ms of the per-joint delay offsets


def _joint_array(value: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (ValueError, TypeError):
        return None
    return arr if arr.shape == (JOINT_COUNT,) else None


def _ratio_from_mu_dynamic(block: Mapping[str, Any]) -> list[float] | None:
    """dynamic_ratio = mu_dynamic / mu_static (1 where mu_static is not > 0), for a FrankaTwin
    block that gives mu_dynamic only; None without mu_dynamic. A malformed mu_static gives
    ratio 1 (its own check names it)."""
    if block.get("mu_dynamic") is None:
        return None
    mu_d = _joint_array(block["mu_dynamic"])
    if mu_d is None:
        raise ValueError(f"mu_dynamic: expected {JOINT_COUNT} numbers, got {block['mu_dynamic']!r:.60}")
    mu_s = _joint_array(block.get("mu_static"))
    mu_s = np.full(JOINT_COUNT, np.nan) if mu_s is None else mu_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mu_s > 0, mu_d / mu_s, 1.0).tolist()


# The parameter vector, in order. Bounds: FrankaTwin's sysid CLI defaults (armature [0, 0.5],
# friction [0, 5], ratio [0, 1], viscous [0, 5], delay [0, delay_max = 4]); nominal: Menagerie's
# fr3.xml joint dynamics (armature, frictionloss as both Coulomb levels, damping 0.21), no delay.
_GROUPS = (
    ParameterGroup("armature", "kg·m²", (0.0, 0.5), (0.195,) * 4 + (0.074,) * 3, "armature"),
    ParameterGroup("mu_static", "N·m", (0.0, 5.0), (1.137,) * 4 + (0.763, 0.44, 0.248), "mu_static"),
    ParameterGroup("dynamic_ratio", "-", (0.0, 1.0), (1.0,) * 7, "dynamic_ratio",
                   companion="mu_dynamic", derive=_ratio_from_mu_dynamic),
    ParameterGroup("mu_viscous", "N·m·s/rad", (0.0, 5.0), (0.21,) * 7, "mu_viscous"),
    ParameterGroup("motor_delay_ms", "ms", (0.0, float(MAX_DELAY_MS)), (0.0,), "motor_delay_steps",
                   per_joint=False, integer=True, aliases=("delay", "motor_delay_steps"), label="delay"),
    # the true payload at the flange (load.py): beyond FrankaTwin's vector, frozen at none by default
    ParameterGroup("payload_mass", "kg", (0.0, 3.0), (0.0,), None, per_joint=False, frozen_by_default=True,
                   families=("payload",), label="payload m"),
    *(ParameterGroup(f"payload_com_{axis}", "m", (-0.2, 0.2), (0.0,), None, per_joint=False, frozen_by_default=True,
                     families=("payload", "payload_com"), label=f"payload c{axis}") for axis in "xyz"),
    *(ParameterGroup(f"payload_i{axis}{axis}", "kg·m²", (0.0, 0.05), (0.0,), None, per_joint=False,
                     frozen_by_default=True, families=("payload_inertia",), label=f"payload I{axis}{axis}")
      for axis in "xyz"),
    # per joint, beyond FrankaTwin's vector, frozen at 0 by default (plant.py, "Extra joint torques")
    ParameterGroup("coulomb_asymmetry", "N·m", (-1.0, 1.0), (0.0,) * 7, None, frozen_by_default=True,
                   label="asymmetry"),
    ParameterGroup("tau_bias", "N·m", (-3.0, 3.0), (0.0,) * 7, None, frozen_by_default=True, label="bias"),
    # the sigmoid friction law's shape (plant.py; Gaz et al. 2019): steepness φ2, offset φ3
    ParameterGroup("sigmoid_phi2", "s/rad", (5.0, 500.0), (50.0,) * 7, None, frozen_by_default=True, label="φ2"),
    ParameterGroup("sigmoid_phi3", "rad/s", (-0.2, 0.2), (0.0,) * 7, None, frozen_by_default=True, label="φ3"),
    # per-joint offsets of the motor delay [whole ms], frozen at 0 by default: joint j's delay is
    # clip(motor_delay_ms + offset_j, 0, MAX_DELAY_MS) (joint_delay_ticks); FrankaTwin has one delay
    ParameterGroup("motor_delay_offset_ms", "ms", (-float(MAX_DELAY_OFFSET_MS), float(MAX_DELAY_OFFSET_MS)), (0.0,) * 7,
                   None, integer=True, frozen_by_default=True, label="delay offset"),
    # the arm's links as they are (links.py), frozen by default: link j's mass and inertia about its
    # centre of mass are link_mass_scale_j times the model's (centre of mass kept), while the
    # firmware compensates gravity with the model's; and a Coulomb level that grows with the torque
    # the gear transmits (a harmonic drive's load-dependent friction), k_j per N·m
    ParameterGroup("link_mass_scale", "-", (0.8, 1.2), (1.0,) * 7, None, frozen_by_default=True,
                   families=("links",), label="link mass ×"),
    ParameterGroup("coulomb_load_per_nm", "-", (0.0, 0.2), (0.0,) * 7, None, frozen_by_default=True,
                   label="load friction"),
)
_PAYLOAD_COM = ("payload_com_x", "payload_com_y", "payload_com_z")
_PAYLOAD_INERTIA = ("payload_ixx", "payload_iyy", "payload_izz")
LAYOUT = ParameterLayout(_GROUPS)

PARAM_NAMES: tuple[str, ...] = LAYOUT.names
PARAM_COUNT = LAYOUT.size
DEFAULT_BOUNDS = LAYOUT.bounds  # (n, 2) read-only


def delay_ticks(value: float | np.ndarray) -> np.ndarray | int:
    """Round a delay [ms] to whole 1 kHz ticks and clamp to 0..MAX_DELAY_MS (FrankaTwin's rule)."""
    ticks = np.clip(np.rint(np.asarray(value, dtype=np.float64)), 0, MAX_DELAY_MS).astype(np.int64)
    return int(ticks) if ticks.ndim == 0 else ticks


def joint_delay_ticks(params: np.ndarray) -> np.ndarray:
    """Each joint's motor delay [whole 1 kHz ticks] of a (P, n) parameter matrix, (P, 7) int64:
    clip(delay_ticks(motor_delay_ms) + offset_j, 0, MAX_DELAY_MS), the offsets
    (`motor_delay_offset_ms`) rounded to whole ms and clamped to their group's bounds."""
    m = np.atleast_2d(np.asarray(params, dtype=np.float64))
    shared = np.asarray(delay_ticks(LAYOUT.take(m, "motor_delay_ms")), dtype=np.int64).reshape(-1, 1)
    lo, hi = LAYOUT.group("motor_delay_offset_ms").bounds
    offsets = np.clip(np.rint(LAYOUT.take(m, "motor_delay_offset_ms")), lo, hi).astype(np.int64)
    return np.clip(shared + offsets, 0, MAX_DELAY_MS).astype(np.int64)


@dataclass
class DynamicsParams:
    """Dynamics of the simulated FR3, one field per `LAYOUT` group (same names, same order);
    each per-joint array is float64 (7,), joints J1..J7."""

    armature: np.ndarray  # rotor inertia reflected to the joint [kg·m²]
    mu_static: np.ndarray  # breakaway (static) Coulomb level [N·m]
    dynamic_ratio: np.ndarray  # mu_dynamic / mu_static [-]
    mu_viscous: np.ndarray  # viscous coefficient [N·m·s/rad]
    motor_delay_ms: int = 0  # commanded torque applied this many whole ticks later (0..4)
    payload_mass: float = 0.0  # true payload at the flange [kg]
    payload_com_x: float = 0.0  # its centre of mass in the flange frame [m]
    payload_com_y: float = 0.0
    payload_com_z: float = 0.0
    payload_ixx: float = 0.0  # its inertia about the centre of mass, diagonal [kg·m²]
    payload_iyy: float = 0.0
    payload_izz: float = 0.0
    # Coulomb asymmetry δ [N·m]: the sliding level is mu + δ moving forward, mu − δ backward
    coulomb_asymmetry: np.ndarray = field(default_factory=lambda: np.zeros(JOINT_COUNT))
    tau_bias: np.ndarray = field(default_factory=lambda: np.zeros(JOINT_COUNT))  # constant joint torque [N·m]
    sigmoid_phi2: np.ndarray = field(default_factory=lambda: np.full(JOINT_COUNT, 50.0))  # sigmoid law steepness [s/rad]
    sigmoid_phi3: np.ndarray = field(default_factory=lambda: np.zeros(JOINT_COUNT))  # sigmoid law offset [rad/s]
    # per-joint offset of the motor delay [whole ms, stored as float64 (7,)], 0: every joint motor_delay_ms
    motor_delay_offset_ms: np.ndarray = field(default_factory=lambda: np.zeros(JOINT_COUNT))
    # link j's mass and inertia about its centre of mass / the model's [-]; the firmware keeps the model's
    link_mass_scale: np.ndarray = field(default_factory=lambda: np.ones(JOINT_COUNT))
    # growth of the Coulomb level per N·m of transmitted motor torque [-] (links.py)
    coulomb_load_per_nm: np.ndarray = field(default_factory=lambda: np.zeros(JOINT_COUNT))

    def __post_init__(self) -> None:
        for group in LAYOUT.groups:
            setattr(self, group.name, group.coerce(getattr(self, group.name)))

    @property
    def payload(self) -> EndLoad:
        """The true payload at the flange (mass, centre of mass, inertia) as an EndLoad."""
        return EndLoad(self.payload_mass, tuple(getattr(self, n) for n in _PAYLOAD_COM),
                       tuple(getattr(self, n) for n in _PAYLOAD_INERTIA))

    def with_payload(self, payload: EndLoad) -> "DynamicsParams":
        """A copy carrying `payload` as the true payload."""
        values = {g.name: getattr(self, g.name) for g in LAYOUT.groups}
        values["payload_mass"] = payload.mass_kg
        values.update(zip(_PAYLOAD_COM, payload.com_m))
        values.update(zip(_PAYLOAD_INERTIA, payload.inertia_kgm2))
        return DynamicsParams(**values)

    @property
    def joint_delay_ms(self) -> np.ndarray:
        """Each joint's motor delay [whole ms], (7,) int64: motor_delay_ms + its offset, in 0..MAX_DELAY_MS."""
        return joint_delay_ticks(self.to_vector()[None])[0]

    @property
    def mu_dynamic(self) -> np.ndarray:
        """Dynamic (sliding) Coulomb level [N·m], (7,)."""
        return self.dynamic_ratio * self.mu_static

    def to_vector(self) -> np.ndarray:
        """The (n,) float64 vector in `LAYOUT` order (FrankaTwin's 29)."""
        return LAYOUT.vector(self)

    @classmethod
    def from_vector(cls, vector: Any) -> "DynamicsParams":
        """Build from an (n,) vector in `LAYOUT` order (the delay rounded to whole ms and
        clamped to 0..4), or from FrankaTwin's (29,) (the other groups nominal)."""
        v = np.asarray(vector, dtype=np.float64).reshape(-1)
        if v.shape == (len(LAYOUT.frankatwin_indices),):
            v = _widen(v[None])[0]
        if v.shape != (LAYOUT.size,):
            raise ValueError(f"parameter vector: expected {LAYOUT.size} values, got {v.size}")
        return cls(**LAYOUT.split(v))

    @classmethod
    def nominal(cls) -> "DynamicsParams":
        """Menagerie fr3.xml joint dynamics (armature, frictionloss as both levels, damping 0.21), no delay."""
        return cls.from_vector(np.array(LAYOUT.nominal))


def _widen(frankatwin: np.ndarray) -> np.ndarray:
    """(P, n) from FrankaTwin's (P, 29): its values in place, the other groups nominal."""
    out = np.tile(np.array(LAYOUT.nominal), (frankatwin.shape[0], 1))
    out[:, list(LAYOUT.frankatwin_indices)] = frankatwin
    return out


def params_matrix(params: Any) -> np.ndarray:
    """(P, n) float64 from a DynamicsParams, a list of them, an (n,) or a (P, n) array (or
    FrankaTwin's (29,) / (P, 29): the other groups nominal)."""
    if isinstance(params, DynamicsParams):
        return params.to_vector()[None, :]
    if isinstance(params, (list, tuple)) and params and isinstance(params[0], DynamicsParams):
        return np.stack([p.to_vector() for p in params])
    arr = np.atleast_2d(np.asarray(params, dtype=np.float64))
    if arr.ndim == 2 and arr.shape[1] == len(LAYOUT.frankatwin_indices) != LAYOUT.size:
        arr = _widen(arr)
    if arr.ndim != 2 or arr.shape[1] != LAYOUT.size:
        raise ValueError(f"parameters: expected shape (P, {LAYOUT.size}), got {arr.shape}")
    return arr


def to_frankatwin_decoded(params: DynamicsParams) -> dict:
    """FrankaTwin's `best_params_decoded` block for these parameters."""
    return LAYOUT.frankatwin_block(params)


def _from_block(block: dict, path: Path, frankatwin: bool) -> DynamicsParams:
    try:
        return DynamicsParams(**LAYOUT.from_block(block, frankatwin))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_params(path: str | Path) -> DynamicsParams:
    """Read our profile JSON (`schema: twinlake.profile/v1`) or FrankaTwin's sysid_best_params.json."""
    path = Path(path)
    doc = read_json_object(path, "parameter file")
    if doc.get("schema") == PROFILE_SCHEMA:
        if not isinstance(doc.get("params"), dict):
            raise ValueError(f"{path}: field 'params' must be an object")
        return _from_block(doc["params"], path, frankatwin=False)
    if isinstance(doc.get("best_params_decoded"), dict):
        return _from_block(doc["best_params_decoded"], path, frankatwin=True)
    if LAYOUT.group("motor_delay_ms").frankatwin_key in doc:  # FrankaTwin --eval_params also takes the block at top level
        return _from_block(doc, path, frankatwin=True)
    raise ValueError(
        f"{path}: expected schema '{PROFILE_SCHEMA}' or a FrankaTwin 'best_params_decoded' block"
    )


def profile_dict(params: DynamicsParams, **provenance: Any) -> dict:
    """The profile JSON object: schema, params (named), vector, FrankaTwin block, provenance."""
    return {
        "schema": PROFILE_SCHEMA,
        "params": LAYOUT.named(params),
        "vector": dict(zip(LAYOUT.names, params.to_vector().tolist())),
        "best_params_decoded": to_frankatwin_decoded(params),
        "provenance": provenance,
    }


def save_profile(params: DynamicsParams, path: str | Path, **provenance: Any) -> Path:
    """Write a versioned profile JSON (deterministic bytes for the same inputs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(profile_dict(params, **provenance), indent=2, sort_keys=False, default=str)
    path.write_text(text + "\n")
    return path


__all__ = [
    "DEFAULT_BOUNDS",
    "LAYOUT",
    "DynamicsParams",
    "JOINT_COUNT",
    "MAX_DELAY_MS",
    "MAX_DELAY_OFFSET_MS",
    "PARAM_COUNT",
    "PARAM_NAMES",
    "PROFILE_SCHEMA",
    "ParameterGroup",
    "ParameterLayout",
    "delay_ticks",
    "joint_delay_ticks",
    "load_params",
    "params_matrix",
    "profile_dict",
    "save_profile",
    "to_frankatwin_decoded",
]
