"""The reference of a campaign: the joint targets every episode sends, from an excitation
`reference.csv` (`twinlake excite` / the daemon's planner writes one) or from a recorded
run's joint targets in the lake (`--run [ROBOT/]RUN[:INTERVAL]`).

Timing is the offline recorder's (daemon/offline.py): reference row i becomes the sent target
at tick round((t_i − t_0) / 1 ms), held until the next row (zero-order hold at 1 kHz); the arm
starts at rest at the first target in joint impedance, and runs `tail_s` after the last row.
A recorded run's targets are one per 1 kHz row (its `q_target1..7`, pre-EMA), replayed with
the campaign's gains, not the recorded ones.

Preflight (before any episode runs): every target finite and inside fr3_stack's joint range
minus the repulsion margin, times increasing, and the reference's own speed (finite
differences of its rows) within the live speed guard, as fr3_stack's excitation preflight
requires of a plan; a ValueError names the file and row otherwise.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..sim import JOINT_IMPEDANCE, ReplayInput
from ..sim.fr3 import REPULSION_LOWER_RAD, REPULSION_UPPER_RAD, TIMESTEP_S
from ..sim.arm_model.params import MAX_DELAY_MS

from .gains import GainSet

DEFAULT_SPEED_LIMIT_RAD_S = 0.1  # fr3_stack's excitation default (`--max-velocity`)


@dataclass
class Reference:
    """Sent targets: rows (n,) with command ticks (n,) int64 and targets (n, 7) [rad]; source
    text, sha256 of the source, tail [s], the live speed guard bound [rad/s]."""

    source: str
    sha256: str
    command_ticks: np.ndarray
    targets_rad: np.ndarray
    tail_s: float
    speed_limit_rad_s: float

    @property
    def n_ticks(self) -> int:
        """Ticks of an episode: through the last row plus the tail."""
        return int(self.command_ticks[-1] + round(self.tail_s / TIMESTEP_S)) + 1

    @property
    def duration_s(self) -> float:
        return self.n_ticks * TIMESTEP_S

    def tick_targets(self) -> np.ndarray:
        """(T, 7) the target in force at every tick (zero-order hold of the rows)."""
        row = np.searchsorted(self.command_ticks, np.arange(self.n_ticks), side="right") - 1
        return self.targets_rad[np.maximum(row, 0)]

    def replay_input(self, gains: GainSet) -> ReplayInput:
        """The episode's ReplayInput: start at rest at the first target, τ_prev = 0, every tick sampled."""
        t = self.n_ticks
        q0 = self.targets_rad[0].copy()
        return ReplayInput(
            controller=JOINT_IMPEDANCE, q0=q0, dq0=np.zeros(7), tau_prev0=np.zeros(7),
            tau_history=np.zeros((MAX_DELAY_MS, 7)), sample_ticks=np.arange(t), n_ticks=t,
            q_target=self.tick_targets(), use_ema=True, ema0=q0,
            k_nm_per_rad=np.tile(gains.kp_nm_per_rad, (t, 1)), d_nms_per_rad=np.tile(gains.kd_nms_per_rad, (t, 1)),
            filter_alpha=np.full(t, gains.filter_alpha), use_friction=np.zeros(t, dtype=bool))

    def to_dict(self) -> dict:
        return {"source": self.source, "sha256": self.sha256, "rows": int(len(self.command_ticks)),
                "n_ticks": self.n_ticks, "tail_s": self.tail_s, "speed_limit_rad_s": self.speed_limit_rad_s}


