"""FrankaTwin's sim-CSV layout and sidecar (FrankaTwin's `replay_python_csv_sim.py` output; docs/formats.md) for one replay.

Columns: t_s, q1..q7, dq1..dq7, x_x,x_y,x_z, dx_x,dx_y,dx_z, quat_x..quat_w (xyzw), wx,wy,wz,
x_des_x.., dx_des_x.., quat_des_x.., e_x,e_y,e_z, e_ox,e_oy,e_oz. `x` is our flange site;
`e = x_des − x`, `e_o = 2·vec(q_des ⊗ q̄)` with the shortest-path sign. A joint-impedance run
has no Cartesian target: its x_des/dx_des/quat_des/e columns are NaN (never a made-up zero).
Values are written by Arrow's CSV writer (shortest round-trip decimals, `nan` for NaN).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..arm_model.controllers import orientation_error
from ..arm_model.params import DynamicsParams, to_frankatwin_decoded
from .reference import ReplayResult
from .replay_input import CARTESIAN_IMPEDANCE, ReplayInput

SIM_CSV_COLUMNS: tuple[str, ...] = (
    ("t_s",)
    + tuple(f"q{j}" for j in range(1, 8))
    + tuple(f"dq{j}" for j in range(1, 8))
    + ("x_x", "x_y", "x_z", "dx_x", "dx_y", "dx_z", "quat_x", "quat_y", "quat_z", "quat_w", "wx", "wy", "wz")
    + ("x_des_x", "x_des_y", "x_des_z", "dx_des_x", "dx_des_y", "dx_des_z")
    + ("quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w")
    + ("e_x", "e_y", "e_z", "e_ox", "e_oy", "e_oz")
)


def _desired(inp: ReplayInput, n: int) -> tuple[np.ndarray, np.ndarray]:
    if inp.controller != CARTESIAN_IMPEDANCE:
        return np.full((n, 3), np.nan), np.full((n, 4), np.nan)
    return inp.target_pos[inp.sample_ticks], inp.target_quat_xyzw[inp.sample_ticks]


def sim_csv_table(inp: ReplayInput, result: ReplayResult) -> pa.Table:
    """The sim CSV as an Arrow table (one row per sample, SIM_CSV_COLUMNS)."""
    n = result.q.shape[0]
    t_s = inp.t_s if inp.t_s is not None else inp.sample_ticks * 1e-3
    x_des, quat_des = _desired(inp, n)
    dx_des = np.where(np.isnan(x_des), np.nan, 0.0)
    e_o = np.where(np.isnan(quat_des[:, :3]), np.nan, orientation_error(quat_des, result.ee_quat_xyzw))
    block = np.column_stack([
        t_s, result.q, result.dq, result.ee_pos, result.ee_linvel, result.ee_quat_xyzw, result.ee_angvel,
        x_des, dx_des, quat_des, x_des - result.ee_pos, e_o,
    ])
    return pa.Table.from_arrays([pa.array(block[:, i]) for i in range(block.shape[1])], names=list(SIM_CSV_COLUMNS))


def write_sim_csv(path: Path, inp: ReplayInput, result: ReplayResult) -> Path:
    """Write the sim CSV (header line, comma separated) and return its path."""
    pacsv.write_csv(sim_csv_table(inp, result), str(path), pacsv.WriteOptions(quoting_style="none", quoting_header="none"))
    return path


def _rms(values: np.ndarray) -> list[float] | None:
    finite = values[np.all(np.isfinite(values), axis=1)]
    return None if finite.size == 0 else np.sqrt(np.mean(finite ** 2, axis=0)).tolist()


def sim_sidecar(inp: ReplayInput, result: ReplayResult, *, source: dict[str, Any], model_path: str,
                params_path: str | None, params: DynamicsParams) -> dict[str, Any]:
    """FrankaTwin-style sim sidecar (schema_version 1) with twinlake's own comparison block."""
    table = sim_csv_table(inp, result)
    err = np.column_stack([table.column(c).to_numpy() for c in ("e_x", "e_y", "e_z")])
    err_o = np.column_stack([table.column(c).to_numpy() for c in ("e_ox", "e_oy", "e_oz")])
    norm_o = np.linalg.norm(err_o, axis=1)
    steps = np.diff(np.append(inp.sample_ticks, inp.n_ticks))
    q_err = result.q - inp.q_ref if inp.q_ref is not None else None
    return {
        "schema_version": 1,
        "controller": "twinlake_sim_replay",
        "source": source,
        "sim": {
            "engine": "mujoco", "engine_version": _mujoco_version(), "robot_asset": model_path,
            "integrator_hz": 1000, "gravity_handling": "zero_gravity_compensated",
            "control_mode": inp.controller, "use_nullspace": False, "sysid_params_path": params_path,
            "sysid_motor_delay_steps": int(params.motor_delay_ms), "zoh_replay": True,
            "twinlake_joint_delay_ms": params.joint_delay_ms.tolist(),  # per joint (FrankaTwin has one delay)
            "sysid_params_decoded": to_frankatwin_decoded(params),
            "use_ema": bool(inp.use_ema) if inp.controller != CARTESIAN_IMPEDANCE else None,
            "warmup_steps": int(inp.warmup_ticks),
        },
        "args": {
            "zoh_mean_steps_per_csv_row": float(np.mean(steps)) if steps.size else 0.0,
            "zoh_total_phys_steps": int(inp.n_ticks),
            "num_samples": int(result.q.shape[0]),
        },
        "summary": {
            "err_pos_rms_xyz": _rms(err),
            "err_ori_rms_xyz": _rms(err_o),
            "err_ori_norm_max": float(np.nanmax(norm_o)) if np.isfinite(norm_o).any() else None,
            "q_rmse_vs_recording_rad": None if q_err is None else np.sqrt(np.mean(q_err ** 2, axis=0)).tolist(),
        },
        "ended_normally": True,
    }


def _mujoco_version() -> str:
    import mujoco

    return str(mujoco.__version__)


def write_sidecar(path: Path, sidecar: dict[str, Any]) -> Path:
    path.write_text(json.dumps(sidecar, indent=2) + "\n")
    return path


__all__ = ["SIM_CSV_COLUMNS", "sim_csv_table", "sim_sidecar", "write_sidecar", "write_sim_csv"]
