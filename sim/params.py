"""FrankaTwin's 29 dynamics parameters: named form, vector form, bounds and JSON.

Layout of the (29,) vector (specs/frankatwin.md §3.1):
    0-6   armature_j1..j7       [kg·m²]
    7-13  mu_static_j1..j7      [N·m]     static (breakaway) friction
    14-20 dynamic_ratio_j1..j7  [-]       mu_dynamic = dynamic_ratio · mu_static
    21-27 mu_viscous_j1..j7     [N·m·s/rad]
    28    motor_delay_ms        [ms]      whole ticks of the 1 kHz loop (rounded, clamped 0..4)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinlake.jsonfile import read_json_object

JOINT_COUNT = 7
PARAM_COUNT = 29
PROFILE_SCHEMA = "twinlake.profile/v1"
MAX_DELAY_MS = 4

_GROUPS = ("armature", "mu_static", "dynamic_ratio", "mu_viscous")
PARAM_NAMES: tuple[str, ...] = tuple(
    f"{g}_j{j}" for g in _GROUPS for j in range(1, JOINT_COUNT + 1)
) + ("motor_delay_ms",)

# FrankaTwin sysid CLI defaults: armature [0,0.5], friction [0,5], ratio [0,1], viscous [0,5], delay [0,4]
DEFAULT_BOUNDS = np.array(
    [[0.0, 0.5]] * 7 + [[0.0, 5.0]] * 7 + [[0.0, 1.0]] * 7 + [[0.0, 5.0]] * 7 + [[0.0, 4.0]],
    dtype=np.float64,
)
DEFAULT_BOUNDS.setflags(write=False)


def _vec7(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (JOINT_COUNT,):
        raise ValueError(f"{name}: expected 7 values, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: expected finite values, got {arr.tolist()}")
    return arr


def delay_ticks(value: float | np.ndarray) -> np.ndarray | int:
    """Round a delay [ms] to whole 1 kHz ticks and clamp to 0..MAX_DELAY_MS (FrankaTwin's rule)."""
    ticks = np.clip(np.rint(np.asarray(value, dtype=np.float64)), 0, MAX_DELAY_MS).astype(np.int64)
    return int(ticks) if ticks.ndim == 0 else ticks


@dataclass
class DynamicsParams:
    """Per-joint dynamics of the simulated FR3; each array is float64 (7,), joints J1..J7."""

    armature: np.ndarray  # rotor inertia reflected to the joint [kg·m²]
    mu_static: np.ndarray  # breakaway (static) Coulomb level [N·m]
    dynamic_ratio: np.ndarray  # mu_dynamic / mu_static [-]
    mu_viscous: np.ndarray  # viscous coefficient [N·m·s/rad]
    motor_delay_ms: int = 0  # commanded torque applied this many whole ticks later

    def __post_init__(self) -> None:
        for name in _GROUPS:
            setattr(self, name, _vec7(getattr(self, name), name))
        self.motor_delay_ms = int(delay_ticks(self.motor_delay_ms))

    @property
    def mu_dynamic(self) -> np.ndarray:
        """Dynamic (sliding) Coulomb level [N·m], (7,)."""
        return self.dynamic_ratio * self.mu_static

    def to_vector(self) -> np.ndarray:
        """The (29,) float64 vector in FrankaTwin's layout."""
        return np.concatenate(
            [self.armature, self.mu_static, self.dynamic_ratio, self.mu_viscous, [float(self.motor_delay_ms)]]
        )

    @classmethod
    def from_vector(cls, vector: Any) -> "DynamicsParams":
        """Build from a (29,) vector (delay rounded to whole ms and clamped to 0..4)."""
        v = np.asarray(vector, dtype=np.float64).reshape(-1)
        if v.shape != (PARAM_COUNT,):
            raise ValueError(f"parameter vector: expected 29 values, got {v.size}")
        return cls(v[0:7], v[7:14], v[14:21], v[21:28], int(delay_ticks(v[28])))

    @classmethod
    def nominal(cls) -> "DynamicsParams":
        """Menagerie fr3.xml joint dynamics (armature, frictionloss as both levels, damping 0.21), no delay."""
        return cls(
            armature=[0.195] * 4 + [0.074] * 3,
            mu_static=[1.137] * 4 + [0.763, 0.44, 0.248],
            dynamic_ratio=[1.0] * 7,
            mu_viscous=[0.21] * 7,
            motor_delay_ms=0,
        )


def params_matrix(params: Any) -> np.ndarray:
    """(P,29) float64 from a DynamicsParams, a list of them, a (29,) or a (P,29) array."""
    if isinstance(params, DynamicsParams):
        return params.to_vector()[None, :]
    if isinstance(params, (list, tuple)) and params and isinstance(params[0], DynamicsParams):
        return np.stack([p.to_vector() for p in params])
    arr = np.atleast_2d(np.asarray(params, dtype=np.float64))
    if arr.ndim != 2 or arr.shape[1] != PARAM_COUNT:
        raise ValueError(f"parameters: expected shape (P, 29), got {arr.shape}")
    return arr


def to_frankatwin_decoded(params: DynamicsParams) -> dict:
    """FrankaTwin's `best_params_decoded` block for these parameters."""
    return {
        "armature": params.armature.tolist(),
        "mu_static": params.mu_static.tolist(),
        "dynamic_ratio": params.dynamic_ratio.tolist(),
        "mu_dynamic": params.mu_dynamic.tolist(),
        "mu_viscous": params.mu_viscous.tolist(),
        "motor_delay_steps": int(params.motor_delay_ms),
    }


def _from_block(block: dict, path: Path, delay_key: str) -> DynamicsParams:
    missing = [k for k in (*_GROUPS, delay_key) if k not in block]
    if "dynamic_ratio" in missing and "mu_dynamic" in block:
        missing.remove("dynamic_ratio")
        mu_s = np.asarray(block.get("mu_static", [np.nan] * 7), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(mu_s > 0, np.asarray(block["mu_dynamic"], dtype=np.float64) / mu_s, 1.0)
        block = {**block, "dynamic_ratio": ratio.tolist()}
    if missing:
        raise ValueError(f"{path}: missing field(s) {', '.join(missing)}")
    try:
        return DynamicsParams(
            armature=block["armature"],
            mu_static=block["mu_static"],
            dynamic_ratio=block["dynamic_ratio"],
            mu_viscous=block["mu_viscous"],
            motor_delay_ms=int(block[delay_key]),
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_params(path: str | Path) -> DynamicsParams:
    """Read our profile JSON (`schema: twinlake.profile/v1`) or FrankaTwin's sysid_best_params.json."""
    path = Path(path)
    doc = read_json_object(path, "parameter file")
    if doc.get("schema") == PROFILE_SCHEMA:
        if not isinstance(doc.get("params"), dict):
            raise ValueError(f"{path}: field 'params' must be an object")
        return _from_block(doc["params"], path, "motor_delay_ms")
    if isinstance(doc.get("best_params_decoded"), dict):
        return _from_block(doc["best_params_decoded"], path, "motor_delay_steps")
    if "motor_delay_steps" in doc:  # FrankaTwin --eval_params also accepts the block at top level
        return _from_block(doc, path, "motor_delay_steps")
    raise ValueError(
        f"{path}: expected schema '{PROFILE_SCHEMA}' or a FrankaTwin 'best_params_decoded' block"
    )


def profile_dict(params: DynamicsParams, **provenance: Any) -> dict:
    """The profile JSON object: schema, params (named), vector, FrankaTwin block, provenance."""
    return {
        "schema": PROFILE_SCHEMA,
        "params": {
            "armature": params.armature.tolist(),
            "mu_static": params.mu_static.tolist(),
            "dynamic_ratio": params.dynamic_ratio.tolist(),
            "mu_viscous": params.mu_viscous.tolist(),
            "motor_delay_ms": int(params.motor_delay_ms),
        },
        "vector": dict(zip(PARAM_NAMES, params.to_vector().tolist())),
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
    "DynamicsParams",
    "JOINT_COUNT",
    "MAX_DELAY_MS",
    "PARAM_COUNT",
    "PARAM_NAMES",
    "PROFILE_SCHEMA",
    "delay_ticks",
    "load_params",
    "params_matrix",
    "profile_dict",
    "save_profile",
    "to_frankatwin_decoded",
]
