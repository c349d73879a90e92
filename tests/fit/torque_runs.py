"""Recordings of a known truth for the torque route's tests and benchmark, ingested as lake runs:
the twin's own offline recorder (daemon.record_offline: fr3_stack CSV v2 of SimFR3 under a
profile, a payload and a friction law) and the independent plant (tests/plant: its tau_J is
link side with gravity, its tau_cmd drives a plant the twin did not write).

    lake, truth = twin_runs(tmp, "ext", ("a", "b"), family="extended", seconds=6)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from twinlake.sim import DynamicsParams, EndLoad, save_profile
from twinlake.synthetic import SyntheticRecording, ingest, multisine_run, write_reference

DEFAULT_TRUTH = DynamicsParams(
    armature=[0.31, 0.22, 0.17, 0.18, 0.21, 0.17, 0.08],
    mu_static=[0.9, 1.1, 1.0, 1.3, 1.4, 1.2, 1.0],
    dynamic_ratio=[0.55, 0.7, 0.6, 0.75, 0.6, 0.45, 0.5],
    mu_viscous=[3.1, 2.7, 1.8, 2.3, 2.2, 0.4, 1.2],
    motor_delay_ms=2,
)
PAYLOAD = EndLoad(1.1, (0.02, -0.01, 0.06), (0.004, 0.005, 0.003))
EXTENDED_TRUTH = DynamicsParams(
    armature=[0.31, 0.22, 0.17, 0.18, 0.21, 0.17, 0.08],
    mu_static=[0.6, 0.8, 0.7, 0.9, 0.5, 0.4, 0.3],
    dynamic_ratio=[1.0] * 7,
    mu_viscous=[3.1, 2.7, 1.8, 2.3, 2.2, 0.4, 1.2],
    motor_delay_ms=3,
    coulomb_asymmetry=np.array([0.1, -0.1, 0.05, 0.0, 0.08, -0.05, 0.03]),
    tau_bias=np.array([0.2, -0.3, 0.1, 0.25, -0.1, 0.05, 0.0]),
).with_payload(PAYLOAD)
TONES = ((0.3, 0.7, 1.3, 2.1), (0.4, 0.9, 1.7, 2.3), (0.35, 0.8, 1.5, 2.5))


def _record_twin(run: str, seed: int, folder: Path, truth_path: Path, law: str, seconds: float,
                 noise_seed: int = 0, amplitude_deg: float = 12.0) -> SyntheticRecording:
    from twinlake.daemon import record_offline

    spec = multisine_run(run, TONES[seed % len(TONES)], seed=seed + 1, seconds=seconds, amplitude_deg=amplitude_deg)
    where = folder / run
    where.mkdir(parents=True, exist_ok=True)
    reference = write_reference(spec, where / "reference.csv")
    result = record_offline(reference, where / f"{run}.csv", truth_path=str(truth_path), seed=spec.seed + 100 * noise_seed,
                            tail_s=spec.tail_s, robot_id="torque", friction_law=law)
    return SyntheticRecording(spec, where / f"{run}.csv", result)


def twin_runs(root: Path, robot: str, runs: tuple[str, ...], *, family: str = "default",
              seconds: float = 12.0, noise_seed: int = 0, amplitude_deg: float = 12.0) -> tuple[Path, DynamicsParams, str]:
    """Record and ingest `runs` of the twin under the default or extended truth; returns
    (lake, truth, friction law). `noise_seed` picks another measurement-noise realisation of
    the same excitation (0: the one every test and bench figure so far used); `amplitude_deg`
    each joint's peak offset [deg]."""
    truth, law = (DEFAULT_TRUTH, "stribeck") if family == "default" else (EXTENDED_TRUTH, "tanh")
    truth_path = save_profile(truth, root / f"{robot}-truth.json")
    made = [_record_twin(run, i, root / robot, truth_path, law, seconds, noise_seed, amplitude_deg)
            for i, run in enumerate(runs)]
    lake = root / "lake"
    ingest(lake, made, robot)
    return lake, truth, law


