"""When further search stops paying: the stop rule and the seconds budget of the local-first
search's exploration (fit/replay/local_search.py), after its result failed a gate.

A local result above the noise floor is either a wrong basin (search helps) or a model that
cannot explain the data (search cannot help: only changing the model can, which the adequacy
line names). Both look alike until one searches, so the exploration searches while it pays
and says which of the two the evidence points to:

- **Stop rule** (deterministic): CMA-ES runs while the best loss so far, the local result's
  loss included, fell by at least `PAYOFF_REL` of itself over the last `PAYOFF_WINDOW`
  generations; it stops at the first generation where it did not (never before
  `PAYOFF_WINDOW` generations, never after `--generations`). At the benchmark's ~5 s per
  generation on 2 cores (bench/RESULTS.md) 0.5 % over 2 generations is ≈ 0.05 % of the loss
  per second.
- **Budget** (`FitSettings.explore_s`, `fit run --explore-seconds`, default `EXPLORE_S`): the
  exploration's wall seconds; once spent, no further generation starts. The stop rule normally
  ends the search first; when the budget ends it instead, the verdict says so, since where it
  stopped then depends on the machine's speed and load (the one thing in a fit that does).
"""

from __future__ import annotations

import time
from typing import Callable

PAYOFF_WINDOW = 2  # generations over which the gain is judged
PAYOFF_REL = 0.005  # relative gain over PAYOFF_WINDOW generations below which search stops paying
EXPLORE_S = 30.0  # default exploration budget [s]


def unpaid(bests: list[float], start_loss: float) -> str | None:
    """Why search stopped paying after `len(bests)` generations whose running best losses are
    `bests` (from a start at `start_loss`), or None while it pays."""
    if len(bests) < PAYOFF_WINDOW:
        return None
    trail = [start_loss, *bests]
    before, now = min(trail[:-PAYOFF_WINDOW]), min(trail)
    gain = (before - now) / before if before > 0 and before != float("inf") else 0.0
    if gain >= PAYOFF_REL:
        return None
    return (f"stopped after {len(bests)} generation(s): the last {PAYOFF_WINDOW} lowered the loss by "
            f"{gain:.2%} (< {PAYOFF_REL:.1%})")


def cma_stop(start_loss: float, budget_s: float, spent_s: float = 0.0) -> Callable[[list[dict], float], str | None]:
    """The stop test of the exploration's CMA-ES generations: called before each generation
    with the stage's history rows so far and its wall seconds so far; returns the reason to
    stop (the stop rule, then the budget minus the `spent_s` already used) or None."""
    def stop(rows: list[dict], elapsed_s: float) -> str | None:
        why = unpaid([r["best"] for r in rows if r.get("stage") == "cma"], start_loss)
        if why is None and spent_s + elapsed_s >= budget_s:
            why = f"stopped by the {budget_s:g} s exploration budget"
        return why
    return stop


class Clock:
    """Wall seconds of an exploration, kept across a resume (`spent_s` from the checkpoint)."""

    def __init__(self, spent_s: float = 0.0) -> None:
        self.t0, self.before = time.perf_counter(), float(spent_s)

    @property
    def spent_s(self) -> float:
        return self.before + time.perf_counter() - self.t0


def stop_reason(rows: list[dict], start_loss: float, generations: int, budget_s: float) -> str:
    """Why the exploration's CMA-ES generations (`rows`, stage 'cma') ended, for the verdict."""
    bests = [r["best"] for r in rows if r.get("stage") == "cma"]
    if len(bests) >= generations:
        return f"ran all {generations} generations (still paying)"
    return unpaid(bests, start_loss) or (f"stopped by the {budget_s:g} s exploration budget after {len(bests)} "
                                         f"generation(s) (where it stops depends on the machine's speed)")
