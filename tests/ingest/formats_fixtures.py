"""Fixture writers: files exactly as the specs describe them (column order, `%.9f`/`%d`,
sidecar keys in order), with deterministic synthetic values. Used by tests/ingest/test_formats_*.

FrankaTwin: its data-format docs (docs/formats.md). fr3_stack excitation: `examples/joint_sysid.py`.
TestRandomization episode: its runner's log schema.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np

from twinlake.ingest.frankatwin.csv_logs import (LOG_COLUMNS, RING_COLUMNS, SIM_COLUMNS,
                                            TARGET_CSV_COLUMNS, TARGETS_COLUMNS)

Q_HOME = np.array([0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398])


def _savetxt(path: Path, cols: tuple[str, ...], data: np.ndarray, fmt) -> None:
    np.savetxt(path, data, delimiter=",", header=",".join(cols), comments="", fmt=fmt)


def _state(n: int, t: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Smooth synthetic arm state and Cartesian reference for `n` rows at times `t`."""
    w = 2 * math.pi * 0.25
    q = Q_HOME + 0.05 * np.sin(w * t[:, None] + np.arange(7))
    dq = 0.05 * w * np.cos(w * t[:, None] + np.arange(7))
    x = np.array([0.45, 0.0, 0.4]) + 0.03 * np.sin(w * t[:, None] + np.arange(3))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))  # xyzw, tool down
    x_des = x + 0.001
    dx_des = 0.03 * w * np.cos(w * t[:, None] + np.arange(3))
    tau = rng.normal(0, 1.0, (n, 7))
    tau_j = rng.normal(0, 5.0, (n, 7))
    return dict(q=q, dq=dq, x=x, quat=quat, x_des=x_des, dx_des=dx_des, quat_des=quat.copy(),
                tau=tau, tau_j=tau_j)


def _rows47(t: np.ndarray, period_ms: np.ndarray, s: dict) -> np.ndarray:
    return np.column_stack([t, period_ms, s["q"], s["dq"], s["x"], s["quat"], s["x_des"],
                            s["dx_des"], s["quat_des"], s["tau"], s["tau_j"]])


def sidecar(csv_path: Path, *, controller: str = "python_v4_chirp_excitation", rate: float = 50.0,
            duration: float = 2.0, n: int = 100, ring_log: dict | None = None,
            abort: dict | None = None, **overrides) -> dict:
    """A schema-2 sidecar with the keys in FrankaTwin's order (chirp variant)."""
    kp_pos, kp_ori = 500.0, 30.0
    body = {
        "schema_version": 2, "controller": controller, "created_utc": "2026-05-31T10:00:00+00:00",
        "csv_path": str(csv_path), "sidecar_path": str(csv_path.with_suffix(".json")),
        "control_rate_hz": rate, "duration_s": duration, "num_samples": n, "amp_ramp_s": 0.0,
        "amplitude_m": {"x": 0.1, "y": 0.1, "z": 0.15},
        "amplitude_rad": {"rx": 0.5, "ry": 0.25, "rz": 0.5},
        "freq_set_hz": {"x": [0.1, 0.7], "y": [0.1, 0.7], "z": [0.1, 0.7]},
        "phase_rad": {"x": [0.0, 0.0], "y": [1.0471975511965976, 0.0], "z": [2.0943951, 0.0]},
        "ori_freq_set_hz": {"rx": [0.1, 0.7]}, "ori_phase_rad": {"rx": [3.14159, 0.0]},
        "peak_rates": {"cart_speed_m_s": 0.2, "dx_m_s": [0.1, 0.1, 0.1], "drot_rad_s": [0.3] * 3,
                       "max_ori_offset_rad": 0.4},
        "q_init": Q_HOME.tolist(), "x_anchor": [0.45, 0.0, 0.4], "q_anchor_xyzw": [1.0, 0, 0, 0],
        "args": {"kp_pos": kp_pos, "kp_ori": kp_ori, "kd_pos": 2 * math.sqrt(kp_pos),
                 "kd_ori": 2 * math.sqrt(kp_ori), "duration": duration, "rate": rate,
                 "mode": "chirp", "err_delta_pos_override": None, "band": "low", "f0_hz": 0.1,
                 "f1_hz": 0.7, "amp_taper_exp": 0.0, "ramp_up_s": 2.0, "ramp_down_s": 3.0},
        "abort": abort or {"code": 0, "name": "none", "value": 0.0, "time_s": 0.0},
        "summary": {"ticks": n, "err_pos_rms_xyz": [0.001, 0.002, 0.003],
                    "err_pos_abs_max_xyz": [0.004, 0.005, 0.006], "err_pos_inf_max": 0.007,
                    "err_ori_rms_rad": 0.01, "err_ori_max_rad": 0.02},
        "ring_log": ring_log,
    }
    body.update(overrides)
    return body


