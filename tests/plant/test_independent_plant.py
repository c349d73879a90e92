"""The independent test plant: its recordings ingest cleanly, and its physics does what its
truth says (payload sag, friction asymmetry, motor delay), deterministically.

Real MuJoCo, the real `twinlake excite`/`ingest`/`intervals` command lines in subprocesses,
real DuckDB over the lake they wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pyarrow.csv as pacsv
import pytest

from plant import (
    COLUMNS,
    IndependentPlant,
    build_models,
    friction_torque_nm,
    read_reference,
    record,
    write_reference,
)
from plant.independent import FR3_MJCF

ANCHOR = np.array([0.0, -0.6, 0.0, -1.8, 0.0, 1.8, 0.7])
KP = (600.0, 400.0, 600.0, 300.0, 250.0, 150.0, 50.0)
KD = (50.0, 40.0, 50.0, 40.0, 30.0, 25.0, 15.0)


def twinlake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "twinlake", *args], capture_output=True,
                          text=True, timeout=300)


def csv_columns(path: Path) -> dict[str, np.ndarray]:
    table = pacsv.read_csv(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def joints(cols: dict, prefix: str) -> np.ndarray:
    return np.column_stack([cols[f"{prefix}{j}"] for j in range(7)])


def multisine_reference(directory: Path, seed: int) -> Path:
    done = twinlake("excite", "--mode", "multisine", "--joints", "1", "2", "3", "4", "5", "6", "7",
                    "--seconds", "8", "--ramp", "1.5", "--hold", "0.5", "--amplitude-deg", "6",
                    "--tones", "0.3", "0.7", "1.3", "--seed", str(seed), "--rate", "100",
                    "--max-velocity", "1", "--max-acceleration", "10", "--max-jerk", "100",
                    "--output", str(directory))
    assert done.returncode == 0, done.stderr
    return directory / "reference.csv"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A train and a held-out run (different multisine phases) in one directory."""
    base = tmp_path_factory.mktemp("plant")
    runs = base / "runs"
    runs.mkdir()
    out = {}
    for name, seed in (("train", 1), ("holdout", 2)):
        ref = multisine_reference(base / f"ref-{name}", seed)
        out[name] = record(ref, runs / f"{name}.csv", plant=IndependentPlant(seed=seed),
                           kp=KP, kd=KD, settle_s=1.0, robot_id="plant-arm")
    return base, out


def test_recordings_ingest_ok_with_one_clean_interval_each(recorded):
    base, runs = recorded
    header = (base / "runs" / "train.csv").read_text().split("\n", 1)[0].split(",")
    from twinlake.ingest.fr3_stack.recording_csv import V2_COLUMNS
    assert tuple(header) == COLUMNS == V2_COLUMNS and len(header) == 80
    lake = base / "lake"
    done = twinlake("ingest", str(base / "runs"), "--robot", "arm", "--lake", str(lake), "--json")
    assert done.returncode == 0, done.stderr
    outcomes = {o["run"]: o for o in map(json.loads, done.stdout.splitlines())}
    assert set(outcomes) == {"train", "holdout"}
    for name, rec in runs.items():
        o = outcomes[name]
        assert (o["status"], o["verdict"], o["flags"], o["frame_count"]) == ("published", "ok", [], rec.rows)
        assert len(o["files"]) == 3  # the CSV, its status and its metadata
    done = twinlake("intervals", "--lake", str(lake), "--json")
    assert done.returncode == 0, done.stderr
    intervals = {i["run"]: i for i in json.loads(done.stdout)}
    assert len(json.loads(done.stdout)) == 2
    for name, rec in runs.items():
        i = intervals[name]
        assert (i["seq_first"], i["seq_last"], i["start_reason"], i["end_reason"]) == \
            (0, rec.rows - 1, "run_start", "run_end")
        assert (i["controller"], i["K_joint"], i["D_joint"], i["filter_alpha"]) == (2, list(KP), list(KD), 0.05)
    from twinlake.catalog import connect
    con = connect(lake)
    rows = con.execute("SELECT run, complete, completion_confirmed, fit_eligible, payload_kg, "
                       "recording_id FROM runs ORDER BY run").fetchall()
    assert rows == [("holdout", True, True, True, None, "plant-holdout"),
                    ("train", True, True, True, None, "plant-train")]
    q2 = np.array(con.execute("SELECT q2 FROM frames WHERE run = 'train' ORDER BY seq").fetchall())[:, 0]
    assert np.array_equal(q2, csv_columns(base / "runs" / "train.csv")["q1"])  # bit for bit
    # the excitation really moved the arm, and the noise is the declared one
    q_true = runs["train"].q_true_rad
    assert np.ptp(q_true, axis=0).min() > 0.05
    residual = joints(csv_columns(base / "runs" / "train.csv"), "q") - q_true
    assert np.std(residual) == pytest.approx(IndependentPlant().noise_q_rad, rel=0.05)


