"""What each use of a recorded run needs, and the one message when a run lacks it.

A replay (`fit run`, `fit validate`, `fit report`) drives the run's own controller in MuJoCo,
so it needs the controller kind (joint impedance), the joint targets it tracked and the gains
it used. A campaign reference (`campaign run --run`) replays the targets only. The torque route
(`fit run --method torque`) needs none of them: q, dq and a torque are its whole input, so a
run without them (a mapped log of q, dq and tau_J) is refused with the hint to fit it there.

The frames say what a run has: a need is met when every column it names has a value (for the
controller: the joint-impedance code). `missing` reads a frame table, `missing_in_run` the
first tick of a run (or of an interval) in the lake; `refusal` is the message and `require`
raises it as the project's ValueError (a command turns it into exit status 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import DataError, FitError
from ...catalog import run_frames

CONTROLLER_JOINT_IMPEDANCE = 2
"""The frames' `controller` code of joint impedance (fr3_stack CSV v2), the one the sim replays."""


@dataclass(frozen=True)
class Need:
    """One thing a use of a run needs: its name, how a refusal says it, the frame columns it is."""

    name: str
    says: str
    columns: tuple[str, ...]


def _joints(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{j}" for j in range(1, 8))


NEEDS: dict[str, Need] = {need.name: need for need in (
    Need("controller", "controller (joint impedance, 2)", ("controller",)),
    Need("targets", "joint targets (q_target)", _joints("q_target")),
    Need("gains", "gains (K_joint, D_joint)", _joints("K_joint") + _joints("D_joint")),
)}
"""Everything a use of a run can need, by name."""

REPLAY = ("controller", "targets", "gains")
"""What a replay of the run's controller needs."""

REFERENCE = ("targets",)
"""What a campaign reference taken from a run needs."""

TORQUE_HINT = ("method", "torque", "the torque route needs only q, dq and a torque")
"""The setting a run that cannot be replayed can be fitted with instead."""
REPLAY_PURPOSE = "be replayed"


def _met(frames: pa.Table, need: Need) -> bool:
    if any(c not in frames.column_names for c in need.columns) or frames.num_rows == 0:
        return False
    values = [np.asarray(frames.column(c).to_numpy(zero_copy_only=False), dtype=float) for c in need.columns]
    if need.name == "controller":
        return bool(np.all(values[0] == CONTROLLER_JOINT_IMPEDANCE))
    return all(np.isfinite(v).any() for v in values)


def _check(needs) -> tuple[str, ...]:
    unknown = [n for n in needs if n not in NEEDS]
    if unknown:
        raise FitError(f"unknown need {unknown[0]!r}: expected one of {', '.join(NEEDS)}")
    return tuple(needs)


def missing(frames: pa.Table, needs=REPLAY) -> list[str]:
    """The names in `needs` (default: what a replay needs) that `frames` lack, in NEEDS' order.
    The controller is met when every row is joint impedance, targets and gains when each of
    their columns has a finite value."""
    wanted = _check(needs)
    return [name for name in NEEDS if name in wanted and not _met(frames, NEEDS[name])]


def missing_in_run(con, robot: str, run: str, seq_first: int | None = None, needs=REPLAY) -> list[str]:
    """`missing` on one tick of a run in the lake: `seq_first`, or the run's first."""
    frames = run_frames(con, robot, run, seq_first, seq_first)
    return missing(frames.slice(0, 1), needs)


def refusal(run: str, lacking: list[str], *, purpose: str = REPLAY_PURPOSE, needs=REPLAY,
            hint: tuple[str, str, str] | None = TORQUE_HINT) -> DataError:
    """The one-line refusal a user sees: the run, what it lacks, what the use needs and the
    setting that would serve instead (`hint`: setting, value, why)."""
    said = ", no ".join(NEEDS[name].says for name in lacking)
    wanted = ", ".join(NEEDS[name].name for name in _check(needs))
    return DataError(f"run {run}: cannot {purpose}: no {said} recorded; it needs the {wanted}", hint)


def require(frames: pa.Table, run: str, *, needs=REPLAY, purpose: str = REPLAY_PURPOSE,
            hint: tuple[str, str, str] | None = TORQUE_HINT) -> None:
    """Raise the `refusal` (a DataError) when `frames` lack any of `needs`."""
    lacking = missing(frames, needs)
    if lacking:
        raise refusal(run, lacking, purpose=purpose, needs=needs, hint=hint)


__all__ = ["CONTROLLER_JOINT_IMPEDANCE", "NEEDS", "Need", "REFERENCE", "REPLAY", "TORQUE_HINT", "missing",
           "missing_in_run", "refusal", "require"]