def write_json(path: Path, body) -> Path:
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path


def write_log50(directory: Path, stem: str = "chirp_low", n: int = 100, seed: int = 0,
                **sidecar_kw) -> Path:
    """`<stem>.csv` (47 columns, `%.9f`) + `<stem>.json`. The first row's tau_J is NaN."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 50.0
    s = _state(n, t, rng)
    s["tau_j"][0] = np.nan
    period = 20.0 + rng.uniform(-0.5, 0.5, n)
    path = directory / f"{stem}.csv"
    _savetxt(path, LOG_COLUMNS, _rows47(t, period, s), "%.9f")
    write_json(path.with_suffix(".json"), sidecar(path, n=n, duration=n / 50.0, **sidecar_kw))
    return path


def ring_frames(seq_start: int, n: int, gaps: list[tuple[int, int]], every: int = 20):
    """seqs drained after `seq_start` (minus `gaps`), and 50 Hz target events
    `(idx, head)` written every `every` ticks."""
    seq = np.arange(seq_start + 1, seq_start + 1 + n, dtype=np.int64)
    for a, b in gaps:
        seq = seq[(seq < a) | (seq > b)]
    heads = np.arange(seq_start + 3, seq_start + n, every, dtype=np.int64)
    return seq, heads


def write_ring(directory: Path, stem: str = "ring_run", n: int = 400, seq_start: int = 1000,
               gaps: list[tuple[int, int]] = (), seed: int = 1, sidecar_gaps=None,
               ring_overrides: dict | None = None, extra_targets: int = 0) -> Path:
    """`<stem>.csv` (49 cols) + `<stem>_targets.csv` + `<stem>.json`, built by FrankaTwin's
    merge rule (active target = last with head + 1 <= seq; -1 = start snapshot)."""
    rng = np.random.default_rng(seed)
    gaps = list(gaps)
    seq, heads = ring_frames(seq_start, n, gaps)
    m = seq.size
    t = (seq - seq[0]) * 1e-3
    s = _state(m, t, rng)
    n_t = heads.size
    tgt_pos = np.array([0.45, 0.0, 0.4]) + 0.01 * rng.standard_normal((n_t, 3))
    tgt_quat = np.tile([1.0, 0.0, 0.0, 0.0], (n_t, 1))
    eff = heads + 1
    active = np.searchsorted(eff, seq, side="right") - 1
    snapshot = np.array([0.45, 0.0, 0.4])
    s["x_des"] = np.where(active[:, None] >= 0, tgt_pos[np.maximum(active, 0)], snapshot)
    s["quat_des"] = np.where(active[:, None] >= 0, tgt_quat[np.maximum(active, 0)],
                             [1.0, 0, 0, 0])
    s["dx_des"] = np.zeros((m, 3))
    period = np.concatenate([[0.0], np.diff(seq) * 1.0 + rng.uniform(-0.02, 0.02, m - 1)])
    data = np.column_stack([_rows47(t, period, s), seq, active])
    path = directory / f"{stem}.csv"
    _savetxt(path, RING_COLUMNS, data, ["%.9f"] * 47 + ["%d", "%d"])
    idx = np.arange(n_t + extra_targets)
    heads_all = np.concatenate([heads, np.full(extra_targets, heads[-1] + 10_000)])
    pos_all = np.vstack([tgt_pos, np.tile(tgt_pos[-1], (extra_targets, 1))])
    quat_all = np.vstack([tgt_quat, np.tile(tgt_quat[-1], (extra_targets, 1))])
    tdata = np.column_stack([idx, heads_all, heads_all + 1, pos_all, quat_all])
    _savetxt(path.with_name(f"{stem}_targets.csv"), TARGETS_COLUMNS, tdata,
             ["%d"] * 3 + ["%.9f"] * 7)
    rec_gaps = [list(g) for g in (gaps if sidecar_gaps is None else sidecar_gaps)]
    ring = {"path": str(path), "targets_path": str(path.with_name(f"{stem}_targets.csv")),
            "num_frames": int(m), "seq_start": seq_start, "seq_first": int(seq[0]),
            "seq_last": int(seq[-1]), "duration_s": (int(seq[-1]) - int(seq[0]) + 1) * 1e-3,
            "num_targets": int(n_t), "gaps": rec_gaps,
            "dropped_frames": sum(b - a + 1 for a, b in rec_gaps), "resets": 0,
            "poll_hz": 100.0, "log_id": 1}
    ring.update(ring_overrides or {})
    write_json(path.with_suffix(".json"), sidecar(path, n=n // 20, ring_log=ring))
    return path


def failed_ring_log(save_error: str = "log_fetch: daemon did not reply within 5.0s",
                    num_frames: int = 40_000) -> dict:
    """The `ring_log` summary when the 1 kHz fetch failed: paths stay null, `save_error` set."""
    return {"path": None, "targets_path": None, "num_frames": num_frames, "seq_start": 5000,
            "seq_first": 5001, "seq_last": 5000 + num_frames, "duration_s": num_frames * 1e-3,
            "num_targets": num_frames // 20, "gaps": [], "dropped_frames": 0, "resets": 0,
            "poll_hz": 100.0, "log_id": 3, "save_error": save_error}


def write_failed_fetch(directory: Path, stem: str = "chirp_low", ring_csv: str = "chirp_low_1khz.csv",
                       *, with_50hz_log: bool = True, n: int = 60, **ring_kw) -> Path:
    """`cart_impedance.py --log <stem>.csv --log-1khz <ring_csv>` whose 1 kHz fetch failed:
    the 50 Hz log and its sidecar (when `with_50hz_log`), and the sidecar always written
    as `<ring_csv>.json`, but no ring CSV and no targets file. Returns that sidecar's path."""
    ring = failed_ring_log(**ring_kw)
    ring_path = directory / ring_csv
    if with_50hz_log:
        log = write_log50(directory, stem, n=n, ring_log=ring)
        body = json.loads(log.with_suffix(".json").read_text())  # csv_path names the 50 Hz CSV
    else:
        body = sidecar(ring_path, n=n, duration=n / 50.0, ring_log=ring)
    body["sidecar_path"] = str(ring_path) + ".json"
    return write_json(directory / f"{ring_csv}.json", body)


