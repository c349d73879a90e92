"""twinlake.fit: population-based system identification on Ray, fit records in the lake.

Public face (see fit/README.md):
  objective:  FitProblem (.residuals, .loss, .interval_losses), LossScales, ProblemData, build_data
  data:       IntervalRef, resolve (RUN[:INTERVAL] selectors → clean intervals)
  space:      ParameterSpace, parse_space (freeze / re-bound groups or joints)
  search:     MixedSearch (CMA-ES + categorical delay, best-ever, exact resume)
  driver:     FitSettings, run_fit, resume via run_fit(..., resume=True)
  records:    FitRecord, IntervalUse, SeedResult, load_fit, list_fits, publish_fit

The names are imported on first use (PEP 562), so that `twinlake --help` does not pay for
cma, scipy and MuJoCo: `from twinlake.fit import run_fit` works as before.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "IntervalRef": "intervals",
    "resolve": "intervals",
    "FitProblem": "objective",
    "LossScales": "objective",
    "ProblemData": "objective",
    "build_data": "objective",
    "FitRecord": "record",
    "IntervalUse": "record",
    "SeedResult": "record",
    "list_fits": "record",
    "load_fit": "record",
    "publish_fit": "record",
    "FitSettings": "run",
    "run_fit": "run",
    "MixedSearch": "search",
    "ParameterSpace": "space",
    "parse_space": "space",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'twinlake.fit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"twinlake.fit.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
