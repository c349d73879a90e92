"""Plug-in controllers for the tests (imported by name: `plugins:Failing`, ...)."""

from __future__ import annotations

import numpy as np


class Failing:
    """Follows the reference, raises at tick 50 of episodes with an odd sample index."""

    def __init__(self, config):
        self.odd = config["sample_index"] % 2 == 1

    def reset(self, state):
        self.q0 = state.q.copy()

    def step(self, state):
        if self.odd and state.tick == 50:
            raise RuntimeError("policy blew up at tick 50")
        return state.reference_rad


class NonFinite:
    """Follows the reference, returns NaN from tick 20 on."""

    def __init__(self, config):
        pass

    def reset(self, state):
        pass

    def step(self, state):
        return state.reference_rad if state.tick < 20 else np.full(7, np.nan)


def broken_factory(config):
    raise ValueError("cannot build")