def write_target_csv(directory: Path, stem: str = "chirp_target", n: int = 500) -> Path:
    """`gen_*_traj.py` output: 1 kHz reference (11 columns) + sidecar."""
    t = np.arange(n) * 1e-3
    s = _state(n, t, np.random.default_rng(2))
    path = directory / f"{stem}.csv"
    _savetxt(path, TARGET_CSV_COLUMNS, np.column_stack([t, s["x_des"], s["dx_des"],
                                                         s["quat_des"]]), "%.9f")
    write_json(path.with_suffix(".json"), sidecar(path, controller="v4_chirp_excitation_target",
                                                  rate=1000.0, n=n))
    return path


def write_sim_csv(directory: Path, stem: str = "chirp_low_sim", n: int = 100) -> Path:
    """`replay_python_csv_sim.py` output (44 columns) + sim sidecar (schema 1)."""
    t = np.arange(n) / 50.0
    s = _state(n, t, np.random.default_rng(3))
    w = np.zeros((n, 3))
    e = s["x_des"] - s["x"]
    data = np.column_stack([t, s["q"], s["dq"], s["x"], s["dx_des"], s["quat"], w, s["x_des"],
                            s["dx_des"], s["quat_des"], e, np.zeros((n, 3))])
    path = directory / f"{stem}.csv"
    _savetxt(path, SIM_COLUMNS, data, "%.9f")
    write_json(path.with_suffix(".json"), {
        "schema_version": 1, "controller": "uw_franka_replay_python_sim",
        "created_utc": "2026-05-31T11:00:00+00:00",
        "source": {"real_csv": "chirp_low.csv", "real_sidecar": "chirp_low.json"},
        "sim": {"engine": "isaaclab", "robot_asset": "franka_mimic.usd", "integrator_hz": 1000,
                "gravity_handling": "engine_auto", "control_mode": "task_impedance",
                "use_nullspace": False, "sysid_params_path": "sysid_best_params.json",
                "sysid_motor_delay_steps": 3, "zoh_replay": True},
        "args": {"kp_pos": 500.0, "kp_ori": 30.0, "zoh_mean_steps_per_csv_row": 20.0,
                 "zoh_total_phys_steps": n * 20},
        "summary": {"err_pos_rms_xyz": [0.001, 0.001, 0.002], "err_ori_rms_xyz": [0.0, 0.0, 0.0],
                    "err_ori_norm_max": 0.01},
        "ended_normally": True})
    return path


