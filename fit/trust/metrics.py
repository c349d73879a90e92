"""FrankaTwin-compatible sim-against-real metrics (FrankaTwin's `metrics.json`; docs/formats.md).

Everything works on arrays: times ``(N,)``, positions ``(N,3)`` [m], quaternions ``(N,4)``
xyzw, joint positions ``(N,7)`` [rad] and velocities ``(N,7)`` [rad/s]. A signal a side did
not record is ``None`` and the block that needs it is ``null``, as FrankaTwin does for joints.

Time alignment (FrankaTwin's rule): if both sides have the same length and their times agree
within 1e-4 s the sim arrays are used as they are; otherwise every sim column is linearly
interpolated onto the real times (clamped at the ends). The sim quaternion is interpolated per
component, renormalised (norm clipped at 1e-12) and sign-aligned to the real target quaternion
(to the real quaternion when there is no target); the real quaternion is sign-aligned, not
renormalised. Angles are ``θ = 2·arccos(clip(|q1·q2|, 0, 1))``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError, FitError

SCHEMA_VERSION = 1
TIME_ATOL_S = 1e-4


@dataclass(frozen=True)
class Trajectory:
    """One side of a comparison; any signal may be None (not recorded)."""

    t_s: np.ndarray
    ee_pos_m: np.ndarray | None = None
    ee_quat_xyzw: np.ndarray | None = None
    q_rad: np.ndarray | None = None
    dq_rad_s: np.ndarray | None = None


def align_to_real_time(t_real: np.ndarray, t_sim: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sim ``values`` (N_sim,) or (N_sim,C) on the real time grid (see the module docstring)."""
    t_real = np.asarray(t_real, dtype=np.float64)
    t_sim = np.asarray(t_sim, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if len(t_real) == len(t_sim) and np.allclose(t_real, t_sim, rtol=0.0, atol=TIME_ATOL_S):
        return values
    if values.ndim == 1:
        return np.interp(t_real, t_sim, values)
    return np.column_stack([np.interp(t_real, t_sim, values[:, c]) for c in range(values.shape[1])])


def quat_angle_rad(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Angle [rad] between unit quaternions (N,4) row by row; sign-invariant."""
    dot = np.abs(np.sum(np.asarray(q1) * np.asarray(q2), axis=1))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


def sign_align(quat: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Flip rows of ``quat`` whose dot product with ``reference`` is negative."""
    flip = np.sum(quat * reference, axis=1) < 0
    out = np.array(quat, dtype=np.float64, copy=True)
    out[flip] *= -1.0
    return out


def pos_block(err_m: np.ndarray) -> dict[str, dict[str, float]]:
    """FrankaTwin's position block of an error (N,3): per-axis and 3-D RMS and max |err|."""
    err = np.asarray(err_m, dtype=np.float64)
    rms = np.sqrt(np.mean(err**2, axis=0))
    mx = np.max(np.abs(err), axis=0)
    norm = np.linalg.norm(err, axis=1)
    return {
        "rmse_m": {"x": rms[0], "y": rms[1], "z": rms[2], "3d": math.sqrt(float(np.mean(norm**2)))},
        "max_abs_m": {"x": mx[0], "y": mx[1], "z": mx[2], "3d": float(np.max(norm))},
    }


def ori_block(theta_rad: np.ndarray) -> dict[str, float]:
    """RMS and max of an angle series [rad]."""
    return {"rmse_rad": math.sqrt(float(np.mean(theta_rad**2))), "max_rad": float(np.max(theta_rad))}


def joints_block(q_real: np.ndarray, q_sim: np.ndarray, dq_real: np.ndarray | None,
                 dq_sim: np.ndarray | None) -> dict[str, Any]:
    """Per-joint position (and velocity) errors, ``err = sim − real``, keys in FrankaTwin's order."""
    err = np.asarray(q_sim, dtype=np.float64) - np.asarray(q_real, dtype=np.float64)
    rmse = np.sqrt(np.mean(err**2, axis=0))
    motion = np.max(q_real, axis=0) - np.min(q_real, axis=0)
    block: dict[str, Any] = {
        "pos_rmse_rad": rmse.tolist(),
        "pos_max_abs_rad": np.max(np.abs(err), axis=0).tolist(),
        "pos_rmse_all_rad": math.sqrt(float(np.mean(err**2))),
        "pos_mse_all_rad2": float(np.mean(err**2)),
        "pos_rmse_pct_of_motion": (100.0 * rmse / np.clip(motion, 1e-12, None)).tolist(),
        "real_motion_range_rad": motion.tolist(),
    }
    if dq_real is not None and dq_sim is not None:
        derr = np.asarray(dq_sim, dtype=np.float64) - np.asarray(dq_real, dtype=np.float64)
        block["vel_rmse_rad_s"] = np.sqrt(np.mean(derr**2, axis=0)).tolist()
        block["vel_rmse_all_rad_s"] = math.sqrt(float(np.mean(derr**2)))
    return block


def compute_metrics(real: Trajectory, sim: Trajectory, des_pos_m: np.ndarray | None = None,
                    des_quat_xyzw: np.ndarray | None = None) -> dict[str, Any]:
    """``num_samples, duration_s, ee, joints, tracking`` of sim against real (FrankaTwin's metrics.json).

    ``des_*`` is the real run's Cartesian target (None for joint-space runs: then
    ``tracking`` is null). ``ee`` needs EE poses on both sides, ``joints`` needs q on both.
    """
    t = np.asarray(real.t_s, dtype=np.float64)
    if len(t) == 0:
        raise DataError("real trajectory has no samples: expected at least one row")

    def on_real(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else align_to_real_time(t, sim.t_s, values)

    x_sim, q_sim, dq_sim = on_real(sim.ee_pos_m), on_real(sim.q_rad), on_real(sim.dq_rad_s)
    quat_real = quat_sim = None
    if real.ee_quat_xyzw is not None and sim.ee_quat_xyzw is not None:
        ref = np.asarray(des_quat_xyzw if des_quat_xyzw is not None else real.ee_quat_xyzw, dtype=np.float64)
        qs = on_real(sim.ee_quat_xyzw)
        qs = qs / np.clip(np.linalg.norm(qs, axis=1, keepdims=True), 1e-12, None)
        quat_sim = sign_align(qs, ref)
        quat_real = sign_align(np.asarray(real.ee_quat_xyzw, dtype=np.float64), ref)
    ee = None
    if real.ee_pos_m is not None and x_sim is not None:
        ee = {"pos": pos_block(x_sim - real.ee_pos_m),
              "ori": ori_block(quat_angle_rad(quat_sim, quat_real)) if quat_sim is not None else None}
    joints = None
    if real.q_rad is not None and q_sim is not None:
        joints = joints_block(real.q_rad, q_sim, real.dq_rad_s, dq_sim)
    tracking = None
    if des_pos_m is not None and real.ee_pos_m is not None and x_sim is not None:
        des = np.asarray(des_pos_m, dtype=np.float64)
        tracking = {"real": {"pos": pos_block(des - real.ee_pos_m), "ori": None},
                    "sim": {"pos": pos_block(des - x_sim), "ori": None}}
        if des_quat_xyzw is not None and quat_sim is not None:
            tracking["real"]["ori"] = ori_block(quat_angle_rad(quat_real, des_quat_xyzw))
            tracking["sim"]["ori"] = ori_block(quat_angle_rad(quat_sim, des_quat_xyzw))
    return _clean({"num_samples": int(len(t)), "duration_s": float(t[-1] - t[0]),
                   "ee": ee, "joints": joints, "tracking": tracking})


def metrics_document(metrics: dict[str, Any], *, created_utc: str, real_csv: str | None = None,
                     sim_csv: str | None = None, real_sidecar: str | None = None, sim_sidecar: str | None = None,
                     extra: dict[str, Any] | None = None, out_dir: str | None = None,
                     metrics_path: str | None = None) -> dict[str, Any]:
    """The full metrics.json object, top-level keys in FrankaTwin's exact order."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "created_utc": created_utc, "real_csv": real_csv,
                           "sim_csv": sim_csv, "real_sidecar": real_sidecar, "sim_sidecar": sim_sidecar}
    for key, value in (extra or {}).items():
        if key in doc or key in ("num_samples", "duration_s", "ee", "joints", "tracking", "out_dir", "metrics_path"):
            raise FitError(f"metrics extra key {key!r} collides with a metrics.json key")
        doc[key] = _clean(value)
    for key in ("num_samples", "duration_s", "ee", "joints", "tracking"):
        doc[key] = metrics[key]
    doc["out_dir"] = out_dir
    doc["metrics_path"] = metrics_path
    return doc


def dumps(doc: dict[str, Any]) -> str:
    """metrics.json text: indented, key order kept, strict JSON (no NaN)."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _clean(value: Any) -> Any:
    """Plain Python floats; non-finite numbers become null (strict JSON)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
