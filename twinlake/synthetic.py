"""Synthetic recordings: plan → reference.csv → offline recording → (optionally) the lake.

The sequence `twinlake demo`, the benchmarks and the tests use to make FR3 recordings without a
robot, each step the real component's: the daemon's excitation planner writes the reference a
`twinlake excite` preview would write, the offline recorder (`twinlake sim record`) simulates it
on a truth with measurement noise and writes fr3_stack's CSV v2 with its companions, and the
ingest pipeline (`twinlake ingest`) publishes it as a run.

    runs = [multisine_run("train-1", (0.3, 0.7, 1.3), seed=1), ...]
    made = [record(r, out_dir, robot_id="bench", truth_path=truth) for r in runs]
    ingest(lake, made, robot="bench")      # -> ["bench/train-1", ...]

Files: `<out_dir>/<run>/reference.csv` and `<out_dir>/<run>/<run>.csv` (+ `<run>.meta.json`,
`<run>.status.json`). Recordings are deterministic for a run's plan, seed and truth, so an
existing recording is reused (`SyntheticRecording.result` is None then).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .daemon import OfflineResult, Plan

ALL_JOINTS = (1, 2, 3, 4, 5, 6, 7)
# fast multisine: 100 Hz commands, loose reference limits (the plans stay far from the FR3's)
RATE_HZ = 100.0
MAX_VELOCITY_RAD_S = 3.0
MAX_ACCELERATION_RAD_S2 = 30.0
MAX_JERK_RAD_S3 = 500.0
OK_OUTCOMES = ("published", "already_ingested", "replaced")


@dataclass(frozen=True)
class SyntheticRun:
    """One synthetic recording: the run id (also the file stem), its excitation plan, the
    measurement-noise seed and the seconds simulated after the last reference row."""

    run: str
    plan: "Plan"
    seed: int = 0
    tail_s: float = 0.3


@dataclass(frozen=True)
class SyntheticRecording:
    """A recorded SyntheticRun: its CSV v2 file and the recorder's result (None: reused)."""

    spec: SyntheticRun
    csv: Path
    result: "OfflineResult | None"

    @property
    def reused(self) -> bool:
        return self.result is None


def multisine_run(run: str, tones_hz: Iterable[float], seed: int, *, seconds: float = 3.0,
                  amplitude_deg: float = 12.0, ramp_s: float = 1.0, hold_s: float = 0.3,
                  tail_s: float = 0.3) -> SyntheticRun:
    """A multisine of all 7 joints: `tones_hz` [Hz] with phases from `seed` (also the noise
    seed), `seconds` of excitation [s] faded in and out over `ramp_s` [s], held `hold_s` [s]
    before and after, peak offset `amplitude_deg` [deg] per joint."""
    from .daemon import Plan

    plan = Plan(mode="multisine", joints=ALL_JOINTS, amplitude_deg=amplitude_deg, seconds=seconds,
                ramp=ramp_s, hold=hold_s, tones=tuple(tones_hz), seed=seed, rate=RATE_HZ,
                max_velocity=MAX_VELOCITY_RAD_S, max_acceleration=MAX_ACCELERATION_RAD_S2,
                max_jerk=MAX_JERK_RAD_S3)
    return SyntheticRun(run=run, plan=plan, seed=seed, tail_s=tail_s)


def write_reference(spec: SyntheticRun, path: Path) -> Path:
    """Check the plan (limits, and the joint range at the preview anchor) and write its
    reference.csv (t_s, q_ref1..7), as a `twinlake excite` preview does; replaces `path`."""
    from .daemon import preflight, validate_plan
    from .daemon.excitation import PREVIEW_ANCHOR_Q
    from .daemon.excite_files import reference_table, write_reference_csv

    plan = validate_plan(spec.plan)
    preflight(plan, PREVIEW_ANCHOR_Q)
    path = Path(path)
    if path.exists():
        path.unlink()
    write_reference_csv(path, reference_table(plan, PREVIEW_ANCHOR_Q))
    return path


def record(spec: SyntheticRun, out_dir: Path, *, robot_id: str, truth_path: str | Path | None = None,
           reuse: bool = True, payload=None) -> SyntheticRecording:
    """Record `spec` offline into `<out_dir>/<run>/` on the truth (profile JSON or FrankaTwin
    sysid_best_params.json; default the bundled demo robot). An existing `<run>.csv` is reused
    when `reuse` (the recorder never overwrites one). `payload` (a twinlake.sim EndLoad): the
    true flange payload, replacing the truth's (the firmware is not told: no configured load)."""
    from .daemon import record_offline

    folder = Path(out_dir) / spec.run
    csv = folder / f"{spec.run}.csv"
    if reuse and csv.is_file():
        return SyntheticRecording(spec, csv, None)
    folder.mkdir(parents=True, exist_ok=True)
    reference = write_reference(spec, folder / "reference.csv")
    for stale in folder.glob(f"{spec.run}.*.json"):  # companions of an interrupted recording
        stale.unlink()
    result = record_offline(reference, csv, truth_path=None if truth_path is None else str(truth_path),
                            seed=spec.seed, tail_s=spec.tail_s, robot_id=robot_id, payload=payload)
    return SyntheticRecording(spec, csv, result)


def ingest(lake: Path, recordings: Iterable[SyntheticRecording], robot: str) -> list:
    """Ingest each recording as run `<robot>/<run>` into `lake`; returns the ingest outcomes
    (`twinlake.ingest.Outcome`). ValueError naming the file unless each is published, already
    ingested or replaced."""
    from .catalog import Lake
    from .ingest import ReadOptions, ingest_paths

    outcomes = []
    for made in recordings:
        for outcome in ingest_paths(Lake(lake), [made.csv], ReadOptions(robot=robot, run=made.spec.run)):
            if outcome.status not in OK_OUTCOMES:
                raise ValueError(f"{made.csv}: ingest {outcome.status}: {outcome.message}")
            outcomes.append(outcome)
    return outcomes


def record_and_ingest(specs: Iterable[SyntheticRun], out_dir: Path, lake: Path, *, robot: str,
                      truth_path: str | Path | None = None) -> list[str]:
    """`record` then `ingest` each run (robot id `robot`); returns the `ROBOT/RUN` selectors."""
    made = [record(spec, out_dir, robot_id=robot, truth_path=truth_path) for spec in specs]
    ingest(lake, made, robot)
    return [f"{robot}/{m.spec.run}" for m in made]


__all__ = ["SyntheticRecording", "SyntheticRun", "ingest", "multisine_run", "record", "record_and_ingest",
           "write_reference"]