def metrics_body(real_csv: str, sim_csv: str, sysid_params: str | None = None) -> dict:
    """A metrics.json (schema 1) with the top-level keys in FrankaTwin's order."""
    pos = {"rmse_m": {"x": 0.003, "y": 0.002, "z": 0.004, "3d": 0.00527},
           "max_abs_m": {"x": 0.01, "y": 0.01, "z": 0.02, "3d": 0.025}}
    body = {"schema_version": 1, "created_utc": "2026-05-31T12:00:00+00:00",
            "real_csv": real_csv, "sim_csv": sim_csv, "real_sidecar": real_csv[:-4] + ".json",
            "sim_sidecar": sim_csv[:-4] + ".json"}
    if sysid_params is not None:
        body["sysid_params"] = sysid_params
    body.update({
        "num_samples": 100, "duration_s": 1.98,
        "ee": {"pos": pos, "ori": {"rmse_rad": 0.01787, "max_rad": 0.05}},
        "joints": {"pos_rmse_rad": [0.101, 0.018, 0.062, 0.020, 0.046, 0.017, 0.060],
                   "pos_max_abs_rad": [0.2] * 7, "pos_rmse_all_rad": 0.05434,
                   "pos_mse_all_rad2": 0.00295, "pos_rmse_pct_of_motion": [5.0] * 7,
                   "real_motion_range_rad": [1.0] * 7, "vel_rmse_rad_s": [0.03] * 7,
                   "vel_rmse_all_rad_s": 0.0366},
        "tracking": {"real": {"pos": pos, "ori": {"rmse_rad": 0.01, "max_rad": 0.02}},
                     "sim": {"pos": pos, "ori": {"rmse_rad": 0.01, "max_rad": 0.02}}},
        "out_dir": None, "metrics_path": None})
    return body


def best_params_body(n_iter: int = 3) -> dict:
    """A sysid_best_params.json with FrankaTwin 0.3.0's published fit (delay 3)."""
    arm = [0.425, 0.281, 0.185, 0.189, 0.182, 0.159, 0.106]
    mus = [1.13, 1.04, 1.58, 1.74, 1.17, 1.38, 1.02]
    mud = [0.59, 0.65, 1.00, 1.20, 0.75, 0.41, 0.44]
    ratio = [d / s for d, s in zip(mud, mus)]
    visc = [2.73, 3.27, 0.76, 2.23, 1.09, 0.05, 0.50]
    history = [{"iter": i + 1, "min": 0.01 / (i + 1), "mean": 0.02 / (i + 1),
                "best": 0.01 / (i + 1), "iter_s": 90.0, "ms_per_tick": 7.5, "eta_s": 90.0 * (n_iter - i - 1),
                "per_traj_min": [0.004 / (i + 1), 0.006 / (i + 1)],
                "best_candidate_weighted": [0.004 / (i + 1), 0.006 / (i + 1)]}
               for i in range(n_iter)]
    return {
        "best_score": history[-1]["best"], "best_params_raw": arm + mus + ratio + visc + [3.0],
        "best_params_decoded": {"armature": arm, "mu_static": mus, "dynamic_ratio": ratio,
                                "mu_dynamic": mud, "mu_viscous": visc, "motor_delay_steps": 3},
        "history": history,
        "bounds": [[0.0, 0.5]] * 7 + [[0.0, 5.0]] * 7 + [[0.0, 1.0]] * 7 + [[0.0, 5.0]] * 7
        + [[0.0, 4.0]],
        "args": {"num_envs": 128, "max_iter": n_iter, "sigma": 0.3, "seed": 7},
        "source": {"trajectories": [
            {"real_csv": "data/chirp_low.csv", "real_sidecar": "data/chirp_low.json",
             "num_samples": 100, "weight": 1.0,
             "gains": {"kp_pos": 500.0, "kp_ori": 30.0, "kd_pos": 44.72, "kd_ori": 10.95}},
            {"real_csv": "data/ring_run.csv", "real_sidecar": "data/ring_run.json",
             "num_samples": 400, "weight": 1.5,
             "gains": {"kp_pos": 500.0, "kp_ori": 30.0, "kd_pos": 44.72, "kd_ori": 10.95}}],
            "num_trajectories": 2, "time_base": "zoh_1khz_ticks_per_csv_row", "warmup_steps": 50}}


