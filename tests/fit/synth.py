"""Small synthetic joint-impedance recordings for the fit tests, made with the real simulated
arm (`twinlake.sim.SimFR3`) under a known truth and written to a lake as run partitions.

The frames carry the canonical columns (measured q/dq with Gaussian noise, tau_cmd, targets,
gains, seq, control period) so the clean-interval SQL and `ReplayInput.from_frames` see what
they see from an ingested fr3_stack CSV v2 recording.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from twinlake.catalog import FRAME_SCHEMA, RUN_SCHEMA, Lake, publish_partition
from twinlake.sim import HOME_Q, DynamicsParams, JointImpedanceCommand, SimFR3

TRUTH = DynamicsParams(
    armature=[0.30, 0.22, 0.17, 0.18, 0.12, 0.10, 0.06],
    mu_static=[0.9, 1.1, 1.0, 1.3, 0.8, 0.6, 0.4],
    dynamic_ratio=[0.6] * 7,
    mu_viscous=[2.0, 2.5, 1.5, 2.0, 1.0, 0.6, 0.5],
    motor_delay_ms=2,
)


def multisine_targets(n: int, seed: int, amp_rad: float = 0.15) -> np.ndarray:
    """(n, 7) pre-EMA joint targets: home + 3 tones per joint (0.4-2.5 Hz), 0.3 s fade-in."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 1e-3
    env = np.clip(t / 0.3, 0.0, 1.0)
    out = np.tile(HOME_Q, (n, 1))
    for j in range(7):
        freqs = rng.uniform(0.4, 2.5, 3)
        phases = rng.uniform(0, 2 * np.pi, 3)
        wave = sum(np.sin(2 * np.pi * f * t + p) - np.sin(p) for f, p in zip(freqs, phases)) / 3
        out[:, j] += amp_rad * env * wave
    return out


def record(truth: DynamicsParams, n: int, seed: int, noise_q_rad: float = 1e-4,
           noise_dq_rad_s: float = 1e-3, configured_load=None) -> dict[str, np.ndarray]:
    """Columns of an n-tick joint-impedance recording of `truth` driven by a multisine
    (`configured_load`: the firmware's, an EndLoad; none if None)."""
    arm = SimFR3(truth) if configured_load is None else SimFR3(truth, configured_load=configured_load)
    rng = np.random.default_rng([seed, 1])
    targets = multisine_targets(n, seed)
    cols: dict[str, list] = {k: [] for k in ("q", "dq", "tau_cmd", "q_target", "q_target_filtered", "K", "D")}
    for k in range(n):
        q = arm.q + rng.normal(0, noise_q_rad, 7)
        dq = arm.dq + rng.normal(0, noise_dq_rad_s, 7)
        out = arm.tick(q, dq, JointImpedanceCommand(targets[k]))
        for key, val in (("q", q), ("dq", dq), ("tau_cmd", out.tau_cmd), ("q_target", out.q_target),
                         ("q_target_filtered", out.q_target_filtered), ("K", out.k_nm_per_rad),
                         ("D", out.d_nms_per_rad)):
            cols[key].append(val)
        arm.physics_step()
    return frame_columns({k: np.array(v) for k, v in cols.items()}, n, filter_alpha=0.05)


def frame_columns(cols: dict[str, np.ndarray], n: int, *, filter_alpha: float) -> dict[str, np.ndarray]:
    """Canonical frame columns of an n-tick joint-impedance recording from its per-tick (n, 7)
    arrays `q`, `dq`, `tau_cmd`, `q_target`, `q_target_filtered`, `K`, `D`."""
    seq = np.arange(n, dtype=np.int64)
    frame: dict[str, np.ndarray] = {"seq": seq, "t_s": seq * 1e-3}
    names = {"q": "q", "dq": "dq", "tau_cmd": "tau_cmd", "q_target": "q_target",
             "q_target_filtered": "q_target_filtered", "K": "K_joint", "D": "D_joint"}
    for key, prefix in names.items():
        for j in range(7):
            frame[f"{prefix}{j + 1}"] = cols[key][:, j]
    frame["controller"] = np.full(n, 2, np.int32)
    frame["schema_version"] = np.full(n, 2, np.int32)
    frame["joint_target_valid"] = np.ones(n, np.int8)
    frame["filter_alpha"] = np.full(n, filter_alpha)
    frame["joint_use_friction"] = np.zeros(n, np.int8)
    frame["joint_reset_count"] = np.ones(n, np.int64)
    period = np.full(n, 1e-3)
    period[0] = 0.0
    frame["control_period_s"] = period
    return frame


def publish_run(lake: Path, robot: str, run: str, frame: dict[str, np.ndarray], metadata: dict | None = None) -> None:
    """Write the columns as `<lake>/runs/robot=<robot>/run=<run>/` (frames + run row, with
    `metadata` as its metadata_json)."""
    n = len(frame["seq"])
    frames = pa.Table.from_arrays(
        [pa.array(frame[f.name], f.type) if f.name in frame else pa.nulls(n, f.type) for f in FRAME_SCHEMA],
        schema=FRAME_SCHEMA,
    )
    row = {f.name: pa.nulls(1, f.type) for f in RUN_SCHEMA}
    row.update(source_format=pa.array(["synthetic"]), raw_sha256=pa.array([f"sha-{run}"]),
               frame_count=pa.array([n], pa.int64()), seq_first=pa.array([0], pa.int64()),
               seq_last=pa.array([n - 1], pa.int64()))
    if metadata is not None:
        row["metadata_json"] = pa.array([json.dumps(metadata)], pa.string())
    runs = pa.table(row, schema=RUN_SCHEMA)
    lk = lake if isinstance(lake, Lake) else Lake(lake)

    def write(path: Path) -> None:
        pq.write_table(frames, path / "frames.parquet")
        pq.write_table(runs, path / "run.parquet")

    publish_partition(lk, lk.run_relative(robot, run), write)


def publish_demo_runs(lake: Path, ticks: int) -> Path:
    """Runs demo/r1, demo/r2 (train) and demo/r3 (holdout) of TRUTH, `ticks` each (seeds 1..3):
    the small lake the fit and cluster tests share."""
    for i, run in enumerate(("r1", "r2", "r3"), start=1):
        publish_run(lake, "demo", run, record(TRUTH, ticks, seed=i))
    return lake