def preflight(ref: Reference) -> Reference:
    """Check the targets (finite, inside the joint range without the repulsion zone) and the ticks."""
    bad = ~np.isfinite(ref.targets_rad).all(axis=1)
    if bad.any():
        raise ValueError(f"{ref.source}: row {int(np.flatnonzero(bad)[0])}: non-finite target")
    out = (ref.targets_rad <= REPULSION_LOWER_RAD) | (ref.targets_rad >= REPULSION_UPPER_RAD)
    if out.any():
        r, j = (int(x) for x in np.argwhere(out)[0])
        raise ValueError(f"{ref.source}: row {r}: target J{j + 1} = {ref.targets_rad[r, j]:.4f} rad is outside "
                         f"[{REPULSION_LOWER_RAD[j]:.4f}, {REPULSION_UPPER_RAD[j]:.4f}] (joint range minus the "
                         "repulsion margin)")
    if len(ref.command_ticks) < 2 or np.any(np.diff(ref.command_ticks) < 0):
        raise ValueError(f"{ref.source}: expected >= 2 rows with non-decreasing times")
    if not ref.tail_s >= 0:
        raise ValueError(f"--tail-s: expected >= 0, got {ref.tail_s}")
    # speed between the rows where the target changes (a 1 kHz run holds each 100 Hz target for 10 rows)
    rows = np.flatnonzero(np.r_[True, np.any(np.diff(ref.targets_rad, axis=0) != 0, axis=1)])
    steps = np.diff(ref.command_ticks[rows]) * TIMESTEP_S
    moving = steps > 0
    if moving.any():
        speed = np.abs(np.diff(ref.targets_rad[rows], axis=0)[moving]) / steps[moving][:, None]
        r, j = (int(x) for x in np.unravel_index(np.argmax(speed), speed.shape))
        if speed[r, j] > ref.speed_limit_rad_s:
            row = int(rows[1:][moving][r])
            raise ValueError(f"{ref.source}: row {row}: the reference itself moves J{j + 1} at {speed[r, j]:.3g} rad/s, "
                             f"above the live speed guard {ref.speed_limit_rad_s:g} rad/s (the plan's max_velocity "
                             "from metadata.json, else fr3_stack's default); pass --speed-limit")
    return ref


def _speed_limit(path: Path, given: float | None) -> float:
    """The given bound, else the plan's `max_velocity` of a sibling metadata.json, else the default."""
    if given is not None:
        return float(given)
    meta = path.with_name("metadata.json")
    try:
        return float(json.loads(meta.read_text())["plan"]["max_velocity"])
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_SPEED_LIMIT_RAD_S


def from_csv(path: str | Path, *, tail_s: float = 1.0, speed_limit_rad_s: float | None = None) -> Reference:
    """A reference.csv (t_s, q_ref1..7, ...), timed as the offline recorder does."""
    from ..daemon.excite_files import read_reference_csv

    path = Path(path)
    t_s, q = read_reference_csv(path)
    ticks = np.rint((t_s - t_s[0]) / TIMESTEP_S).astype(np.int64)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return preflight(Reference(str(path), digest, ticks, q, float(tail_s), _speed_limit(path, speed_limit_rad_s)))


def from_run(lake, selector: str, *, tail_s: float = 1.0, speed_limit_rad_s: float | None = None) -> Reference:
    """A recorded run's joint targets (first clean interval, or the one named by `:INTERVAL`)."""
    from ..fit.core import needs
    from ..fit.core.intervals import read_frames, resolve

    purpose = "be a campaign reference (--run)"
    refs = resolve(lake, [selector], min_duration_s=0.0, needs=needs.REFERENCE, purpose=purpose, hint=None)
    table = read_frames(lake, refs[:1])[0]
    needs.require(table, refs[0].label, needs=needs.REFERENCE, purpose=purpose, hint=None)
    cols = list(needs.NEEDS["targets"].columns)
    q = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in cols])
    seq = table.column("seq").to_numpy().astype(np.int64)
    r = refs[0]
    source = f"{r.robot}/{r.run}:{r.interval_index}"
    speed = DEFAULT_SPEED_LIMIT_RAD_S if speed_limit_rad_s is None else float(speed_limit_rad_s)
    return preflight(Reference(source, r.run_sha256 or "", seq - seq[0], q, float(tail_s), speed))


__all__ = ["DEFAULT_SPEED_LIMIT_RAD_S", "Reference", "from_csv", "from_run", "preflight"]