# ---------------------------------------------------------------- fr3_stack joint excitation

def write_excitation(directory: Path, *, execute: bool = True, rate: float = 60.0,
                     seconds: float = 2.0, nuc_log: str | None = None) -> Path:
    """A `joint_sysid.py` output directory (fr3_joint_excitation/v1)."""
    directory.mkdir(parents=True)
    q0 = np.array([0.0, -0.6, 0.0, -1.8, 0.0, 1.8, 0.7])
    total = seconds
    t = np.linspace(0, total, math.ceil(total * rate) + 1)
    w = 2 * math.pi * 0.1
    off = np.zeros((t.size, 7))
    off[:, 0] = 0.01 * np.sin(w * t)
    cols = (["t_s"] + [f"q_ref{j}" for j in range(1, 8)] + [f"dq_ref{j}" for j in range(1, 8)]
            + [f"ddq_ref{j}" for j in range(1, 8)] + [f"jerk_ref{j}" for j in range(1, 8)])
    ref = np.column_stack([t, q0 + off, np.gradient(off, t, axis=0), np.zeros((t.size, 14))])
    _savetxt(directory / "reference.csv", tuple(cols), ref, "%.17g")
    meta = {"schema": "fr3_joint_excitation/v1", "status": "completed" if execute else "preview",
            "created_at_utc": "2026-09-23T08:00:00+00:00", "script_sha256": "ab" * 32,
            "robot_id": "left", "host": "nuc.local", "cmd_port": 5555, "state_port": 5556,
            "plan": {"mode": "sine", "joints": [1], "amplitude_deg": 1.0, "seconds": seconds,
                     "ramp": 0.5, "hold": 0.0, "gap": 0.0, "f0": 0.1, "f1": 0.5,
                     "tones": [0.1, 0.23, 0.41], "seed": 0, "rate": rate, "max_velocity": 0.1,
                     "max_acceleration": 0.3, "max_jerk": 2.0},
            "experiment": {"payload_kg": None}, "nuc_log_reference": nuc_log,
            "nuc_log_verified": False, "sysid_ready": False,
            "data_semantics": "client send attempts plus the latest PUB state; Not a 1 kHz "
                              "sysid recording",
            "guard_settings": {"stale_after": 0.2, "tracking_error": 0.05, "max_lateness": 0.05},
            "commands_sent": 0, "motion_command_attempted": False,
            "anchor_q_rad": q0.tolist(), "reference_peaks": {
                "offset_rad": [0.01] + [0.0] * 6, "velocity_rad_s": [0.0063] + [0.0] * 6,
                "acceleration_rad_s2": [0.004] + [0.0] * 6, "jerk_rad_s3": [0.0025] + [0.0] * 6}}
    if execute:
        n = t.size
        meta.update({"commanded_controller_settings": {
            "K_joint": [600.0, 600, 600, 600, 250, 150, 50], "D_joint": [50.0, 50, 50, 50, 30, 25, 15],
            "filter_alpha": 0.05, "use_friction": False},
            "controller_settings_acknowledged": False, "end_behavior": "hold",
            "termination": "attempted", "finished_at_utc": "2026-09-23T08:00:05+00:00",
            "commands_sent": n, "motion_command_attempted": True})
        mono = 1000.0 + t
        ccols = (["seq", "trajectory_t_s", "send_start_monotonic_s", "send_return_monotonic_s",
                  "state_daemon_timestamp", "state_received_monotonic_s", "lateness_s"]
                 + [f"q_target{j}" for j in range(1, 8)] + [f"q_measured{j}" for j in range(1, 8)]
                 + [f"dq_measured{j}" for j in range(1, 8)])
        data = np.column_stack([np.arange(n), t, mono, mono + 2e-4, 50.0 + t, mono - 3e-3,
                                np.full(n, 1e-4), q0 + off, q0 + 0.9 * off,
                                np.gradient(0.9 * off, t, axis=0)])
        _savetxt(directory / "commands_and_state.csv", tuple(ccols), data,
                 ["%d"] + ["%.17g"] * (len(ccols) - 1))
    (directory / "metadata.json").write_text(json.dumps(meta, indent=2, allow_nan=False))
    (directory / "preview.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>\n")
    return directory


