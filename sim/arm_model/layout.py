"""ParameterGroup and ParameterLayout: an ordered registry of named parameter groups that owns
where each group lives in a flat parameter vector, and converts between the vector and named
per-group values.

A group is `size` values (one per joint when `per_joint`), with a unit, default bounds, a
nominal value, its key in FrankaTwin's `best_params_decoded` block and whether it takes whole
values only (the motor delay). The vector is the groups' values concatenated in registry
order; a (P, n) matrix holds one candidate per row. The registry itself is
`twinlake.sim.arm_model.params.LAYOUT`; this module knows nothing of the FR3.

The design follows MuJoCo's sysid `ParameterDict` (an ordered dict of named, bounded
parameters flattened in insertion order) with one difference: a layout holds no values, only
the description, so one object serves every vector, matrix and file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

JOINT_COUNT = 7


@dataclass(frozen=True)
class ParameterGroup:
    """One named group of the parameter vector.

    name: the DynamicsParams field and our profile's key; unit: of every value ("-" for a
    ratio); bounds: default [lo, hi] of every value (the search box); nominal: (size,) values
    when nothing is known; frankatwin_key: its key in FrankaTwin's `best_params_decoded`
    (None: FrankaTwin has no such parameter and a FrankaTwin file gives `nominal`);
    per_joint: one value per joint J1..J7 (names `<name>_j1..j7`), else one value (`<name>`);
    integer: whole values only, rounded and clamped to `bounds`; aliases: other names a
    selector accepts; label: short display name; companion: a derived quantity (a
    DynamicsParams attribute) FrankaTwin writes right after this group; derive: recovers this
    group's values from a block that lacks it (FrankaTwin's `mu_dynamic` instead of
    `dynamic_ratio`), None when it cannot; frozen_by_default: a fit holds it at `nominal`
    unless `--params` or a preset frees it (the groups beyond FrankaTwin's 29); families:
    names of sets of groups a selector also accepts (`payload_com` selects `payload_com_x`,
    `payload_com_y`, `payload_com_z`).
    """

    name: str
    unit: str
    bounds: tuple[float, float]
    nominal: tuple[float, ...]
    frankatwin_key: str | None
    per_joint: bool = True
    integer: bool = False
    aliases: tuple[str, ...] = ()
    label: str | None = None
    companion: str | None = None
    derive: Callable[[Mapping[str, Any]], Any] | None = None
    frozen_by_default: bool = False
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.nominal) != self.size:
            raise ValueError(f"parameter group {self.name}: nominal has {len(self.nominal)} values, expected {self.size}")
        lo, hi = self.bounds
        if not lo <= hi:
            raise ValueError(f"parameter group {self.name}: bounds {self.bounds} are not lo <= hi")

    @property
    def size(self) -> int:
        return JOINT_COUNT if self.per_joint else 1

    @property
    def names(self) -> tuple[str, ...]:
        """The names of its values in the vector: `<name>_j1..j7`, or `<name>`."""
        if self.per_joint:
            return tuple(f"{self.name}_j{j}" for j in range(1, JOINT_COUNT + 1))
        return (self.name,)

    @property
    def display(self) -> str:
        return self.label or self.name

    def coerce(self, value: Any) -> np.ndarray | int | float:
        """A checked value of this group: float64 (size,) per joint, an int (integer, rounded
        and clamped to `bounds`) or a float. ValueError naming the group otherwise."""
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
        if arr.shape != (self.size,):
            raise ValueError(f"{self.name}: expected {self.size} values, got {arr.size}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{self.name}: expected finite values, got {arr.tolist()}")
        if self.integer:
            whole = np.clip(np.rint(arr), *self.bounds).astype(np.int64)
            return int(whole[0]) if not self.per_joint else whole.astype(np.float64)
        return arr if self.per_joint else float(arr[0])

    def to_json(self, value: Any) -> Any:
        """JSON form of a coerced value: a list per joint, else an int or a float."""
        if self.per_joint:
            return np.asarray(value, dtype=np.float64).tolist()
        return int(value) if self.integer else float(value)


class ParameterLayout:
    """The ordered groups of a parameter vector of `size` values.

    Index by name (`index`, `slice`, `take`, `split`, `select`), convert named values to a
    vector (`vector`) and back (`split` + the groups' `coerce`), and map to and from named
    JSON blocks: ours (keys = group names) and FrankaTwin's `best_params_decoded`.
    """

    def __init__(self, groups: Sequence[ParameterGroup]):
        self.groups: tuple[ParameterGroup, ...] = tuple(groups)
        self._by_name: dict[str, ParameterGroup] = {}
        for g in self.groups:
            for key in (g.name, *g.aliases):
                if key in self._by_name:
                    raise ValueError(f"parameter layout: name {key!r} is used twice")
                self._by_name[key] = g
        self.names: tuple[str, ...] = tuple(n for g in self.groups for n in g.names)
        if len(set(self.names)) != len(self.names):
            raise ValueError("parameter layout: two groups give the same parameter name")
        self.size = len(self.names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._slices: dict[str, slice] = {}
        start = 0
        for g in self.groups:
            self._slices[g.name] = slice(start, start + g.size)
            start += g.size
        self.bounds = self._frozen([g.bounds for g in self.groups for _ in g.names])
        self.nominal = self._frozen([v for g in self.groups for v in g.nominal])
        self.units: tuple[str, ...] = tuple(g.unit for g in self.groups for _ in g.names)
        self.integer_indices: tuple[int, ...] = self._positions(g for g in self.groups if g.integer)
        # FrankaTwin's vector: the values of the groups it has, in order
        self.frankatwin_indices: tuple[int, ...] = self._positions(g for g in self.groups if g.frankatwin_key)
        # what a fit holds at nominal unless told otherwise: index -> value
        self.default_frozen: dict[int, float] = {
            i: float(self.nominal[i]) for i in self._positions(g for g in self.groups if g.frozen_by_default)}
        self._families: dict[str, list[ParameterGroup]] = {}
        for g in self.groups:
            for family in g.families:
                if family in self._by_name:
                    raise ValueError(f"parameter layout: family {family!r} is also a group name")
                self._families.setdefault(family, []).append(g)

    def _positions(self, groups) -> tuple[int, ...]:
        return tuple(i for g in groups for i in range(self._slices[g.name].start, self._slices[g.name].stop))

    @staticmethod
    def _frozen(rows: list) -> np.ndarray:
        arr = np.array(rows, dtype=np.float64)
        arr.setflags(write=False)
        return arr

    @property
    def joint_groups(self) -> tuple[ParameterGroup, ...]:
        """The groups with one value per joint, in order."""
        return tuple(g for g in self.groups if g.per_joint)

    @property
    def scalar_groups(self) -> tuple[ParameterGroup, ...]:
        """The groups with one value, in order."""
        return tuple(g for g in self.groups if not g.per_joint)

    def group(self, name: str) -> ParameterGroup:
        """The group called `name` (or an alias of it); ValueError listing the groups otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(f"unknown parameter group {name!r}: expected one of "
                             f"{', '.join(g.name for g in self.groups)}") from None

    def group_of(self, name: str) -> ParameterGroup:
        """The group a parameter name (`mu_static_j3`, `motor_delay_ms`) belongs to."""
        i = self.index(name)
        return next(g for g in self.groups if self._slices[g.name].start <= i < self._slices[g.name].stop)

    def joint_of(self, name: str) -> int | None:
        """The joint (1..7) a per-joint parameter name is of (`mu_static_j3`: 3); None for a
        one-value group's (`motor_delay_ms`); ValueError for an unknown name."""
        i, g = self.index(name), self.group_of(name)
        return i - self._slices[g.name].start + 1 if g.per_joint else None

    def index(self, name: str) -> int:
        """Position of a parameter name (or the alias of a one-value group) in the vector;
        ValueError otherwise."""
        if name in self._index:
            return self._index[name]
        g = self._by_name.get(name)
        if g is not None and not g.per_joint:
            return self._slices[g.name].start
        raise ValueError(f"unknown parameter {name!r}: expected one of {', '.join(self.names)}")

    def slice(self, group: str) -> slice:
        """The vector positions of a group."""
        return self._slices[self.group(group).name]

    def take(self, params: np.ndarray, group: str) -> np.ndarray:
        """A group's values of a (..., n) vector or matrix, as a view: (..., size) for a
        per-joint group, (...) for a one-value group."""
        g = self.group(group)
        s = self._slices[g.name]
        return params[..., s] if g.per_joint else params[..., s.start]

    def split(self, params: np.ndarray) -> dict[str, np.ndarray]:
        """Every group's values of a (..., n) array (`take` per group), keyed by group name."""
        arr = np.asarray(params)
        if arr.shape[-1:] != (self.size,):
            raise ValueError(f"parameters: expected {self.size} values in the last axis, got shape {arr.shape}")
        return {g.name: self.take(arr, g.name) for g in self.groups}

    def vector(self, values: Any) -> np.ndarray:
        """The (n,) float64 vector of named values: an object with one attribute per group (a
        DynamicsParams) or a mapping group name -> value."""
        get = values.get if isinstance(values, Mapping) else (lambda name: getattr(values, name))
        return np.concatenate([np.atleast_1d(np.asarray(get(g.name), dtype=np.float64)) for g in self.groups])

    def select(self, selector: str) -> list[int]:
        """Indices named by a selector: a group (`armature`) or its alias (`delay`), a family
        (`payload_com`), a joint (`j3`: that joint's value of every per-joint group a fit frees
        by default) or a parameter name (`mu_static_j3`).
        ValueError with the choices otherwise."""
        key = selector.strip()
        if key in self._index:
            return [self._index[key]]
        if key in self._by_name:
            return list(range(*self.slice(key).indices(self.size)))
        if key in self._families:
            return [i for g in self._families[key] for i in range(*self.slice(g.name).indices(self.size))]
        if key in {f"j{j}" for j in range(1, JOINT_COUNT + 1)}:  # the groups a fit frees by default
            return [self._index[f"{g.name}_{key}"] for g in self.joint_groups if not g.frozen_by_default]
        joint = self.joint_groups
        example = f", a name such as {joint[min(1, len(joint) - 1)].names[2]}" if joint else ""
        singles = [*(g.name for g in self.scalar_groups), *self._families]
        rest = "" if not singles else f", or {singles[0]}" if len(singles) == 1 else f", or one of {', '.join(singles)}"
        raise ValueError(
            f"unknown parameter selector {selector!r}: expected a group ({', '.join(g.name for g in joint)}), "
            f"a joint (j1..j{JOINT_COUNT}){example}{rest}"
        )

    @property
    def families(self) -> tuple[str, ...]:
        """The family names a selector accepts besides group names (`payload_com`)."""
        return tuple(self._families)

    def named(self, params: Any) -> dict[str, Any]:
        """Our JSON block of a DynamicsParams: group name -> value (a list per joint)."""
        return {g.name: g.to_json(getattr(params, g.name)) for g in self.groups}

    def frankatwin_block(self, params: Any) -> dict[str, Any]:
        """FrankaTwin's `best_params_decoded` block of a DynamicsParams (its keys and order,
        derived quantities included; groups FrankaTwin does not have are left out)."""
        block: dict[str, Any] = {}
        for g in self.groups:
            if g.frankatwin_key is None:
                continue
            block[g.frankatwin_key] = g.to_json(getattr(params, g.name))
            if g.companion is not None:
                block[g.companion] = np.asarray(getattr(params, g.companion), dtype=np.float64).tolist()
        return block

    def block_key(self, group: ParameterGroup, frankatwin: bool) -> str | None:
        """A group's key in FrankaTwin's block (`frankatwin`) or in ours."""
        return group.frankatwin_key if frankatwin else group.name

    def block_value(self, block: Mapping[str, Any], group: str, frankatwin: bool) -> Any:
        """A group's raw value in a named block (FrankaTwin's when `frankatwin`, else ours):
        the entry under its key, else what `derive` recovers from the block, else None; a
        group FrankaTwin does not have gives its nominal value from a FrankaTwin block."""
        g = self.group(group)
        key = self.block_key(g, frankatwin)
        if key is None:
            return g.to_json(g.coerce(g.nominal))
        if key in block:
            return block[key]
        if g.derive is not None:
            return g.derive(block)
        # a group added after the file was written (beyond FrankaTwin's 29): its nominal value
        return g.to_json(g.coerce(g.nominal)) if g.frozen_by_default else None

    def from_block(self, block: Mapping[str, Any], frankatwin: bool) -> dict[str, Any]:
        """Raw values per group name of a named block (whole values of integer groups are
        `int()` of the entry, as FrankaTwin writes them); ValueError naming missing keys."""
        values = {g.name: self.block_value(block, g.name, frankatwin) for g in self.groups}
        missing = [self.block_key(g, frankatwin) for g in self.groups if values[g.name] is None]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        for g in self.groups:
            if g.integer and not g.per_joint:
                values[g.name] = int(values[g.name])
        return values


__all__ = ["JOINT_COUNT", "ParameterGroup", "ParameterLayout"]