def plant_runs(root: Path, robot: str, runs: tuple[str, ...], *, seconds: float = 12.0, plant=None):
    """Record and ingest `runs` on the independent plant; returns (lake, plant truth)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plant import IndependentPlant, record

    truth = plant or IndependentPlant()
    made = []
    for i, run in enumerate(runs):
        spec = multisine_run(run, TONES[i % len(TONES)], seed=i + 11, seconds=seconds, amplitude_deg=12.0)
        where = root / robot / run
        where.mkdir(parents=True, exist_ok=True)
        reference = write_reference(spec, where / "reference.csv")
        record(reference, where / f"{run}.csv", plant=truth.replace(seed=i), tail_s=0.3, settle_s=1.0)
        made.append(SyntheticRecording(spec, where / f"{run}.csv", None))
    lake = root / "lake"
    ingest(lake, made, robot)
    return lake, truth


def payload_runs(root: Path, robot: str, runs: tuple[str, ...], rest_before_s: float | None = None, **changes):
    """Record and ingest `runs` of the real payload run's shape (tests/plant/payload_run.py:
    rest, one move, a long standstill with a ringing tool) on the plant carrying its tool, one
    noise seed per run; `rest_before_s` (default the module's 1.2 s) the rest before the move;
    returns (lake, plant truth)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plant import payload_run_reference, record, tool_plant
    from plant.payload_run import MOVE_S, REST_BEFORE_S

    before = REST_BEFORE_S if rest_before_s is None else rest_before_s
    truth = tool_plant(**({"ring_start_s": before + MOVE_S} | changes))
    made = []
    for i, run in enumerate(runs):
        where = root / robot / run
        where.mkdir(parents=True, exist_ok=True)
        reference = payload_run_reference(where / "reference.csv", rest_before_s=before)
        record(reference, where / f"{run}.csv", plant=truth.replace(seed=i), tail_s=0.0, settle_s=1.0)
        spec = multisine_run(run, TONES[0], seed=i + 31, seconds=1.0, amplitude_deg=0.0)
        made.append(SyntheticRecording(spec, where / f"{run}.csv", None))
    lake = root / "lake"
    ingest(lake, made, robot)
    return lake, truth


PC_LOG_MAPPING = ('[time]\ncolumn = "duration"\nunit = "ms"\n\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\n'
                  'tau_measured = "tau_J[{i}]"\n')


def pc_log_copies(root: Path, lake: Path, robot: str, runs: tuple[str, ...], source_robot: str) -> None:
    """Each of `runs` recorded by plant_runs(root, source_robot, ...) through tests/plant's
    libfranka-style PC logger (one tick in 12 missing, ~6 % stale rows, a jittery clock; seed =
    the run's position), ingested into `lake` as `robot/run`: mapped logs of q, dq, tau_J only."""
    import pyarrow.csv as pacsv

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from plant import PcLogger, pc_log, write_csv
    from twinlake.catalog import Lake
    from twinlake.ingest import ingest_paths
    from twinlake.ingest.registry import ReadOptions

    mapping = root / f"{robot}-pc-log.toml"
    mapping.write_text(PC_LOG_MAPPING)
    for i, run in enumerate(runs):
        table = pacsv.read_csv(root / source_robot / run / f"{run}.csv")
        log = write_csv(pc_log({n: table.column(n).to_numpy() for n in table.column_names}, PcLogger(seed=i)),
                        root / source_robot / run / f"{run}-pc-log.csv")
        (out,) = ingest_paths(Lake(lake), [log], ReadOptions(robot=robot, run=run, mapping=mapping))
        if out.status != "published":
            raise ValueError(f"{log}: ingest {out.status}: {out.message}")


__all__ = ["DEFAULT_TRUTH", "EXTENDED_TRUTH", "PAYLOAD", "pc_log_copies", "payload_runs", "plant_runs", "twin_runs"]
