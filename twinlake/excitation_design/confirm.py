"""The chosen design confirmed by one replay Jacobian: its predicted 95 % half-widths by the
fit's own covariance rule.

The surrogate (information.py) ranks candidates cheaply but treats the 1 kHz rows as
independent samples (±1.96·σ); a fit's intervals come from a sandwich with a Bartlett
long-run covariance of its per-tick scores, Andrews' bandwidth and a Student t quantile on
the effective degrees of freedom (fit/core/covariance.py, through
fit/trust/identifiability.py). So once the search has picked a design, `confirm` makes the
run the fit would see and asks the fit's rule about it, with the real components:

1. the designed reference at the anchor is recorded by the offline recorder
   (`twinlake sim record`'s engine, daemon/offline.py) on the linearisation point itself as
   the truth (its friction law; the daemon's measurement noise, seed `noise_seed`);
2. the recording is ingested into a scratch lake and read back as the fit reads its
   training data (clean intervals, replay inputs, declared loss scales: fit/core/objective.py);
3. `identifiability_summary` — what `fit show` computes for a stored fit — takes ONE
   central-difference replay Jacobian (2k + 1 replays, one batch) at the linearisation
   point, the residuals there, and the HAC covariance of the fit; each parameter's 95 %
   interval θ ± t·stderr gives its relative half-width by `design_check.relative_half_width`
   (the rule `fit show` uses for the realised ones).

What it assumes: the plant is the model at the linearisation point (a fit on a plant the
model cannot explain has wider intervals and parameters at bounds; see bench/RESULTS.md),
and one noise draw (the HAC bandwidth and the t quantile come from it). Cost for a 40 s
design: a 44 s offline recording, an ingest and ~2.6 M simulator steps (k = 28).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..daemon.excitation import Plan
from ..fit import realised_half_widths
from ..fit import ParameterSpace
from ..sim.arm_model.params import DynamicsParams

ROBOT = "design-confirm"
RUN = "designed"
TAIL_S = 0.3  # recorded after the last reference row [s], as the offline recorder's users do


@dataclass
class Confirmation:
    """The replay's prediction: name → relative 95 % half-width (None: no interval), the worst,
    the covariance's method / bandwidth [ticks] / dof / ticks, the Jacobian's rows and how long
    each step took [s]."""

    half_width_rel: dict[str, float | None]
    worst_rel: float
    covariance: dict
    rows: int
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"half_width_rel": self.half_width_rel, "worst_rel": self.worst_rel, "covariance": self.covariance,
                "rows": self.rows, "seconds": self.seconds}


def _record(plan: Plan, anchor: np.ndarray, at: DynamicsParams, law: str, noise_seed: int, work: Path) -> Path:
    """The offline recording of `plan` at `anchor` on truth `at` (its CSV path)."""
    from ..daemon.excite_files import reference_table, write_reference_csv
    from ..daemon.offline import record_offline
    from ..sim.arm_model.params import save_profile

    reference = work / "reference.csv"
    write_reference_csv(reference, reference_table(plan, anchor))
    truth = save_profile(at, work / "truth.json")
    csv = work / f"{RUN}.csv"
    record_offline(reference, csv, truth_path=str(truth), seed=noise_seed, tail_s=TAIL_S, friction_law=law)
    return csv


def _problem(csv: Path, lake_dir: Path, law: str, nthread: int):
    """The FitProblem of the recording, as `fit run --train` builds it (default scales)."""
    from ..catalog import Lake
    from ..fit import FitProblem, build_data
    from ..ingest import ReadOptions, ingest_paths

    for outcome in ingest_paths(Lake(lake_dir), [csv], ReadOptions(robot=ROBOT, run=RUN)):
        if outcome.status != "published":
            raise RuntimeError(f"design confirmation: ingest of the simulated run {outcome.status}: {outcome.message}")
    return FitProblem(build_data(lake_dir, [f"{ROBOT}/{RUN}"], friction_law=law), nthread=nthread)


def confirm(plan: Plan, anchor, at: DynamicsParams, space: ParameterSpace, *, noise_seed: int = 0,
            nthread: int | None = None, workdir: Path | None = None) -> Confirmation:
    """Predicted relative 95 % half-widths of `space`'s free continuous parameters for a fit on
    `plan` streamed from `anchor` (7,) [rad], linearised at `at` (module docstring).
    `workdir`: keep the recording and scratch lake there (default: a temporary directory)."""
    from ..fit import identifiability_summary

    anchor = np.asarray(anchor, dtype=np.float64)
    nthread = nthread or max(1, min(2, os.cpu_count() or 1))
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="design-confirm-") as scratch:
        work = Path(workdir) if workdir is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        csv = _record(plan, anchor, at, space.friction_law, noise_seed, work)
        seconds["record"] = time.perf_counter() - started
        problem = _problem(csv, work / "lake", space.friction_law, nthread)
        seconds["ingest"] = time.perf_counter() - started - seconds["record"]
        result = identifiability_summary(problem, at.to_vector(), free=space.free_names, bounds=space.bounds)
        seconds["jacobian"] = time.perf_counter() - started - seconds["record"] - seconds["ingest"]
    found = realised_half_widths(result.to_dict())
    half = {name: rel for name, (rel, _) in found.items()}
    finite = [v for v in half.values() if v is not None and np.isfinite(v)]
    return Confirmation(half_width_rel=half, worst_rel=float(max(finite)) if len(finite) == len(half) else float("inf"),
                        covariance=dict(result.covariance_method), rows=int(sum(2 * 7 * len(i.q_ref)
                                                                              for i in problem.data.inputs)),
                        seconds={k: round(v, 2) for k, v in seconds.items()})


__all__ = ["Confirmation", "confirm"]
