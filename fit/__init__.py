"""twinlake.fit: population-based system identification on Ray, fit records in the lake.

Public face (see fit/README.md):
  objective:  FitProblem (.residuals, .loss, .interval_losses), LossScales, ProblemData, build_data
  data:       IntervalRef, resolve (RUN[:INTERVAL] selectors → clean intervals)
  space:      ParameterSpace, parse_space (freeze / re-bound groups or joints)
  search:     MixedSearch (CMA-ES + categorical delay, best-ever, exact resume)
  driver:     FitSettings, run_fit, resume via run_fit(..., resume=True)
  records:    FitRecord, IntervalUse, load_fit, list_fits, publish_fit
"""

from twinlake.fit.intervals import IntervalRef, resolve
from twinlake.fit.objective import FitProblem, LossScales, ProblemData, build_data
from twinlake.fit.record import FitRecord, IntervalUse, list_fits, load_fit, publish_fit
from twinlake.fit.run import FitSettings, run_fit
from twinlake.fit.search import MixedSearch
from twinlake.fit.space import ParameterSpace, parse_space

__all__ = [
    "FitProblem",
    "FitRecord",
    "FitSettings",
    "IntervalRef",
    "IntervalUse",
    "LossScales",
    "MixedSearch",
    "ParameterSpace",
    "ProblemData",
    "build_data",
    "list_fits",
    "load_fit",
    "parse_space",
    "publish_fit",
    "resolve",
    "run_fit",
]
