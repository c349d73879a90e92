"""The test plant's 1 kHz loop: a reference.csv in, a CSV v2 recording + status out.

Timeline (one tick = 1 ms = one `mj_step` of the plant):

* **Settle** (`settle_s`, not recorded): the arm starts at rest at the reference's first
  target; the controller switches into joint impedance at the first tick (the EMA restarts
  at the measured q, the reset counter becomes 1, the slew state is 0) and holds that target
  while the payload sags to its equilibrium, as a robot holds before a recording starts.
* **Recording**: row k (`seq` = k, `t_s` = k·1 ms) is tick k of the reference's time.
  Reference row i is sent at tick `rint((t_i − t_0)/1 ms)`; the latest row sent by tick k is
  the target (held between sends). The run ends `tail_s` after the last send.

Each tick, in fr3_stack's order: measure (true state + Gaussian noise), take the target,
firmware compensation at the measured state, EMA → torque → slew limit (`tau_cmd`), capture
the row, then physics. The torque applied in the step after row k is
`tau_cmd[k − d] + gravity_fw(q_meas[k])` (+ the plant's Coulomb friction, whose level may grow
with that motor torque; under the stribeck law its sliding relief, the breakaway level being
MuJoCo's frictionloss constraint), d =
`motor_delay_ms` ticks: the command travels through a FIFO of d ticks (zeros before the
first command), while the robot adds its (payload-free) gravity compensation at the joint
without that delay. So a change in `tau_cmd` at row k first moves `dq` at row k + d + 1.

`tau_J` (measured link-side torque) is the torque the joint delivered to the link during the
step that ended at the row: motor torque + friction − armature·(Δq̇/1 ms), plus noise and the
sensor's constant offset (`tau_j_offset_nm`). A ringing tool (`ring_torque_nm`) is a couple on
the flange's body from `ring_start_s` on, so the links feel it and tau_J carries it.
`ee_*` is the flange pose the firmware computes from the measured q.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from . import csv_v2 as C
from .firmware import (
    DEFAULT_FILTER_ALPHA,
    DEFAULT_KD,
    DEFAULT_KP,
    FirmwareModel,
    JointImpedanceLaw,
)
from .independent import JOINTS, TICK_S, IndependentPlant, build_models, coulomb_torque_nm, stribeck_relief_nm

JOINT_IMPEDANCE = 2
REFERENCE_Q = tuple(f"q_ref{j}" for j in range(1, JOINTS + 1))


@dataclass(frozen=True)
class PlantRecording:
    """What `record` wrote and the truth behind it (in memory only, never in the files).

    rows: recorded ticks; delay_ticks: the motor delay used.
    q_true_rad / dq_true_rad_s: (rows, 7) true state at each row (before noise).
    tau_applied_nm: (rows, 7) the delayed commanded torque applied in the step after each
    row (without the robot's gravity compensation and the friction).
    """

    csv_path: Path
    status_path: Path
    meta_path: Path
    rows: int
    delay_ticks: int
    q_true_rad: np.ndarray
    dq_true_rad_s: np.ndarray
    tau_applied_nm: np.ndarray
    wall_s: float


def read_reference(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """`(t_s (N,), q_ref (N, 7))` from an fr3_stack `reference.csv` (`t_s, q_ref1..7, ...`,
    1-based suffixes, absolute targets in rad). Errors name the file, line and column."""
    path = Path(path)
    with open(path, encoding="ascii") as fh:
        header = fh.readline().rstrip("\r\n").split(",")
    for name in ("t_s",) + REFERENCE_Q:
        if name not in header:
            raise ValueError(f"{path}: line 1: missing column '{name}' (expected t_s, q_ref1..q_ref7)")
    cols = [header.index(n) for n in ("t_s",) + REFERENCE_Q]
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=1, usecols=cols, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{path}: not a numeric reference table: {exc}") from None
    if data.shape[0] == 0:
        raise ValueError(f"{path}: no rows after the header")
    bad = np.argwhere(~np.isfinite(data))
    if bad.size:
        row, col = bad[0]
        raise ValueError(f"{path}: line {row + 2}: column '{(('t_s',) + REFERENCE_Q)[col]}' is not finite")
    t_s = data[:, 0]
    if np.any(np.diff(t_s) <= 0):
        line = int(np.flatnonzero(np.diff(t_s) <= 0)[0]) + 3
        raise ValueError(f"{path}: line {line}: column 't_s' must increase")
    return t_s, data[:, 1:]


def write_reference(path: str | Path, t_s, q_ref) -> Path:
    """A minimal reference.csv in fr3_stack's 29-column layout with the given times and
    targets and zero derivatives (for holds and steps, which have none). New file only."""
    t_s = np.asarray(t_s, dtype=float).reshape(-1)
    q_ref = np.asarray(q_ref, dtype=float).reshape(len(t_s), JOINTS)
    names = ["t_s", *REFERENCE_Q] + [f"{p}{j}" for p in ("dq_ref", "ddq_ref", "jerk_ref")
                                      for j in range(1, JOINTS + 1)]
    table = np.hstack([t_s[:, None], q_ref, np.zeros((len(t_s), 3 * JOINTS))])
    path = Path(path)
    with open(path, "x", encoding="ascii", newline="\n") as fh:
        fh.write(",".join(names) + "\n")
        fh.write("".join(",".join("%.12g" % v for v in row) + "\n" for row in table.tolist()))
    return path


def record(reference_csv: str | Path, out_csv: str | Path, *,
           plant: IndependentPlant = IndependentPlant(), kp=DEFAULT_KP, kd=DEFAULT_KD,
           filter_alpha: float = DEFAULT_FILTER_ALPHA, use_friction: bool = False,
           settle_s: float = 2.0, tail_s: float = 1.0, robot_id: str | None = None,
           recording_id: str | None = None, model_path: str | Path | None = None) -> PlantRecording:
    """Run `reference_csv` on `plant` under fr3_stack's joint impedance law (kp [N·m/rad],
    kd [N·m·s/rad]: 1 or 7 values; filter_alpha: EMA weight) and write `out_csv` (CSV v2,
    new file), `<stem>.status.json` (a complete stop) and `<stem>.meta.json` (what the
    operator knows: gains, reference, anchor; the payload as unknown). Same inputs → same bytes."""
    started = time.perf_counter()
    out_csv = Path(out_csv)
    if out_csv.exists():
        raise FileExistsError(f"{out_csv}: exists; a recording never overwrites a file")
    recording_id = C.check_recording_id(recording_id or _default_id(out_csv))
    for name, value in (("settle_s", settle_s), ("tail_s", tail_s)):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
    t_ref, q_ref = read_reference(reference_csv)
    send_ticks = np.rint((t_ref - t_ref[0]) / TICK_S).astype(np.int64)
    rows = int(send_ticks[-1] + round(tail_s / TICK_S)) + 1
    settle = int(round(settle_s / TICK_S))
    target_row = np.searchsorted(send_ticks, np.arange(rows), side="right") - 1
    targets = np.vstack([np.repeat(q_ref[:1], settle, axis=0), q_ref[target_row]])
    law = JointImpedanceLaw(kp, kd, filter_alpha, use_friction)
    table, truth = _run(plant, targets, settle, law, model_path)
    C.write_csv_v2(out_csv, table)
    status = C.write_status(out_csv, C.complete_status(out_csv, rows, recording_id))
    meta = C.write_meta(out_csv, _meta(robot_id, recording_id, law, reference_csv, q_ref[0],
                                       settle_s))
    return PlantRecording(out_csv, status, meta, rows, plant.delay_ticks, *truth,
                          wall_s=time.perf_counter() - started)


def _default_id(out_csv: Path) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in out_csv.stem)
    return ("plant-" + cleaned)[:128]


def _run(plant: IndependentPlant, targets: np.ndarray, settle: int, law: JointImpedanceLaw,
         model_path) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Step the plant over settle + recorded ticks; returns the CSV rows and the truth."""
    models = build_models(plant, model_path)
    m, d = models.plant, mujoco.MjData(models.plant)
    qadr, dadr = models.qpos_adr, models.dof_adr
    d.qpos[qadr] = targets[0]
    mujoco.mj_forward(m, d)
    firmware = FirmwareModel(models)
    total = len(targets)
    rows = total - settle
    noise = np.random.default_rng(plant.seed).standard_normal((total, 3 * JOINTS))
    noise *= np.repeat([plant.noise_q_rad, plant.noise_dq_rad_s, plant.noise_tau_j_nm], JOINTS)
    table = _constant_columns(rows, law, settle)
    q_true, dq_true, applied = (np.zeros((rows, JOINTS)) for _ in range(3))
    fifo = np.zeros((plant.delay_ticks + 1, JOINTS))
    armature, viscous = plant.armature, plant.viscous
    stribeck = plant.friction_law == "stribeck"
    tau_link = np.zeros(JOINTS)
    offset = np.asarray(plant.tau_j_offset_nm)
    ring_site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "ee")
    ring_body = m.site_bodyid[ring_site]
    ring_axis = np.asarray(plant.ring_axis) / np.linalg.norm(plant.ring_axis)
    cols = {p: C.joint_columns(p) for p in ("q", "dq", "tau_J", "tau_cmd", "q_target",
                                            "q_target_filtered")}
    ee = slice(C.column_index("ee_px"), C.column_index("ee_qw") + 1)
    for tick in range(total):
        q, dq = d.qpos[qadr].copy(), d.qvel[dadr].copy()
        q_m, dq_m = q + noise[tick, :JOINTS], dq + noise[tick, JOINTS:2 * JOINTS]
        if tick == 0:
            law.reset(q_m)
        gravity, coriolis, ee_pos, ee_quat = firmware.sense(q_m, dq_m)
        tau_cmd = law.compute(targets[tick], q_m, dq_m, coriolis)
        slot = tick % len(fifo)
        fifo[slot] = tau_cmd
        delayed = fifo[(tick + 1) % len(fifo)] if len(fifo) > 1 else tau_cmd
        k = tick - settle
        if k >= 0:
            row = table[k]
            row[cols["q"]], row[cols["dq"]] = q_m, dq_m
            row[cols["tau_J"]] = tau_link + noise[tick, 2 * JOINTS:] + offset
            row[cols["tau_cmd"]] = tau_cmd
            row[ee] = np.concatenate([ee_pos, ee_quat])
            row[cols["q_target"]], row[cols["q_target_filtered"]] = targets[tick], law.ema
            q_true[k], dq_true[k], applied[k] = q, dq, delayed
        motor = delayed + gravity
        coulomb = stribeck_relief_nm(plant, dq) if stribeck else coulomb_torque_nm(plant, dq, motor)
        d.qfrc_applied[dadr] = motor + coulomb
        if plant.ring_torque_nm and k >= 0:  # the tool's ringing: a couple at the flange, world axes
            d.xfrc_applied[ring_body, 3:] = d.site_xmat[ring_site].reshape(3, 3) @ ring_axis * plant.ring_nm(k * TICK_S)
        mujoco.mj_step(m, d)
        dq_next = d.qvel[dadr]
        if stribeck:  # the breakaway constraint's torque of the step just taken
            coulomb = coulomb + d.qfrc_constraint[dadr]
        tau_link = motor + coulomb - viscous * dq_next - armature * (dq_next - dq) / TICK_S
    return table, (q_true, dq_true, applied)


