"""A fit's extras, typed: the columns of `fits/fit=<id>/fit.parquet` beyond the fit's identity,
loss and parameters (`FitRecord.extra`, one column per field, in the field order below).

Each route builds its own: `ReplayExtras` (fit/run.py) and `TorqueExtras` (fit/torque/). The
stored form stays what it was (`to_json()` is the column -> value mapping the record writes,
JSON documents as strings in the `*_json` columns); a reader takes a stored record's extras
back with `from_json` (columns a route did not write are None; columns it does not know,
from older fits or imports, are ignored). Units: seconds [s]; losses in the route's own units
(the replay's objective, the torque route's mean square residual [N·m²]).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


class _Columns:
    """to_json / from_json for a dataclass of columns."""

    def to_json(self) -> dict[str, Any]:
        """Column name -> value, in field order (what `publish_fit` writes)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, extra: dict[str, Any]):
        """The typed extras of a stored record's `extra` (absent columns as None)."""
        return cls(**{f.name: extra.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass
class ReplayExtras(_Columns):
    """The replay search's columns (fit/run.py): the search's size (`generations`,
    `population`, `refine_iterations` LM iterations taken, `seed_count`, `workers`,
    `actor_replacements`), its wall time `wall_s` [s], the training and held-out losses,
    `at_bounds` (names of the parameters at a bound), `method` ('local' or 'cma'), the local
    search's gates verdict `local_gates`, the error bars (`identifiability_json`) and the time
    they took (`error_bars_s` [s]), the configured end loads (`configured_load_json`), model
    adequacy (`adequacy_json` and the floor ratios) and `lake_version` (the lake version read)."""

    generations: int | None = None
    population: int | None = None
    refine_iterations: int | None = None
    wall_s: float | None = None
    train_loss: float | None = None
    holdout_loss: float | None = None
    at_bounds: list[str] | None = None
    workers: int | None = None
    actor_replacements: int | None = None
    seed_count: int | None = None
    method: str | None = None
    local_gates: str | None = None
    identifiability_json: str | None = None
    configured_load_json: str | None = None
    error_bars_s: float | None = None
    adequacy_json: str | None = None
    train_floor_ratio: float | None = None
    holdout_floor_ratio: float | None = None
    lake_version: int | None = None


@dataclass
class TorqueExtras(_Columns):
    """The torque route's columns (fit/torque/route.py and the quasi-static record):
    `method` ('torque'), `wall_s` [s], the training and held-out mean square torque residuals
    [N·m²], the error bars (`identifiability_json`), the torque floor ratios, and what the route
    did and found (`torque_json`, fit/torque/README.md)."""

    method: str | None = None
    wall_s: float | None = None
    train_loss: float | None = None
    holdout_loss: float | None = None
    identifiability_json: str | None = None
    train_floor_ratio: float | None = None
    holdout_floor_ratio: float | None = None
    torque_json: str | None = None


__all__ = ["ReplayExtras", "TorqueExtras"]
