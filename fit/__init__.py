"""twinlake.fit: population-based system identification on Ray, fit records in the lake.

Public face (see fit/README.md):
  objective:  FitProblem (.residuals, .loss, .interval_losses), LossScales, ProblemData, build_data
  data:       IntervalRef, resolve (RUN[:INTERVAL] selectors → clean intervals)
  space:      ParameterSpace, parse_space (freeze / re-bound groups or joints)
  search:     MixedSearch (CMA-ES + categorical delay, best-ever, exact resume)
  driver:     FitSettings, run_fit, resume via run_fit(..., resume=True)
  records:    FitRecord, IntervalUse, SeedResult, load_fit, list_fits, publish_fit

The names are imported on first use (PEP 562, contracts/lazy.py), so that a user of the fit
records alone (`fit list`, `fit show`) does not pay for cma, scipy and MuJoCo:
`from twinlake.fit import run_fit` works as before.
"""

from __future__ import annotations

from ..contracts.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {
    "replay.intervals": ("IntervalRef", "resolve"),
    "replay.objective": ("FitProblem", "LossScales", "ProblemData", "build_data"),
    "records.record": ("FitRecord", "IntervalUse", "SeedResult", "list_fits", "load_fit", "publish_fit"),
    "run": ("FitSettings", "run_fit"),
    "replay.search": ("MixedSearch",),
    "replay.space": ("ParameterSpace", "parse_space"),
})
