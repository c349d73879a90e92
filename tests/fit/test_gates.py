"""The local search's gates and the exploration's stop rule (fit/replay/local_search.py `gates`,
fit/replay/payoff.py): a loss at the noise floor is trusted whatever the starts did, the starts decide
only without a floor, and search stops once it stops paying or its budget is spent."""

from __future__ import annotations

import numpy as np

from twinlake.fit.replay import local_search, payoff


def test_a_loss_at_the_floor_is_trusted_even_when_the_starts_disagree():
    failed, notes = local_search.gates(np.array([1.0, 1.3, 2.0]), full_loss=0.9, floor=0.5, floor_reason="")
    assert failed == []
    assert notes[0].startswith("at the noise floor: loss 0.9 is 1.80×") and "1 of 3 starts" in notes[1]
    failed, notes = local_search.gates(np.array([1.0, 1.01, 2.0]), full_loss=0.9, floor=0.5, floor_reason="")
    assert failed == [] and len(notes) == 1  # agreeing starts: nothing to note


def test_above_the_floor_is_not_trusted_whatever_the_starts_did():
    failed, notes = local_search.gates(np.array([1.0, 1.01, 1.02]), full_loss=1.1, floor=0.5, floor_reason="")
    assert failed == ["loss 1.1 is 2.2× the noise floor's 0.5 (gate 2×)"] and notes == []
    failed, _ = local_search.gates(np.array([1.0, 1.3]), full_loss=1.1, floor=0.5, floor_reason="")
    assert len(failed) == 2 and failed[1].startswith("starts disagree: only 1 of 2")


def test_without_a_floor_the_starts_decide():
    failed, notes = local_search.gates(np.array([1.0, 1.01]), 1.0, None, "noise-free recording")
    assert failed == [] and notes == ["starts agree: 2 of 2 starts within 5% of the best cheap loss",
                                      "noise-floor gate not applied: noise-free recording"]
    failed, notes = local_search.gates(np.array([1.0, 1.5]), 1.0, None, "noise-free recording")
    assert failed[0].startswith("starts disagree") and notes == ["noise-floor gate not applied: noise-free recording"]
    assert local_search.gates(np.array([1.0]), 1.0, None, "x")[0] == []  # one start cannot disagree


def test_search_stops_once_two_generations_gain_less_than_the_rule():
    assert payoff.unpaid([], 1.0) is None and payoff.unpaid([2.0], 1.0) is None  # never before the window
    assert payoff.unpaid([1.2, 1.1], 1.0).startswith("stopped after 2 generation(s): the last 2 lowered the loss "
                                                     "by 0.00%")  # worse than the start: nothing gained
    assert payoff.unpaid([0.98, 0.97], 1.0) is None  # 3 % over two generations pays
    assert payoff.unpaid([0.98, 0.97, 0.969, 0.968], 1.0) is not None  # 0.2 % over the last two does not
    stop = payoff.cma_stop(1.0, budget_s=10.0, spent_s=4.0)
    rows = [{"stage": "cma", "best": b} for b in (0.9, 0.8)]
    assert stop(rows, 1.0) is None and stop(rows, 6.0) == "stopped by the 10 s exploration budget"
    assert payoff.stop_reason(rows, 1.0, 2, 10.0) == "ran all 2 generations (still paying)"
    assert payoff.stop_reason(rows[:1], 1.0, 5, 10.0).startswith("stopped by the 10 s exploration budget after 1")