# ------------------------------------------------------------- TestRandomization episode

def _gz_csv(cols: list[str], rows: list[list]) -> bytes:
    text = io.StringIO()
    text.write(",".join(cols) + "\n")
    for row in rows:
        text.write(",".join("" if v is None else repr(v) if isinstance(v, float) else str(v)
                            for v in row) + "\n")
    return gzip.compress(text.getvalue().encode(), mtime=0)


TICK_COLUMNS = ["tick", "step", "t", "t_ctrl", "status", "obs_pub_step", "obs_age_steps",
                "x", "y", "z", "yaw", "yaw_unwrapped", "speed", "vx", "vy", "yaw_rate",
                "obs_x", "obs_y", "obs_theta", "obs_v", "e0", "e1", "e2", "e3",
                "et0", "et1", "et2", "et3", "idx_lookahead", "idx_track", "arc_s_track",
                "raw_throttle", "raw_steering", "rl_steering", "rate_limited", "published",
                "pub_steering", "pub_throttle", "pub_braking", "apply_step",
                "applied_steering", "applied_throttle", "applied_braking",
                "drv_steering", "drv_throttle", "drv_braking", "compute_wall_s"]
STATE100_COLUMNS = ["step", "t", "x", "y", "z", "yaw", "yaw_unwrapped", "speed", "vx", "vy",
                    "yaw_rate", "in_steering", "in_throttle", "in_braking", "e_long", "e_lat",
                    "e_head", "e_speed", "nearest_idx", "arc_s", "progress_idx", "dist_min"]


