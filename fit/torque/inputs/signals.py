"""Which joint torque a run's equations use, what it means, and the samples read from the lake.

Two signals (docs/fitting.md, "The torque route", states the sources):

- **commanded** (`tau_cmd1..7`): fr3_stack's outgoing torque command after its 1 N·m/tick slew
  limiter, a *desired* torque. It excludes gravity (the robot adds the firmware's gravity of
  the configured load) and includes the stack's Coriolis feed-forward; libfranka documents its
  torque command as "without gravity and friction": the robot adds its own compensation
  before the motors. So the commanded torque is what drives the twin's plant: it sees the
  twin's own parameters (rotor inertia, friction in the twin's law, payload against the
  configured load, a torque bias, the delay). On a real arm it sees what is left after the
  robot's own compensation.
- **measured** (`tau_J1..7`, libfranka `RobotState::tau_J`): the link-side joint torque
  sensors. It includes gravity, never sees the rotor inertia (it sits before the sensor), and
  sees the rigid body behind the sensors: the flange payload, the links, friction left on the
  link side and a sensor offset. There is no armature and no delay on this route.

The default is commanded when the run has finite `tau_cmd`, else measured.
Note: the twin's own recorder (sim/arm.py) writes a gravity-free `tau_J` that includes the
armature; the measured route is meant for real sensors and the independent test plant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import DataError, SettingError

SIGNALS = {"commanded": "tau_cmd", "measured": "tau_J"}
MEANING = {
    "commanded": "fr3_stack tau_cmd: desired torque after the slew limit, without gravity (the firmware adds "
                 "the configured load's) and with the Coriolis feed-forward; drives the twin's parameters",
    "measured": "libfranka tau_J: link-side joint torque sensors, gravity included, rotor inertia never seen",
}


@dataclass
class RunSamples:
    """One run's (or interval's) samples as read: seq (N,), q, dq, tau (N, 7) of the chosen
    signal, and what the catalog knows (robot, run, interval index or None, run_sha256,
    metadata dict), the recorded controller damping D_joint (7,) [N·m·s/rad] when there is one."""

    robot: str
    run: str
    interval_index: int | None
    seq: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    run_sha256: str | None
    metadata: dict[str, Any]
    damping_nms_rad: np.ndarray | None = None  # (7,) the recorded controller's D_joint (median), None if absent
    t_s: np.ndarray | None = None  # (N,) the rows' time [s] when recorded (the sample rate: quasi_static.py)

    @property
    def label(self) -> str:
        where = "" if self.interval_index is None else f":{self.interval_index}"
        return f"{self.robot}/{self.run}{where}"


def joint_matrix(frames: pa.Table, prefix: str) -> np.ndarray:
    """(N, 7) float64 of columns `<prefix>1..7` (NaN where null or absent)."""
    cols = []
    for j in range(1, 8):
        name = f"{prefix}{j}"
        if name not in frames.column_names:
            cols.append(np.full(frames.num_rows, np.nan))
            continue
        cols.append(frames.column(name).to_numpy(zero_copy_only=False).astype(np.float64))
    return np.column_stack(cols) if cols else np.empty((0, 7))


def has_signal(frames: pa.Table, signal: str) -> bool:
    """True when every tau column of `signal` is present with some finite values."""
    tau = joint_matrix(frames, SIGNALS[signal])
    return bool(len(tau) and np.all(np.isfinite(tau).any(axis=0)))


def choose_signal(frames: pa.Table, requested: str | None, what: str) -> str:
    """The signal to fit: `requested` (checked) or the default; ValueError naming the run."""
    if requested is not None and requested not in SIGNALS:
        raise SettingError("torque", repr(requested), f"expected one of {', '.join(SIGNALS)}")
    if requested is not None:
        if not has_signal(frames, requested):
            raise DataError(f"{what}: has no {SIGNALS[requested]}1..7 values (the {requested} torque)")
        return requested
    for signal in ("commanded", "measured"):
        if has_signal(frames, signal):
            return signal
    raise DataError(f"{what}: has neither tau_cmd1..7 nor tau_J1..7 values: the torque route needs joint torques")


def samples(frames: pa.Table, signal: str, *, robot: str, run: str, interval_index: int | None,
            run_row: dict[str, Any]) -> RunSamples:
    """The RunSamples of frames (sorted by seq) for `signal`."""
    meta_text = run_row.get("metadata_json")
    try:
        meta = json.loads(meta_text) if meta_text else {}
    except json.JSONDecodeError:
        meta = {}
    seq = frames.column("seq").to_numpy(zero_copy_only=False).astype(np.int64)
    damping = joint_matrix(frames, "D_joint")
    has_damping = len(damping) and np.all(np.isfinite(damping).any(axis=0))
    return RunSamples(robot, run, interval_index, seq, joint_matrix(frames, "q"), joint_matrix(frames, "dq"),
                      joint_matrix(frames, SIGNALS[signal]), run_row.get("raw_sha256"),
                      meta if isinstance(meta, dict) else {},
                      np.nanmedian(damping, axis=0) if has_damping else None,
                      frames.column("t_s").to_numpy(zero_copy_only=False).astype(np.float64)
                      if "t_s" in frames.column_names else None)


__all__ = ["MEANING", "SIGNALS", "RunSamples", "choose_signal", "has_signal", "joint_matrix", "samples"]
