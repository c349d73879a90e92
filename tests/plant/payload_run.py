"""The shape of a real payload run: the arm at rest, one point-to-point move that turns the
flange relative to gravity, then a long standstill while a flexible tool rings.

    path = payload_run_reference(folder / "reference.csv")       # 1.2 s rest, 0.5 s move, 10.5 s rest
    plant = tool_plant(seed=0)                                     # 0.33 kg tool, off-axis CoM, ringing 7 Hz
    record(path, folder / "run.csv", plant=plant, tail_s=0.0)

The move is a quintic (zero velocity and acceleration at both ends) from `HOME_Q` to
`MOVED_Q`: J4 +0.3 rad, J6 +0.7 rad (the flange tilts 40° away from pointing down), J7 +0.6
rad. The tool's ringing starts when the move ends (`ring_start_s`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .independent import IndependentPlant
from .recorder import write_reference

HOME_Q = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
MOVED_Q = (0.0, -0.785, 0.0, -2.056, 0.0, 2.271, 1.385)
REST_BEFORE_S = 1.2
MOVE_S = 0.5
REST_AFTER_S = 10.5
TOOL = dict(payload_mass_kg=0.33, payload_com_m=(0.035, -0.025, 0.07), payload_radius_m=0.04,
            tau_j_offset_nm=(0.25, -0.4, 0.15, 0.3, -0.12, 0.08, -0.05),
            ring_torque_nm=0.25, ring_hz=7.0, ring_decay_s=1.5, ring_axis=(1.0, 0.6, 0.0))


def payload_run_reference(path: str | Path, q_start=HOME_Q, q_end=MOVED_Q, *, rest_before_s: float = REST_BEFORE_S,
                          move_s: float = MOVE_S, rest_after_s: float = REST_AFTER_S, rate_hz: float = 1000.0) -> Path:
    """A reference.csv (new file): `rest_before_s` at q_start, a quintic move of `move_s` to
    q_end (7,) [rad], `rest_after_s` at q_end; rows at `rate_hz`."""
    n = int(round((rest_before_s + move_s + rest_after_s) * rate_hz)) + 1
    t = np.arange(n) / rate_hz
    s = np.clip((t - rest_before_s) / move_s, 0.0, 1.0)
    blend = s**3 * (10.0 - 15.0 * s + 6.0 * s**2)
    q0, q1 = np.asarray(q_start, float), np.asarray(q_end, float)
    return write_reference(path, t, q0[None, :] + blend[:, None] * (q1 - q0)[None, :])


def tool_plant(**changes) -> IndependentPlant:
    """The independent plant carrying `TOOL` (ringing from the move's end), with `changes`."""
    return IndependentPlant(**(TOOL | {"ring_start_s": REST_BEFORE_S + MOVE_S} | changes))


__all__ = ["HOME_Q", "MOVED_Q", "MOVE_S", "REST_AFTER_S", "REST_BEFORE_S", "TOOL", "payload_run_reference",
           "tool_plant"]
