"""Recordings of a known measurement noise for the noise-floor and model-adequacy tests.

`record_arm` drives the real simulated arm (`twinlake.sim.SimFR3`) tick by tick, as the daemon
does, with white Gaussian noise of known σ on the measured q and dq, the joint-impedance gains
of the caller's choice, and optionally what a model of that arm would not know about:

- `payload_kg`: a point mass at the flange whose weight the firmware does not compensate (the
  sim's arm is gravity-free, so the mass's weight is applied as an external force at the `ee`
  site, `MjData.xfrc_applied` of its body, updated every tick at the current pose);
- `q_offset_rad`: a constant offset added to the measured q (an encoder / calibration offset).

The frames carry the canonical columns (`tests/fit/synth.publish_run` writes them to a lake).
`offline_run` makes a CSV v2 recording with the offline recorder (the daemon's noise source).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from synth import frame_columns
from twinlake.sim import DynamicsParams, JointImpedanceCommand, JointImpedanceConfig, SimFR3

GRAVITY_M_S2 = 9.81


def _payload_wrench(arm: SimFR3, mass_kg: float) -> None:
    """Set xfrc_applied of the flange body: the weight of `mass_kg` at the `ee` site."""
    plant = arm.plant
    site = plant.arm.ee_site
    body = int(plant.model.site_bodyid[site])
    force = np.array([0.0, 0.0, -GRAVITY_M_S2 * mass_kg])
    lever = plant.data.site_xpos[site] - plant.data.xipos[body]
    plant.data.xfrc_applied[body, :3] = force
    plant.data.xfrc_applied[body, 3:] = np.cross(lever, force)


def record_arm(truth: DynamicsParams, targets: np.ndarray, *, seed: int, noise_q_rad: float = 2e-5,
               noise_dq_rad_s: float = 5e-4, config: JointImpedanceConfig | None = None,
               payload_kg: float = 0.0, q_offset_rad=None) -> dict[str, np.ndarray]:
    """Canonical frame columns of a joint-impedance recording of `truth` following `targets` (n, 7)."""
    arm = SimFR3(truth, q0=targets[0])
    config = config or JointImpedanceConfig()
    rng = np.random.default_rng([seed, 7])
    offset = np.zeros(7) if q_offset_rad is None else np.asarray(q_offset_rad, dtype=np.float64)
    n = len(targets)
    keys = ("q", "dq", "tau_cmd", "q_target", "q_target_filtered", "K", "D")
    cols: dict[str, np.ndarray] = {k: np.empty((n, 7)) for k in keys}
    for k in range(n):
        q = arm.q + offset + rng.normal(0.0, noise_q_rad, 7)
        dq = arm.dq + rng.normal(0.0, noise_dq_rad_s, 7)
        out = arm.tick(q, dq, JointImpedanceCommand(targets[k], config))
        for key, val in (("q", q), ("dq", dq), ("tau_cmd", out.tau_cmd), ("q_target", out.q_target),
                         ("q_target_filtered", out.q_target_filtered), ("K", out.k_nm_per_rad),
                         ("D", out.d_nms_per_rad)):
            cols[key][k] = val
        if payload_kg:
            _payload_wrench(arm, payload_kg)  # at this tick's pose (after the tick's mj_step1)
        arm.physics_step()
    return frame_columns(cols, n, filter_alpha=config.filter_alpha)


def measured(frame: dict[str, np.ndarray], prefix: str = "q") -> np.ndarray:
    """(n, 7) of the frame's `prefix`1..7 columns."""
    return np.column_stack([frame[f"{prefix}{j}"] for j in range(1, 8)])


def offline_run(tmp: Path, name: str, seed: int, noise, **gains) -> Path:
    """A 2 s multisine of all joints recorded offline on the demo robot (CSV v2 + companions)."""
    from twinlake.daemon import Plan, preflight, record_offline, validate_plan
    from twinlake.daemon.excitation import PREVIEW_ANCHOR_Q
    from twinlake.daemon.excite_files import reference_table, write_reference_csv

    folder = tmp / name
    folder.mkdir()
    plan = validate_plan(Plan(mode="multisine", joints=(1, 2, 3, 4, 5, 6, 7), amplitude_deg=10.0, seconds=2.0,
                              ramp=0.5, hold=0.3, tones=(0.4, 0.9, 1.7), seed=seed, rate=100.0, max_velocity=3.0,
                              max_acceleration=30.0, max_jerk=500.0))
    preflight(plan, PREVIEW_ANCHOR_Q)
    write_reference_csv(folder / "reference.csv", reference_table(plan, PREVIEW_ANCHOR_Q))
    csv = folder / f"{name}.csv"
    record_offline(folder / "reference.csv", csv, seed=seed, noise=noise, tail_s=0.3, robot_id="demo-robot", **gains)
    return csv


def ingest_recordings(lake: Path, made: list[tuple[str, str, Path]], robot: str = "demo-robot") -> None:
    """Ingest each (run, role, csv) as run `<robot>/<run>`; AssertionError unless published."""
    from twinlake.catalog import Lake
    from twinlake.ingest import ReadOptions, ingest_paths

    for run, _role, csv in made:
        for outcome in ingest_paths(Lake(lake), [csv], ReadOptions(robot=robot, run=run)):
            assert outcome.status in ("published", "already_ingested", "replaced"), (csv, outcome.message)