def canonical_json_sha256(obj) -> str:
    """SHA-256 of canonical JSON (sorted keys, no spaces): our reading of `config_hash`."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_episode(directory: Path, episode_id: str = "ep-0001", n_ticks: int = 30,
                  vehicle_name: str | None = None) -> Path:
    """An episode directory: episode_config.json, ticks.csv.gz, state100.csv.gz,
    summary.json (file hashes over the gz bytes), server_stderr.txt."""
    ep = directory / episode_id
    ep.mkdir(parents=True)
    config = {"episode_id": episode_id, "controller": "released_mpc", "seed": 11,
              "horizon_s": 3.0, "tube_lat_m": 0.3, "tube_head_rad": 0.2}
    if vehicle_name:
        config["vehicle"] = {"name": vehicle_name}
    (ep / "episode_config.json").write_text(json.dumps(config, indent=2))
    ticks = []
    for k in range(n_ticks):
        t = 0.1 * k
        row = [k, 10 * k, t, t, "ok" if k else "no_state", 10 * k, 0]
        row += [0.5 * t, 0.01 * k, 0.5, 0.001 * k, 0.001 * k, 0.5, 0.5, 0.0, 0.0]
        row += [0.5 * t, 0.01 * k, 0.001 * k, 0.5] + [0.01 * k] * 8
        row += [k, k, 0.05 * k, 0.3, 0.01, 0.01, 0, 1, 0.01, 0.3, 0.0, 10 * k + 1,
                0.01, 0.3, 0.0, 0.01, 0.3, 0.0, 0.0001]
        ticks.append(row)
    state = [[s, 0.01 * s, 0.005 * s, 0.0, 0.5, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.01, 0.3, 0.0,
              0.0, 0.01, 0.0, 0.0, s // 10, 0.005 * s, s // 10, 0.01]
             for s in range(0, n_ticks * 10, 10)]
    (ep / "ticks.csv.gz").write_bytes(_gz_csv(TICK_COLUMNS, ticks))
    (ep / "state100.csv.gz").write_bytes(_gz_csv(STATE100_COLUMNS, state))
    (ep / "server_stderr.txt").write_text("physics server ready\n")
    files = {name: hashlib.sha256((ep / name).read_bytes()).hexdigest()
             for name in ("ticks.csv.gz", "state100.csv.gz")}
    summary = {"status": "ok", "outcome": "completed", "episode_id": episode_id,
               "tube_entry_time_100hz_s": 0.8, "run_mae_lateral_m": 0.042,
               "run_mae_heading_rad": 0.013, "run_mae_samples": n_ticks,
               "completion_step": 10 * n_ticks, "max_abs_lat_100hz_m": 0.11,
               "wall": {"init_s": 1.0, "stepping_s": 2.0, "controller_s": 0.5, "other_s": 0.1,
                        "total_s": 3.6},
               "files": files, "config_hash": canonical_json_sha256(config),
               "reference_sha256": "cd" * 32}
    (ep / "summary.json").write_text(json.dumps(summary, indent=2))
    return ep


# ------------------------------------------------------------- fr3_stack CSV v2 (for bundles)

_J0 = range(7)
CSV_V2_COLUMNS = (
    ["seq", "t_s"] + [f"q{i}" for i in _J0] + [f"dq{i}" for i in _J0]
    + [f"tau_J{i}" for i in _J0] + [f"tau_cmd{i}" for i in _J0]
    + ["ee_px", "ee_py", "ee_pz", "ee_qx", "ee_qy", "ee_qz", "ee_qw"]
    + ["tgt_px", "tgt_py", "tgt_pz", "tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw", "controller"]
    + ["schema_version", "joint_target_valid"] + [f"q_target{i}" for i in _J0]
    + [f"q_target_filtered{i}" for i in _J0] + [f"K_joint{i}" for i in _J0]
    + [f"D_joint{i}" for i in _J0]
    + ["filter_alpha", "joint_use_friction", "joint_reset_count", "robot_time_s",
       "control_period_s"])
"""The 80 CSV v2 columns (fr3_stack `src/ring_log_writer.cpp`), suffixes 0..6 = J1..J7."""


def write_csv_v2(directory: Path, stem: str = "ji_run", n: int = 600, *, gap_after: int | None = None,
                 gap_len: int = 5, idle_ticks: int = 0, status: bool = True, seed: int = 4) -> Path:
    """A joint-impedance CSV v2 recording (`%.12g` doubles, integer columns as integers),
    optionally with `idle_ticks` of controller 0 first and a seq gap after row `gap_after`;
    plus a `<stem>.status.json` recording status when `status`."""
    rng = np.random.default_rng(seed)
    seq = np.arange(n + (gap_len if gap_after is not None else 0), dtype=np.int64)
    if gap_after is not None:
        seq = np.delete(seq, np.arange(gap_after + 1, gap_after + 1 + gap_len))
    t = seq * 1e-3 + rng.uniform(0, 2e-5, n)
    t -= t[0]
    w = 2 * math.pi * 0.5
    q_t = Q_HOME + 0.02 * np.sin(w * t[:, None] + np.arange(7))
    q_f = Q_HOME + 0.019 * np.sin(w * t[:, None] + np.arange(7) - 0.05)
    q = q_f - 0.001
    dq = 0.019 * w * np.cos(w * t[:, None] + np.arange(7))
    ctrl = np.full(n, 2)
    ctrl[:idle_ticks] = 0
    valid = (ctrl == 2).astype(int)
    K = np.tile([600.0, 600, 600, 600, 250, 150, 50], (n, 1)) * valid[:, None]
    D = np.tile([50.0, 50, 50, 50, 30, 25, 15], (n, 1)) * valid[:, None]
    cols = [seq, t, q, dq, rng.normal(0, 3, (n, 7)), rng.normal(0, 1, (n, 7)),
            np.tile([0.45, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0], (n, 1)), np.zeros((n, 7)), ctrl,
            np.full(n, 2), valid, q_t * valid[:, None], q_f * valid[:, None], K, D,
            0.05 * valid, np.zeros(n), np.where(valid == 1, 3, 2), 100.0 + seq * 1e-3,
            np.where(np.arange(n) == 0, 0.0, 1e-3)]
    data = np.column_stack(cols)
    ints = {"seq", "controller", "schema_version", "joint_target_valid", "joint_use_friction",
            "joint_reset_count"}
    fmt = ["%d" if c in ints else "%.12g" for c in CSV_V2_COLUMNS]
    path = directory / f"{stem}.csv"
    np.savetxt(path, data, delimiter=",", header=",".join(CSV_V2_COLUMNS), comments="", fmt=fmt)
    if status:
        write_json(directory / f"{stem}.status.json", {
            "recording_id": stem, "path": str(path), "active": False, "ok": True,
            "finished": True, "complete": True, "written": n, "discarded": 0, "dropped": 0,
            "error": "", "error_code": 0})
    return path
