"""Synthetic fr3_stack recording CSVs (v2 and v1), written exactly as fr3_stack's `src/ring_log_writer.cpp`
says (header line, `%.12g` doubles, `%u` integers, `\\n` line ends). For tests, the bench
and docs; not a physics simulation (the daemon folder makes real ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .fr3_stack.recording_csv import V1_COLUMNS, V2_COLUMNS

HOME_Q = np.array([0.0, -0.6, 0.0, -1.8, 0.0, 1.8, 0.7])
K_DEFAULT = np.array([600, 600, 600, 600, 250, 150, 50], float)
D_DEFAULT = np.array([50, 50, 50, 50, 30, 25, 15], float)


@dataclass(frozen=True)
class SampleSpec:
    """What to synthesise: `rows` ticks at 1 kHz; `gap_at`: row indices after which seq jumps
    by 3 (two ticks dropped); `idle_rows`: leading rows under the idle controller (then a
    switch into joint impedance, incrementing `joint_reset_count`); `nan_tau_rows`: rows whose
    `tau_J0` is NaN."""

    rows: int = 1000
    seed: int = 0
    version: int = 2
    gap_at: tuple[int, ...] = ()
    idle_rows: int = 0
    nan_tau_rows: tuple[int, ...] = ()


def sample_matrix(spec: SampleSpec) -> np.ndarray:
    """(rows, 80) float64 matrix of CSV v2 values in V2_COLUMNS order."""
    rng = np.random.default_rng(spec.seed)
    n = spec.rows
    step = np.ones(n, np.int64)
    for g in spec.gap_at:
        if 0 <= g < n - 1:
            step[g + 1] = 3
    seq = np.concatenate([[0], np.cumsum(step[1:])])
    t = seq * 0.001 + rng.normal(0, 2e-6, n).clip(-5e-6, 5e-6) * (seq > 0)
    w = 2 * np.pi * rng.uniform(0.1, 0.5, 7)
    q = HOME_Q + 0.05 * np.sin(np.outer(t, w))
    dq = 0.05 * w * np.cos(np.outer(t, w))
    tau_j = rng.normal(0, 2, (n, 7))
    tau_cmd = rng.normal(0, 1.5, (n, 7))
    ee = np.tile([0.307, 0.0, 0.59, 1.0, 0.0, 0.0, 0.0], (n, 1)) + rng.normal(0, 1e-3, (n, 7))
    tgt = np.zeros((n, 7))
    controller = np.full(n, 2.0)
    controller[: spec.idle_rows] = 0
    jtv = (controller == 2).astype(float)
    q_target = (q + 0.01) * jtv[:, None]
    q_filt = (q + 0.005) * jtv[:, None]
    k = np.outer(jtv, K_DEFAULT)
    d = np.outer(jtv, D_DEFAULT)
    alpha = 0.05 * jtv
    friction = np.zeros(n)
    resets = np.where(jtv > 0, 1.0, 0.0)
    robot_t = 1000.0 + seq * 0.001
    period = np.full(n, 0.001)
    period[0] = 0.0
    for r in spec.nan_tau_rows:
        tau_j[r, 0] = np.nan
    cols = [seq[:, None], t[:, None], q, dq, tau_j, tau_cmd, ee, tgt, controller[:, None],
            np.full((n, 1), 2.0), jtv[:, None], q_target, q_filt, k, d, alpha[:, None],
            friction[:, None], resets[:, None], robot_t[:, None], period[:, None]]
    return np.hstack([c.astype(float) for c in cols])


_INT_COLS = {"seq", "controller", "schema_version", "joint_target_valid", "joint_use_friction",
             "joint_reset_count"}


def row_format(columns: tuple[str, ...]) -> str:
    """printf-style format of one row: `%d` for integer columns, `%.12g` for doubles."""
    return ",".join("%d" if c in _INT_COLS else "%.12g" for c in columns) + "\n"


def write_sample(path: str | Path, spec: SampleSpec = SampleSpec(), *,
                 status: dict | None = None, meta: dict | None = None) -> Path:
    """Write a CSV (v2 or v1 per `spec.version`) and optional companion JSON files
    `<stem>.status.json` and `<stem>.meta.json`. Returns the CSV path."""
    path = Path(path)
    matrix = sample_matrix(spec)
    columns = V2_COLUMNS if spec.version == 2 else V1_COLUMNS
    matrix = matrix[:, : len(columns)]
    fmt = row_format(columns)
    with open(path, "w", encoding="ascii", newline="\n") as fh:
        fh.write(",".join(columns) + "\n")
        for start in range(0, len(matrix), 20000):
            block = matrix[start:start + 20000].tolist()
            fh.write("".join(fmt % tuple(row) for row in block))
    stem = path.with_suffix("")
    if status is not None:
        Path(f"{stem}.status.json").write_text(json.dumps(status) + "\n")
    if meta is not None:
        Path(f"{stem}.meta.json").write_text(json.dumps(meta) + "\n")
    return path



def complete_status(path: Path, rows: int, recording_id: str = "") -> dict:
    """The 11-key status of a healthy stop of a recording of `rows` rows."""
    return {"recording_id": recording_id or path.stem, "path": str(path), "active": False,
            "ok": True, "finished": True, "complete": True, "written": rows, "discarded": 0,
            "dropped": 0, "error": "", "error_code": 0}
