"""Inputs of the campaign tests: a lake holding one fit of the demo robot's parameters with
error bars (made by fit/trust/identifiability.py's own analysis of a Jacobian), and a short
excitation reference.csv written by the daemon's planner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from twinlake.daemon import Plan
from twinlake.daemon.excitation import PREVIEW_ANCHOR_Q
from twinlake.daemon.excite_files import reference_table, write_reference_csv
from twinlake.fit.trust.identifiability import analyse
from twinlake.fit.records.record import FitRecord, publish_fit
from twinlake.campaign.plugin import LINK_GROUPS
from twinlake.sim import DEMO_PROFILE_PATH, LAYOUT, load_params

FIT_ID = "demo-fit"


def make_fit(lake: Path, fit_id: str = FIT_ID, *, with_errors: bool = True, delay_probs=None,
             couple: tuple[str, str] | None = None, free_links: bool = False) -> FitRecord:
    """Publish a fit at the demo robot's parameters; its error bars come from `analyse` on a
    seeded random Jacobian (so every continuous parameter gets a finite standard error);
    `couple`: two names whose Jacobian columns nearly coincide (a strongly correlated pair);
    `free_links`: the links' groups (+links, +load-friction) free too, as a fit with those presets."""
    params = load_params(DEMO_PROFILE_PATH)
    x = params.to_vector()
    links = {i for g in LINK_GROUPS for i in LAYOUT.select(g)}
    free = [i for i in range(LAYOUT.size) if i not in LAYOUT.integer_indices and (free_links or i not in links)]
    rng = np.random.default_rng(5)
    jac = rng.normal(size=(400, len(free))) * 40.0
    r0 = rng.normal(size=400) * 0.05
    if couple is not None:
        a, b = (free.index(LAYOUT.index(n)) for n in couple)
        rng_ab = (LAYOUT.bounds[free, 1] - LAYOUT.bounds[free, 0])[[a, b]]
        jac[:, b] = (jac[:, a] + 0.2 * jac[:, b]) * rng_ab[0] / rng_ab[1]  # range-scaled columns nearly equal
    ident = analyse(LAYOUT.names, x, jac, r0, free, LAYOUT.bounds[:, 0], LAYOUT.bounds[:, 1])
    history = [{"iter": 0, "min": 1.0, "mean": 1.0, "best": 1.0, "delay_probs": delay_probs}] if delay_probs else []
    rec = FitRecord(fit_id=fit_id, fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00", status="ok",
                    best_loss=0.5, params=params, seed=0, settings={}, history=history,
                    extra={"identifiability_json": ident.to_json() if with_errors else None})
    publish_fit(lake, rec)
    return rec


def make_reference(directory: Path, seconds: float = 1.0, amplitude_deg: float = 2.0, name="reference.csv") -> Path:
    """A multisine reference of all joints around the preview anchor, with its metadata.json
    (max_velocity 3 rad/s, which the campaign takes as its speed guard)."""
    plan = Plan(mode="multisine", joints=(1, 2, 3, 4, 5, 6, 7), amplitude_deg=amplitude_deg, seconds=seconds,
                ramp=min(0.5, seconds / 4), hold=0.1, tones=(0.5, 1.1), seed=1, rate=100.0, max_velocity=3.0,
                max_acceleration=30.0, max_jerk=500.0)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    write_reference_csv(path, reference_table(plan, PREVIEW_ANCHOR_Q))
    (directory / "metadata.json").write_text(json.dumps({"plan": plan.to_dict()}))
    return path


