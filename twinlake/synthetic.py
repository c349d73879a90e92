"""Synthetic recordings: plan → reference.csv → offline recording → (optionally) the lake.

The sequence `twinlake demo`, the benchmarks and the tests use to make FR3 recordings without a
robot, each step the real component's: the daemon's excitation planner writes the reference a
`twinlake excite` preview would write, the offline recorder (`twinlake sim record`) simulates it
on a truth with measurement noise and writes fr3_stack's CSV v2 with its companions, and the
ingest pipeline (`twinlake ingest`) publishes it as a run.

    runs = [multisine_run("train-1", (0.3, 0.7, 1.3), seed=1), ...]
    made = [record(r, out_dir, robot_id="bench", truth_path=truth) for r in runs]
    ingest(lake, made, robot="bench")      # -> ["bench/train-1", ...]

Files: `<out_dir>/<run>/reference.csv`, its `metadata.json` (the plan with its preflight bounds
and the streaming guards' bounds, as a `twinlake excite` preview writes them), and
`<out_dir>/<run>/<run>.csv` (+ `<run>.meta.json` with the recorder's guard report,
`<run>.status.json`).

Two kinds of run: `gentle_multisine_run` stays inside fr3_stack's default bounds (what a real
FR3 run with its client completes; the demo's); `multisine_run` is livelier (12°, up to ~1 rad/s)
and raises the bounds explicitly (`LIVELY_PLAN_BOUNDS`, `LIVELY_TRACKING_ERROR_RAD`), as a user
passing `--max-velocity` / `--tracking-error` would; both are written into metadata.json.

Recordings are deterministic for a run's plan, seed and truth, so an existing recording is
reused (`SyntheticRecording.result` is None then).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .daemon import OfflineResult, Plan

ALL_JOINTS = (1, 2, 3, 4, 5, 6, 7)
# lively multisine: 100 Hz commands, fr3_stack's bounds raised explicitly (max_velocity etc.
# and the tracking guard), recorded in metadata.json
RATE_HZ = 100.0
MAX_VELOCITY_RAD_S = 3.0
MAX_ACCELERATION_RAD_S2 = 30.0
MAX_JERK_RAD_S3 = 500.0
LIVELY_PLAN_BOUNDS = {"max_velocity": MAX_VELOCITY_RAD_S, "max_acceleration": MAX_ACCELERATION_RAD_S2,
                      "max_jerk": MAX_JERK_RAD_S3}
LIVELY_TRACKING_ERROR_RAD = 0.5
GENTLE_MARGIN = 0.6  # a gentle run's reference peaks stay under this fraction of each bound
OK_OUTCOMES = ("published", "already_ingested", "replaced")


@dataclass(frozen=True)
class SyntheticRun:
    """One synthetic recording: the run id (also the file stem), its excitation plan, the
    measurement-noise seed and the seconds simulated after the last reference row."""

    run: str
    plan: "Plan"
    seed: int = 0
    tail_s: float = 0.3
    tracking_error_rad: float = 0.05  # the streaming tracking guard's bound (fr3_stack's default)

    @property
    def guards(self):
        """The streaming guards' bounds of this run (twinlake.daemon.guards.GuardBounds):
        the plan's max_velocity, this tracking bound, fr3_stack's other defaults."""
        from .daemon.guards import GuardBounds

        return GuardBounds(tracking_error=self.tracking_error_rad, max_velocity=self.plan.max_velocity)


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
    return SyntheticRun(run=run, plan=plan, seed=seed, tail_s=tail_s, tracking_error_rad=LIVELY_TRACKING_ERROR_RAD)


def gentle_multisine_run(run: str, tones_hz: Iterable[float], seed: int, *, seconds: float = 4.0,
                         ramp_s: float = 1.5, hold_s: float = 0.3, tail_s: float = 0.3,
                         margin: float = GENTLE_MARGIN) -> SyntheticRun:
    """A multisine of all 7 joints inside fr3_stack's default bounds (0.1 rad/s, 0.3 rad/s²,
    2 rad/s³; tracking 0.05 rad from the anchor): the amplitude [deg] is the largest whose
    reference peaks (sampled at 1 kHz, as the preflight does) stay under `margin` of each bound
    and whose peak offset stays under `margin` of the tracking bound. Same shape otherwise as
    `multisine_run`."""
    import math

    from .daemon import Plan
    from .daemon.excitation import peaks
    from .daemon.guards import GuardBounds

    bounds, unit = GuardBounds(), Plan()
    plan = Plan(mode="multisine", joints=ALL_JOINTS, amplitude_deg=1.0, seconds=seconds, ramp=ramp_s, hold=hold_s,
                tones=tuple(tones_hz), seed=seed, rate=RATE_HZ)
    found = peaks(plan)  # at 1 degree; every peak scales with the amplitude
    amplitude = margin * min(unit.max_velocity / max(found["velocity_rad_s"]),
                             unit.max_acceleration / max(found["acceleration_rad_s2"]),
                             unit.max_jerk / max(found["jerk_rad_s3"]),
                             bounds.tracking_error / math.radians(1.0))
    plan = Plan(**{**plan.to_dict(), "joints": ALL_JOINTS, "tones": tuple(tones_hz),
                   "amplitude_deg": round(amplitude, 3)})
    return SyntheticRun(run=run, plan=plan, seed=seed, tail_s=tail_s, tracking_error_rad=bounds.tracking_error)


def write_reference(spec: SyntheticRun, path: Path, *, robot_id: str | None = None) -> Path:
    """Check the plan (limits, and the joint range at the preview anchor) and write its
    reference.csv (t_s, q_ref1..7) and, beside it, metadata.json (the plan with its bounds,
    `guard_settings` with the streaming guards' bounds, the anchor and the reference peaks), as
    a `twinlake excite` preview does (created_at_utc null: deterministic); replaces both."""
    from .daemon import preflight, validate_plan
    from .daemon.excitation import PREVIEW_ANCHOR_Q
    from .daemon.excite_files import initial_metadata, reference_table, write_json_atomic, write_reference_csv

    plan = validate_plan(spec.plan)
    found = preflight(plan, PREVIEW_ANCHOR_Q)
    path = Path(path)
    if path.exists():
        path.unlink()
    write_reference_csv(path, reference_table(plan, PREVIEW_ANCHOR_Q))
    meta = initial_metadata(plan, robot_id=robot_id, host=None, cmd_port=5555, state_port=5556,
                            guards=spec.guards.validate().to_dict())
    meta.update(status="preview", created_at_utc=None, anchor_q_rad=[float(x) for x in PREVIEW_ANCHOR_Q],
                anchor_source="illustrative_only", reference_peaks=found)
    write_json_atomic(path.with_name("metadata.json"), meta)
    return path


def record(spec: SyntheticRun, out_dir: Path, *, robot_id: str, truth_path: str | Path | None = None,
           reuse: bool = True, payload=None, enforce_guards: bool = False) -> SyntheticRecording:
    """Record `spec` offline into `<out_dir>/<run>/` on the truth (profile JSON or FrankaTwin
    sysid_best_params.json; default the bundled demo robot). An existing `<run>.csv` is reused
    when `reuse` (the recorder never overwrites one). `payload` (a twinlake.sim EndLoad): the
    true flange payload, replacing the truth's (the firmware is not told: no configured load).
    The recorder checks the run's guards (`spec.guards`, from metadata.json); `enforce_guards`
    ends the recording where fr3_stack's client would have aborted it."""
    from .daemon import record_offline

    folder = Path(out_dir) / spec.run
    csv = folder / f"{spec.run}.csv"
    if reuse and csv.is_file():
        return SyntheticRecording(spec, csv, None)
    folder.mkdir(parents=True, exist_ok=True)
    reference = write_reference(spec, folder / "reference.csv", robot_id=robot_id)
    for stale in folder.glob(f"{spec.run}.*.json"):  # companions of an interrupted recording
        stale.unlink()
    result = record_offline(reference, csv, truth_path=None if truth_path is None else str(truth_path),
                            seed=spec.seed, tail_s=spec.tail_s, robot_id=robot_id, payload=payload,
                            guards=spec.guards, enforce_guards=enforce_guards)
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


def guard_report(made: SyntheticRecording) -> dict | None:
    """The recorder's guard report of a recording (from its result, or its meta companion when reused)."""
    import json

    if made.result is not None:
        return made.result.guards
    try:
        return json.loads(made.csv.with_suffix(".meta.json").read_text()).get("guards")
    except (OSError, ValueError):
        return None


__all__ = ["SyntheticRecording", "SyntheticRun", "gentle_multisine_run", "guard_report", "ingest", "multisine_run",
           "record", "record_and_ingest", "write_reference"]