def _constant_columns(rows: int, law: JointImpedanceLaw, settle: int) -> np.ndarray:
    """The (rows, 80) table with every column the loop does not fill per tick."""
    table = np.zeros((rows, len(C.COLUMNS)))
    seq = np.arange(rows)
    table[:, C.column_index("seq")] = seq
    table[:, C.column_index("t_s")] = seq * TICK_S
    table[:, C.column_index("controller")] = JOINT_IMPEDANCE
    table[:, C.column_index("schema_version")] = 2
    table[:, C.column_index("joint_target_valid")] = 1
    table[:, C.joint_columns("K_joint")] = law.kp
    table[:, C.joint_columns("D_joint")] = law.kd
    table[:, C.column_index("filter_alpha")] = law.filter_alpha
    table[:, C.column_index("joint_use_friction")] = int(law.use_friction)
    table[:, C.column_index("joint_reset_count")] = 1  # one switch into joint impedance
    table[:, C.column_index("robot_time_s")] = (settle + seq) * TICK_S
    table[:, C.column_index("control_period_s")] = TICK_S
    return table


def _meta(robot_id, recording_id: str, law: JointImpedanceLaw, reference_csv, anchor,
          settle_s: float) -> dict:
    return {
        "schema": "independent_plant_meta/v1",
        "robot_id": robot_id,
        "recording_id": recording_id,
        "source": "tests/plant independent plant (MuJoCo, simulated time)",
        "controller": "joint_impedance",
        "gains": {"K_joint": law.kp.tolist(), "D_joint": law.kd.tolist(),
                  "filter_alpha": law.filter_alpha, "use_friction": law.use_friction},
        "payload": None,
        "reference": Path(reference_csv).name,
        "anchor_q_rad": [float(x) for x in anchor],
        "settle_s": float(settle_s),
        "time_base": "simulated",
    }
