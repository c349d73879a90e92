"""`twinlake excite --design`: the linearisation point, the bounds, the search and its report.

The linearisation point is a fit (`--for FIT`, read from the lake), a profile JSON
(`--for PATH`) or the nominal parameters (LAYOUT's). Each joint's position bound is the
tighter of `TRACKING_FRACTION` × the tracking guard's bound (the anchor rule: |q − anchor|
≤ tracking_error, with room for the controller's lag) and 95 % of the distance from the anchor
to the joint-limit repulsion zone; the velocity bound is `SPEED_FRACTION` × the plan's (the
streaming guard judges measured speed), acceleration and jerk the plan's preflight bounds. The `design` section of metadata.json holds the predicted relative half-width of every
chosen parameter, the same surrogate's prediction for fr3_stack's documented multisine of the
same duration (`baseline_plan`: tones 0.1 0.23 0.41 Hz, 1°, seed 0), and the search settings.

The stored and printed prediction (`predicted_half_width_rel`, `prediction` says which) is by
default the confirmation's (confirm.py: one replay Jacobian of the chosen design and the fit's
own HAC covariance rule, the rule the realised intervals will follow); with `confirm=False`
(`--no-confirm`) it is the surrogate's, stated as such. The surrogate's own numbers are
always kept (`surrogate_half_width_rel`), and the baseline's are the surrogate's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..daemon.excitation import Q_LOWER, Q_UPPER, Plan
from ..sim.arm_model.params import DynamicsParams, load_params
from ..fit import parse_space
from .candidates import DesignBounds
from .information import NOISE_TAU_NM, RATE_HZ, choose
from .search import Design, SearchSettings, design, predict

TRACKING_FRACTION = 0.6
SPEED_FRACTION = 0.6
"""The reference's peak joint speed is held to this fraction of the plan's max_velocity: the
streaming guard judges the *measured* |dq|, which overshoots the reference by the tracking
dynamics, the sensor noise and the step a late stream of targets makes (a live run of a design
at 0.97 × 0.1 rad/s was stopped at 0.1039 rad/s measured on J3; one at 0.78 × was stopped at
0.104 rad/s on J5 of a loaded machine, its peak 1.46 × the reference's after a 26 ms stall)."""
SCHEMA = "twinlake.excitation_design/v1"
PREDICTION_REPLAY = "replay_jacobian_hac"
PREDICTION_SURROGATE = "surrogate"


def linearisation_point(design_for: str | None, lake: Path | None) -> tuple[DynamicsParams, str]:
    """(parameters, description) of `--for`: None the nominal ones, an existing file a profile,
    else a fit id in `lake`."""
    if design_for is None:
        return DynamicsParams.nominal(), "nominal"
    if Path(design_for).is_file():
        return load_params(design_for), f"profile {design_for}"
    from ..fit import load_fit

    if lake is None:
        raise ValueError(f"--for {design_for!r}: not a file; a fit id needs --lake")
    return load_fit(lake, design_for).params, f"fit {design_for}"


def joint_bounds(plan: Plan, anchor: np.ndarray, tracking_error_rad: float) -> list[DesignBounds]:
    """Each joint's DesignBounds (module docstring)."""
    room = 0.95 * np.minimum(anchor - Q_LOWER, Q_UPPER - anchor)
    if np.any(room <= 0):
        j = int(np.flatnonzero(room <= 0)[0])
        raise ValueError(f"joint {j + 1}: anchor {anchor[j]:.4f} rad is inside the joint-limit repulsion zone")
    return [DesignBounds(position_rad=float(min(TRACKING_FRACTION * tracking_error_rad, room[j])),
                         velocity_rad_s=SPEED_FRACTION * plan.max_velocity, acceleration_rad_s2=plan.max_acceleration,
                         jerk_rad_s3=plan.max_jerk) for j in range(7)]


def baseline_plan(base: Plan) -> Plan:
    """fr3_stack's documented multisine over the same segment (all joints, 0.1 0.23 0.41 Hz,
    1°, phase seed 0)."""
    return replace(base, mode="multisine", joints=tuple(range(1, 8)), tones=(0.1, 0.23, 0.41), amplitude_deg=1.0,
                   seed=0, tone_table=())


def run_design(base: Plan, anchor, *, design_for: str | None = None, lake: Path | None = None,
               params: list[str] = (), criterion: str = "worst", tracking_error_rad: float = 0.05,
               settings: SearchSettings = SearchSettings(), confirm: bool = True,
               confirm_seed: int = 0) -> tuple[Design, dict]:
    """The design and its `design` metadata section; `confirm`: predict by one replay
    Jacobian of the chosen design (confirm.py, noise seed `confirm_seed`), else by the surrogate."""
    anchor = np.asarray(anchor, dtype=np.float64)
    at, described = linearisation_point(design_for, lake)
    space = parse_space(params)
    chosen = choose(space, at)
    bounds = joint_bounds(base, anchor, tracking_error_rad)
    found = design(chosen, base, bounds, anchor, settings, criterion)
    baseline = baseline_plan(base)
    base_hw, base_logdet = predict(baseline, chosen, settings.grid_hz)
    section = {
        "schema": SCHEMA,
        "linearised_at": described,
        "params": list(params),
        "criterion": criterion,
        "surrogate": (f"torque route's joint-local regressor on the reference, rows as independent {RATE_HZ:g} Hz "
                      f"samples with torque noise {NOISE_TAU_NM:g} N·m (twinlake/excitation_design/information.py)"),
        **_prediction(found, base, anchor, at, space, confirm, confirm_seed),
        "bounds": {"position_rad": [b.position_rad for b in bounds], "velocity_rad_s": base.max_velocity,
                   "acceleration_rad_s2": base.max_acceleration, "jerk_rad_s3": base.max_jerk,
                   "speed_fraction": SPEED_FRACTION, "tracking_fraction": TRACKING_FRACTION, "tracking_error_rad": tracking_error_rad},
        "surrogate_half_width_rel": found.predicted,
        "surrogate_worst_rel": found.worst,
        "predicted_log_det": found.log_det,
        "baseline_plan": baseline.to_dict(),
        "baseline_predicted_half_width_rel": base_hw,
        "baseline_predicted_worst_rel": float(max(base_hw.values())),
        "baseline_predicted_log_det": base_logdet,
        "search": found.search,
    }
    return found, section


def _prediction(found: Design, base: Plan, anchor: np.ndarray, at: DynamicsParams, space, confirm: bool,
                seed: int) -> dict:
    """The section's `prediction`, `predicted_half_width_rel`, `predicted_worst_rel` (and
    `confirmation`): the replay's when `confirm`, else the surrogate's."""
    if not confirm:
        return {"prediction": PREDICTION_SURROGATE, "predicted_half_width_rel": found.predicted,
                "predicted_worst_rel": found.worst}
    from .confirm import confirm as confirm_design

    done = confirm_design(found.plan, anchor, at, space, noise_seed=seed)
    details = {k: v for k, v in done.to_json().items() if k not in ("half_width_rel", "worst_rel")}
    return {"prediction": PREDICTION_REPLAY, "predicted_half_width_rel": done.half_width_rel,
            "predicted_worst_rel": done.worst_rel,
            "confirmation": {**details, "noise_seed": seed, "rule": "fit/trust/identifiability.py "
                             "identifiability_summary: central-difference replay Jacobian at the linearisation point, "
                             "HAC sandwich (Bartlett, Andrews bandwidth), Student t on the effective dof"}}


def _pct(value) -> str:
    return "unbounded" if value is None or not np.isfinite(value) else f"{value:.3%}"


def summary_lines(section: dict) -> list[str]:
    """The predicted half-widths, one parameter a line, beside the surrogate's for the design
    and for the baseline."""
    how = ("one replay Jacobian of the design, the fit's HAC rule" if section.get("prediction") == PREDICTION_REPLAY
           else "surrogate only, not confirmed by a replay")
    lines = [f"designed excitation (criterion {section['criterion']}, linearised at {section['linearised_at']}): "
             f"predicted relative 95 % half-widths ({how})",
             f"{'parameter':<22}{'predicted':>11}{'surrogate':>11}{'baseline*':>11}"]
    surrogate = section.get("surrogate_half_width_rel", section["predicted_half_width_rel"])
    for name, value in section["predicted_half_width_rel"].items():
        lines.append(f"{name:<22}{_pct(value):>11}{_pct(surrogate[name]):>11}"
                     f"{_pct(section['baseline_predicted_half_width_rel'][name]):>11}")
    lines.append(f"{'worst':<22}{_pct(section['predicted_worst_rel']):>11}"
                 f"{_pct(section.get('surrogate_worst_rel', section['predicted_worst_rel'])):>11}"
                 f"{_pct(section['baseline_predicted_worst_rel']):>11}")
    lines.append("* baseline: fr3_stack's documented multisine of the same duration, under the surrogate")
    if "confirmation" in section:
        c = section["confirmation"]
        cov = c["covariance"]
        lines.append(f"confirmed in {sum(c['seconds'].values()):.1f} s: bandwidth {cov.get('bandwidth_ticks')} ticks, "
                     f"{cov.get('dof')} effective dof, {c['rows']} residual rows")
    return lines


__all__ = ["PREDICTION_REPLAY", "PREDICTION_SURROGATE", "SCHEMA", "SPEED_FRACTION", "TRACKING_FRACTION", "baseline_plan", "joint_bounds", "linearisation_point", "run_design",
           "summary_lines"]