def unknown_gravity_nm(plant: IndependentPlant, q: np.ndarray) -> np.ndarray:
    """Gravity torque the firmware does not compensate at q (the payload's, the links' scaled
    masses'): the inverse dynamics at rest of the plant model minus that of the firmware's."""
    models = build_models(plant)
    torques = []
    for model in (models.plant, models.firmware):
        data = mujoco.MjData(model)
        data.qpos[models.qpos_adr] = q
        mujoco.mj_inverse(model, data)
        torques.append(data.qfrc_inverse[models.dof_adr].copy())
    return torques[0] - torques[1]


@pytest.mark.parametrize("mass_kg", [1.2, 2.5])
def test_hold_error_is_the_payload_gravity_over_kp(tmp_path, mass_kg):
    ref = write_reference(tmp_path / "hold.csv", [0.0, 1.5], [ANCHOR, ANCHOR])
    plant = IndependentPlant(payload_mass_kg=mass_kg, payload_com_m=(0.02, 0.0, 0.08), seed=5)
    held = record(ref, tmp_path / "held.csv", plant=plant, kp=KP, kd=KD, settle_s=3.0, tail_s=0.0)
    q_meas = joints(csv_columns(held.csv_path), "q")[-1000:].mean(axis=0)
    error = ANCHOR - q_meas
    expected = unknown_gravity_nm(plant, q_meas) / np.asarray(KP)
    for j in (1, 3):  # J2, J4: the big gravity arms
        assert abs(expected[j]) > 1e-3  # far above the measurement noise
        assert error[j] == pytest.approx(expected[j], rel=0.02), f"J{j + 1}"
    bare = record(ref, tmp_path / "bare.csv", plant=plant.replace(payload_mass_kg=0.0), kp=KP,
                  kd=KD, settle_s=3.0, tail_s=0.0)
    bare_error = ANCHOR - joints(csv_columns(bare.csv_path), "q")[-1000:].mean(axis=0)
    assert np.all(np.abs(bare_error[[1, 3]]) < 0.02 * np.abs(error[[1, 3]]))


def test_sensor_offsets_and_a_ringing_tool_show_in_tau_j(tmp_path):
    ref = write_reference(tmp_path / "hold.csv", [0.0, 2.0], [ANCHOR, ANCHOR])
    offsets = (0.3, -0.4, 0.1, 0.2, -0.1, 0.05, -0.05)
    plain = IndependentPlant(payload_mass_kg=0.3, payload_radius_m=0.04, seed=5)
    ringing = plain.replace(tau_j_offset_nm=offsets, ring_torque_nm=0.3, ring_hz=7.0, ring_decay_s=1.0, ring_start_s=0.5)
    a = joints(csv_columns(record(ref, tmp_path / "a.csv", plant=plain, settle_s=1.0, tail_s=0.0).csv_path), "tau_J")
    b = joints(csv_columns(record(ref, tmp_path / "b.csv", plant=ringing, settle_s=1.0, tail_s=0.0).csv_path), "tau_J")
    before = slice(0, 500)  # the ring starts at 0.5 s: before it only the offsets differ, to the noise
    assert np.allclose((b - a)[before].mean(axis=0), offsets, atol=0.01)
    ring = (b - a)[500:] - np.asarray(offsets)
    j = int(np.argmax(ring.std(axis=0)))
    spectrum = np.abs(np.fft.rfft(ring[:, j] - ring[:, j].mean()))
    peak_hz = np.fft.rfftfreq(len(ring), 1e-3)[int(np.argmax(spectrum))]
    assert ring.std(axis=0)[j] > 0.02 and peak_hz == pytest.approx(7.0, abs=1.0)  # a damped 7 Hz flange torque
    assert np.abs(ring[-300:]).max(axis=0)[j] < np.abs(ring[:300]).max(axis=0)[j]  # it decays


