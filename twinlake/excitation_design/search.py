"""The design search: per joint, the multisine (tones, amplitudes, phases) within the preflight
bounds that minimises the surrogate's criterion (twinlake/excitation_design/information.py), and the predicted
half-widths of a plan.

The surrogate is block-diagonal by joint, so each joint is searched on its own and the worst
relative half-width over all joints is the worst of the joints' optima. Per joint: a random
search over `random_candidates` component sets (up to `max_tones` tones, log-uniform
frequencies, Dirichlet weights, uniform phases; the first component a linear chirp in
`chirp_fraction` of them, candidates.py), then `rounds` of coordinate steps around the best (one
weight, frequency or phase changed per neighbour, the step shrinking); every candidate's
amplitudes are scaled to its tightest bound before it is scored. Criteria: `worst` (the
largest relative 95 % half-width of the joint's chosen parameters) or `d` (−log det of the
information of the relative parameters).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..daemon.excitation import Plan, offsets, preflight, sample_times
from .candidates import DesignBounds, multisine, perturb, random_tones, scale_to_bounds, segment_grid
from .information import ChosenParameters, half_widths, information, joint_columns, log_det

CRITERIA = ("worst", "d")


@dataclass(frozen=True)
class SearchSettings:
    """The search's sizes: the grid the surrogate samples [Hz], the tone range [Hz], tones per
    joint, random candidates, coordinate rounds and neighbours per round, and the seed."""

    grid_hz: float = 100.0
    f_lo_hz: float = 0.05
    f_hi_hz: float = 1.5
    max_tones: int = 4
    random_candidates: int = 512
    rounds: int = 30
    neighbours: int = 96
    seed: int = 0
    batch: int = 128
    chirp_fraction: float = 0.5


@dataclass
class Design:
    """The chosen plan (its `tone_table` per joint), the predicted relative half-widths of
    every chosen parameter under the surrogate, the worst of them, and what the search did."""

    plan: Plan
    predicted: dict[str, float]
    worst: float
    log_det: float
    search: dict = field(default_factory=dict)


def _score(chosen: ChosenParameters, joint: int, signals: np.ndarray, grid_hz: float, criterion: str) -> np.ndarray:
    info = information(joint_columns(chosen, joint, signals[1], signals[2]), grid_hz)
    if criterion == "d":
        return -log_det(info, chosen.scales[joint])
    return half_widths(info, chosen.scales[joint]).max(axis=1)


def _evaluate(chosen, joint, tones, s, plan, bounds, settings, criterion):
    """(scores (N,), scales (N,)) of candidate tone sets (weights, freqs, phases) (N, K)."""
    scores, scales = [], []
    for lo in range(0, len(tones[0]), settings.batch):
        w, f, p, e = (x[lo:lo + settings.batch] for x in tones)
        signals = multisine(w, f, p, s, plan.seconds, plan.ramp, e)
        scale = scale_to_bounds(signals, bounds)
        scores.append(_score(chosen, joint, signals * scale[None, :, None], settings.grid_hz, criterion))
        scales.append(scale)
    return np.concatenate(scores), np.concatenate(scales)


def design_joint(chosen: ChosenParameters, joint: int, plan: Plan, bounds: DesignBounds,
                 settings: SearchSettings, criterion: str) -> tuple[tuple[tuple[float, ...], ...], float]:
    """One joint's components ((amplitude [rad], f [Hz], phase [rad]) a tone,
    (amplitude, f, phase, sweep [Hz/s]) a chirp, ...) and its score."""
    rng = np.random.default_rng([settings.seed, joint])
    s = segment_grid(plan.seconds, settings.grid_hz)
    f_hi = min(settings.f_hi_hz, plan.rate / 20)
    tones = random_tones(rng, settings.random_candidates, settings.max_tones, settings.f_lo_hz, f_hi,
                         settings.chirp_fraction)
    scores, scales = _evaluate(chosen, joint, tones, s, plan, bounds, settings, criterion)
    best = int(np.argmin(scores))
    current = tuple(x[best] for x in tones)
    score, scale = scores[best], scales[best]
    for r in range(settings.rounds):
        step = 0.3 * (0.1 ** (r / max(1, settings.rounds - 1)))
        near = perturb(rng, settings.neighbours, *current, step, settings.f_lo_hz, f_hi)
        near_scores, near_scales = _evaluate(chosen, joint, near, s, plan, bounds, settings, criterion)
        i = int(np.argmin(near_scores))
        if near_scores[i] < score:
            current, score, scale = tuple(x[i] for x in near), near_scores[i], near_scales[i]
    table = tuple(_component(scale * wk, fk, pk, ek, plan.seconds) for wk, fk, pk, ek in zip(*current) if wk > 0)
    return table, float(score)


def _component(amplitude_rad: float, f_hz: float, phase_rad: float, end_hz: float, seconds: float) -> tuple:
    """A tone_table entry: (amplitude, f, phase) for a tone, + (sweep [Hz/s],) for a chirp."""
    tone = (float(amplitude_rad), float(f_hz), float(np.mod(phase_rad, 2 * np.pi)))
    return tone if end_hz == f_hz else tone + (float((end_hz - f_hz) / seconds),)


def predict(plan: Plan, chosen: ChosenParameters, grid_hz: float = 100.0) -> tuple[dict[str, float], float]:
    """The surrogate's relative 95 % half-width of every chosen parameter under `plan` (any
    mode: its reference as streamed, sampled at `grid_hz`), and the summed log det."""
    t = sample_times(plan, grid_hz)
    ref = offsets(plan, t)
    out: dict[str, float] = {}
    total = 0.0
    for j in range(7):
        if not chosen.groups[j]:
            continue
        info = information(joint_columns(chosen, j, ref[1][None, :, j], ref[2][None, :, j]), grid_hz)
        for name, value in zip(chosen.names(j), half_widths(info, chosen.scales[j])[0]):
            out[name] = float(value)
        total += float(log_det(info, chosen.scales[j])[0])
    return out, total


def _fit_preflight(plan: Plan, anchor: np.ndarray) -> Plan:
    """Shrink every amplitude by 3 % until the 1 kHz preflight passes (the grid's peaks may
    sit just under the true ones); ValueError after 20 tries."""
    for _ in range(20):
        try:
            preflight(plan, anchor)
            return plan
        except ValueError:
            table = tuple(tuple((0.97 * c[0], *c[1:]) for c in joint) for joint in plan.tone_table)
            plan = replace(plan, tone_table=table)
    preflight(plan, anchor)
    return plan


def design(chosen: ChosenParameters, base: Plan, bounds: list[DesignBounds], anchor: np.ndarray,
           settings: SearchSettings = SearchSettings(), criterion: str = "worst") -> Design:
    """The designed multisine: `base` (its seconds, ramp, hold, rate and derivative bounds)
    with a tone table chosen per joint within `bounds` (7,), checked by the preflight at
    `anchor` (7,) [rad]. Joints without chosen parameters do not move."""
    if criterion not in CRITERIA:
        raise ValueError(f"--criterion: expected one of {', '.join(CRITERIA)}, got {criterion!r}")
    started = time.perf_counter()
    table = []
    for j in range(7):
        table.append(design_joint(chosen, j, base, bounds[j], settings, criterion)[0] if chosen.groups[j] else ())
    moving = tuple(j + 1 for j in range(7) if table[j])
    if not moving:
        raise ValueError("--params: no parameter left free for the design to serve")
    tones = tuple(sorted({round(f, 6) for joint in table for c in joint
                          for f in (c[1], c[1] + (c[3] if len(c) == 4 else 0.0) * base.seconds)}))
    plan = replace(base, mode="multisine", joints=moving, tones=tones, tone_table=tuple(table),
                   amplitude_deg=float(np.degrees(max(sum(c[0] for c in joint) for joint in table))))
    plan = _fit_preflight(plan, anchor)
    predicted, total = predict(plan, chosen, settings.grid_hz)
    return Design(plan=plan, predicted=predicted, worst=float(max(predicted.values())), log_det=total,
                  search={"criterion": criterion, "seconds_wall": round(time.perf_counter() - started, 3),
                          "grid_hz": settings.grid_hz, "tone_range_hz": [settings.f_lo_hz, settings.f_hi_hz],
                          "max_tones": settings.max_tones, "random_candidates": settings.random_candidates,
                          "rounds": settings.rounds, "neighbours": settings.neighbours, "seed": settings.seed,
                          "chirp_fraction": settings.chirp_fraction,
                          "chirps": [j + 1 for j in range(7) if any(len(c) == 4 for c in table[j])]})


__all__ = ["CRITERIA", "Design", "SearchSettings", "design", "design_joint", "predict"]
