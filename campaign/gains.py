"""Joint-impedance gains of a campaign: one set (`--kp`, `--kd`) or a grid (`--gains-grid`).

A gain set is fr3_stack's joint impedance configuration: stiffness K [N·m/rad] and damping D
[N·m·s/rad] per joint J1..J7 and the target EMA coefficient. Defaults are fr3_stack's
`configs/joint_impedance.yaml` (the daemon client's defaults).

`--gains-grid` SPEC: `kp_scale=0.5,1,2;kd_scale=0.8,1[;alpha=0.05,0.1]`, the Cartesian
product of scale factors applied to the base `--kp`/`--kd` (and EMA coefficients), or the
path of a JSON file holding a list of `{"kp": [7], "kd": [7], "filter_alpha": a}` objects.
Gain set g gets the id `g<g:02d>`; every gain set runs the same parameter draws (episode
sample i of every gain set uses the same seed), so gain sets compare on the same arms.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..daemon.client import DEFAULT_D_JOINT, DEFAULT_FILTER_ALPHA, DEFAULT_K_JOINT


@dataclass(frozen=True)
class GainSet:
    """One joint-impedance configuration: kp_nm_per_rad, kd_nms_per_rad (7,) tuples, filter_alpha."""

    gains_id: str
    kp_nm_per_rad: tuple[float, ...] = DEFAULT_K_JOINT
    kd_nms_per_rad: tuple[float, ...] = DEFAULT_D_JOINT
    filter_alpha: float = DEFAULT_FILTER_ALPHA

    def __post_init__(self) -> None:
        for name in ("kp_nm_per_rad", "kd_nms_per_rad"):
            values = tuple(float(v) for v in getattr(self, name))
            if len(values) != 7 or not all(np.isfinite(values)) or min(values) <= 0:
                raise ValueError(f"gains {self.gains_id} {name}: expected 7 finite values > 0, got {list(values)}")
            object.__setattr__(self, name, values)
        if not 0 < float(self.filter_alpha) <= 1:
            raise ValueError(f"gains {self.gains_id} filter_alpha: expected 0 < alpha <= 1, got {self.filter_alpha}")
        object.__setattr__(self, "filter_alpha", float(self.filter_alpha))

    def to_dict(self) -> dict:
        return {"gains_id": self.gains_id, "kp_nm_per_rad": list(self.kp_nm_per_rad),
                "kd_nms_per_rad": list(self.kd_nms_per_rad), "filter_alpha": self.filter_alpha}

    def columns(self) -> dict:
        """Flat summary columns: kp_j1..7, kd_j1..7, filter_alpha."""
        out = {f"kp_j{j + 1}": v for j, v in enumerate(self.kp_nm_per_rad)}
        out.update({f"kd_j{j + 1}": v for j, v in enumerate(self.kd_nms_per_rad)})
        out["filter_alpha"] = self.filter_alpha
        return out


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected numbers") from None


def base_gains(kp: list[float] | None, kd: list[float] | None, filter_alpha: float | None) -> GainSet:
    """The single gain set of `--kp`, `--kd` (7 values each, defaults fr3_stack's)."""
    return GainSet("g00", tuple(kp) if kp else DEFAULT_K_JOINT, tuple(kd) if kd else DEFAULT_D_JOINT,
                   DEFAULT_FILTER_ALPHA if filter_alpha is None else filter_alpha)


def gains_grid(spec: str, base: GainSet) -> list[GainSet]:
    """The gain sets of a `--gains-grid` SPEC (see the module docstring); ValueError naming the item."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        try:
            items = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"--gains-grid {spec}: cannot read a JSON list ({exc})") from None
        if not isinstance(items, list) or not items:
            raise ValueError(f"--gains-grid {spec}: expected a non-empty JSON list of gain objects")
        out = []
        for g, item in enumerate(items):
            if not isinstance(item, dict) or "kp" not in item or "kd" not in item:
                raise ValueError(f"--gains-grid {spec}: item {g}: expected an object with 'kp' and 'kd'")
            out.append(GainSet(f"g{g:02d}", item["kp"], item["kd"], item.get("filter_alpha", base.filter_alpha)))
        return out
    axes = {"kp_scale": [1.0], "kd_scale": [1.0], "alpha": [base.filter_alpha]}
    for item in (s.strip() for s in spec.split(";")):
        if not item:
            continue
        key, sep, values = item.partition("=")
        if not sep or key.strip() not in axes:
            raise ValueError(f"--gains-grid {item!r}: expected kp_scale=…, kd_scale=… or alpha=… (or a JSON file)")
        axes[key.strip()] = _floats(values, f"--gains-grid {key.strip()}")
        if not axes[key.strip()]:
            raise ValueError(f"--gains-grid {item!r}: no values")
    out = []
    for g, (ks, ds, alpha) in enumerate(itertools.product(axes["kp_scale"], axes["kd_scale"], axes["alpha"])):
        out.append(GainSet(f"g{g:02d}", tuple(ks * np.array(base.kp_nm_per_rad)),
                           tuple(ds * np.array(base.kd_nms_per_rad)), alpha))
    return out


__all__ = ["GainSet", "base_gains", "gains_grid"]