def test_link_masses_the_firmware_does_not_know_sag_the_hold(tmp_path):
    """Links 2-4 8 % heavier, 5-7 5 % lighter than the MJCF (no payload): the firmware
    compensates the file's gravity, so the hold error is the links' gravity difference / kp."""
    ref = write_reference(tmp_path / "hold.csv", [0.0, 1.5], [ANCHOR, ANCHOR])
    plant = IndependentPlant(payload_mass_kg=0.0, link_mass_scale=(1.0, 1.08, 1.08, 1.08, 0.95, 0.95, 0.95),
                             seed=6)
    held = record(ref, tmp_path / "held.csv", plant=plant, kp=KP, kd=KD, settle_s=3.0, tail_s=0.0)
    q_meas = joints(csv_columns(held.csv_path), "q")[-1000:].mean(axis=0)
    expected = unknown_gravity_nm(plant, q_meas) / np.asarray(KP)
    for j in (1, 3):
        assert abs(expected[j]) > 5e-4
        assert (ANCHOR - q_meas)[j] == pytest.approx(expected[j], rel=0.03), f"J{j + 1}"
    models = build_models(plant)
    link2 = mujoco.mj_name2id(models.plant, mujoco.mjtObj.mjOBJ_BODY, "fr3_link2")
    assert models.plant.body_mass[link2] == pytest.approx(1.08 * models.firmware.body_mass[link2])
    assert np.allclose(models.plant.body_ipos[link2], models.firmware.body_ipos[link2])


@pytest.mark.parametrize("delay_ms", [0, 2, 4])
def test_commanded_torque_reaches_the_arm_after_the_declared_ticks(tmp_path, delay_ms):
    """Two runs identical but for a target step on J1 at 100 ms: tau_cmd first differs at the
    step's row k0; the arm's velocity (and the link torque) first differ at k0 + d + 1."""
    times = [0.0, 0.1, 0.3]
    step = ANCHOR + np.array([0.05, 0, 0, 0, 0, 0, 0])
    hold = write_reference(tmp_path / "hold.csv", times, [ANCHOR] * 3)
    stepped = write_reference(tmp_path / "step.csv", times, [ANCHOR, step, step])
    plant = IndependentPlant(motor_delay_ms=delay_ms, seed=7)
    runs = [csv_columns(record(ref, tmp_path / f"{ref.stem}-out.csv", plant=plant, settle_s=0.3,
                               tail_s=0.0).csv_path) for ref in (hold, stepped)]

    def first_difference(prefix: str) -> int:
        diff = np.any(joints(runs[0], prefix) != joints(runs[1], prefix), axis=1)
        return int(np.flatnonzero(diff)[0])

    assert first_difference("q_target") == 100
    assert first_difference("tau_cmd") == 100
    assert first_difference("dq") == 100 + delay_ms + 1
    assert first_difference("tau_J") == 100 + delay_ms + 1


@pytest.mark.parametrize("load_per_nm", [0.0, 0.2])
def test_friction_is_the_declared_asymmetric_law(tmp_path, load_per_nm):
    """J1 (vertical axis: no gravity) driven at ±0.2 rad/s: at constant velocity the mean
    commanded torque balances the plant's friction, Coulomb level c⁺ one way, c⁻ the other,
    grown by k·|transmitted torque| (so by 1/(1 − k) where friction is all it transmits)."""
    t = np.arange(0.0, 5.0, 0.01)
    offset = np.interp(t, [0.0, 0.5, 2.0, 2.5, 4.0, 5.0], [0.0, 0.0, 0.3, 0.3, 0.0, 0.0])
    q_ref = np.tile(ANCHOR, (len(t), 1))
    q_ref[:, 0] += offset
    ref = write_reference(tmp_path / "ramps.csv", t, q_ref)
    plant = IndependentPlant(coulomb_pos_nm=(1.2, 1, 1, 1, 0.4, 0.4, 0.2),
                             coulomb_neg_nm=(0.5, 1, 1, 1, 0.4, 0.4, 0.2), seed=3,
                             coulomb_load_per_nm=(load_per_nm, 0, 0, 0, 0, 0, 0))
    rec = record(ref, tmp_path / "ramps-out.csv", plant=plant, settle_s=0.5, tail_s=0.0)
    cols = csv_columns(rec.csv_path)
    seconds = cols["t_s"]
    for lo, hi in ((0.9, 1.9), (2.9, 3.9)):  # well inside each ramp
        window = (seconds >= lo) & (seconds < hi)
        dq = joints(cols, "dq")[window].mean(axis=0)
        tau = cols["tau_cmd0"][window].mean()
        assert abs(abs(dq[0]) - 0.2) < 0.01
        assert tau == pytest.approx(-friction_torque_nm(plant, dq, tau)[0], abs=0.03)
    up = cols["tau_cmd0"][(seconds >= 0.9) & (seconds < 1.9)].mean()
    down = cols["tau_cmd0"][(seconds >= 2.9) & (seconds < 3.9)].mean()
    assert up + down == pytest.approx((1.2 - 0.5) / (1 - load_per_nm), abs=0.05)  # viscous cancels


STRIBECK = dict(friction_law="stribeck", coulomb_pos_nm=(1.0, 1.0, 0.8, 0.8, 0.45, 0.35, 0.3),
                coulomb_neg_nm=(1.0, 1.0, 0.8, 0.8, 0.45, 0.35, 0.3),
                dynamic_ratio=(0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.5), smoothing_velocity_rad_s=0.02)


@pytest.mark.parametrize("speed_rad_s, level_nm", [(0.2, 0.6), (0.01, 0.6 + 0.4 * np.exp(-0.25))])
def test_stribeck_law_is_the_twins_curve(tmp_path, speed_rad_s, level_nm):
    """friction_law="stribeck" (the twin's own law): J1 driven at ±q̇ balances
    F(q̇) = μ_d + (μ_s − μ_d)·exp(−(q̇/v_s)²) + b·q̇ — the dynamic level r·μ_s = 0.6 N·m fast,
    the Stribeck hump (0.91 N·m) at q̇ = v_s/2 — where the tanh law would give c⁺ = 1 N·m."""
    t = np.arange(0.0, 5.0, 0.01)
    offset = np.interp(t, [0.0, 0.5, 2.0, 2.5, 4.0, 5.0], [0.0, 0.0, 1.5 * speed_rad_s, 1.5 * speed_rad_s, 0.0, 0.0])
    q_ref = np.tile(ANCHOR, (len(t), 1))
    q_ref[:, 0] += offset
    plant = IndependentPlant(payload_mass_kg=0.0, seed=3, **STRIBECK)
    rec = record(write_reference(tmp_path / "ramps.csv", t, q_ref), tmp_path / "ramps-out.csv", plant=plant,
                 settle_s=0.5, tail_s=0.0)
    cols = csv_columns(rec.csv_path)
    for lo, hi, sign in ((0.9, 1.9, 1.0), (2.9, 3.9, -1.0)):
        window = (cols["t_s"] >= lo) & (cols["t_s"] < hi)
        dq = rec.dq_true_rad_s[window, 0].mean()
        assert abs(dq - sign * speed_rad_s) < 0.05 * speed_rad_s
        expected = sign * (level_nm + plant.viscous[0] * speed_rad_s)
        assert cols["tau_cmd0"][window].mean() == pytest.approx(expected, abs=0.01)
        assert -friction_torque_nm(plant, np.full(7, sign * speed_rad_s))[0] == pytest.approx(expected, abs=1e-9)
    models = build_models(plant)
    assert np.allclose(models.plant.dof_frictionloss[models.dof_adr], plant.coulomb_pos)  # the breakaway level
    assert not models.firmware.dof_frictionloss.any()


def test_same_seed_same_bytes(tmp_path):
    t = np.arange(0.0, 1.0, 1 / 60)
    q_ref = ANCHOR + 0.05 * np.sin(2 * np.pi * 0.5 * t)[:, None]
    ref = write_reference(tmp_path / "ref.csv", t, q_ref)
    outs = []
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        (tmp_path / name).mkdir()
        rec = record(ref, tmp_path / name / "run.csv", plant=IndependentPlant(seed=seed), settle_s=0.2)
        outs.append(rec)
    a, b, c = (o.csv_path.read_bytes() for o in outs)
    assert a == b and a != c
    assert outs[0].meta_path.read_bytes() == outs[1].meta_path.read_bytes()
    status = [json.loads(o.status_path.read_text()) for o in outs[:2]]
    assert status[0].pop("path") != status[1].pop("path") and status[0] == status[1]


def test_friction_law_values():
    plant = IndependentPlant()
    dq = np.array([[0.3, -0.3, 0.0, 1e-3, -1e-3, 2.0, -2.0]])
    coulomb = -np.where(dq >= 0, plant.coulomb_pos, plant.coulomb_neg) * np.tanh(dq / 0.03)
    assert np.allclose(friction_torque_nm(plant, dq), coulomb - plant.viscous * dq)
    assert friction_torque_nm(plant, np.zeros(7)).tolist() == [0.0] * 7
    far = friction_torque_nm(plant, np.full(7, 5.0)) + plant.viscous * 5.0
    assert np.allclose(far, -plant.coulomb_pos) and not np.allclose(far, -plant.coulomb_neg)


def test_models_carry_the_payload_only_in_the_plant():
    plant = IndependentPlant(payload_mass_kg=1.7)
    models = build_models(plant)
    arm_mass = models.firmware.body_mass.sum()
    assert models.plant.body_mass.sum() == pytest.approx(arm_mass + 1.7)
    assert np.allclose(models.plant.dof_armature[models.dof_adr], plant.armature)
    assert np.allclose(models.plant.dof_damping[models.dof_adr], plant.viscous)
    assert not models.plant.dof_frictionloss.any() and not models.firmware.dof_frictionloss.any()
    assert models.plant.opt.gravity[2] == pytest.approx(-9.81)
    assert FR3_MJCF.name == "fr3.xml"


def test_bad_inputs_are_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="motor_delay_ms"):
        IndependentPlant(motor_delay_ms=1.5)
    with pytest.raises(ValueError, match="too steep"):
        IndependentPlant(smoothing_velocity_rad_s=1e-4)
    with pytest.raises(ValueError, match="coulomb_neg_nm"):
        IndependentPlant(coulomb_neg_nm=(1.0, 2.0))
    with pytest.raises(ValueError, match="symmetric"):
        IndependentPlant(friction_law="stribeck")  # the default c⁺ != c⁻
    with pytest.raises(ValueError, match="friction_law"):
        IndependentPlant(friction_law="coulomb")
    with pytest.raises(ValueError, match="dynamic_ratio"):
        IndependentPlant(dynamic_ratio=1.5)
    bad = tmp_path / "bad.csv"
    bad.write_text("t_s,q_ref1,q_ref2\n0,0,0\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 1: missing column 'q_ref3'"):
        read_reference(bad)
    ref = write_reference(tmp_path / "ref.csv", [0.0, 0.1], [ANCHOR, ANCHOR])
    (tmp_path / "taken.csv").write_text("keep me\n")
    with pytest.raises(FileExistsError, match="taken.csv"):
        record(ref, tmp_path / "taken.csv")
    assert (tmp_path / "taken.csv").read_text() == "keep me\n"
