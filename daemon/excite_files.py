"""Files of an excitation run: `reference.csv`, `preview.svg`, `metadata.json`, as
fr3_stack's `joint_sysid.py` writes them (docs/daemon.md).

Every file is created exclusively (an existing file is never overwritten); `metadata.json` is
rewritten atomically (through a hidden temporary file beside it) as a run progresses. The SVG is drawn by hand
(four panels: offset, velocity, acceleration, jerk; one polyline per moving joint), so the
same plan gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..catalog import atomic_write_text

from .excitation import Plan, offsets, sample_times

REFERENCE_COLUMNS = (
    ["t_s"] + [f"q_ref{j}" for j in range(1, 8)] + [f"dq_ref{j}" for j in range(1, 8)]
    + [f"ddq_ref{j}" for j in range(1, 8)] + [f"jerk_ref{j}" for j in range(1, 8)]
)
_REF_FORMAT = ",".join(["%.12g"] * len(REFERENCE_COLUMNS)) + "\n"
SCHEMA = "fr3_joint_excitation/v1"
DATA_SEMANTICS = (
    "commands_and_state.csv holds client send attempts plus the latest PUB state sampled before each "
    "send; no daemon acknowledgement, no per-tick torque, no effective filtered target. Not a 1 kHz "
    "sysid recording: the 1 kHz log, when requested with --record, is the daemon's CSV v2 file."
)
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def reference_table(plan: Plan, q0) -> np.ndarray:
    """(n, 29) rows at the plan rate: t_s | q_ref1..7 | dq_ref | ddq_ref | jerk_ref."""
    t = sample_times(plan)
    ref = offsets(plan, t)
    ref[0] += np.asarray(q0, dtype=np.float64)
    return np.column_stack([t, ref[0], ref[1], ref[2], ref[3]])


def write_reference_csv(path: Path, table: np.ndarray) -> None:
    """Write `reference.csv` (exclusive create), doubles as `%.12g`."""
    with open(path, "x", encoding="ascii", newline="\n") as fh:
        fh.write(",".join(REFERENCE_COLUMNS) + "\n")
        fh.write((_REF_FORMAT * table.shape[0]) % tuple(table.ravel().tolist()))


def read_reference_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a reference.csv: (t_s (n,), q_ref (n, 7)); raises ValueError naming the problem."""
    path = Path(path)
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
        missing = [c for c in ["t_s"] + [f"q_ref{j}" for j in range(1, 8)] if c not in header]
        if missing:
            raise ValueError(f"{path}: line 1: missing column(s) {', '.join(missing)}")
        try:
            data = np.loadtxt(fh, delimiter=",", ndmin=2)
        except ValueError as exc:
            raise ValueError(f"{path}: not numeric CSV: {exc}") from None
    if data.shape[0] < 2 or data.shape[1] != len(header):
        raise ValueError(f"{path}: expected >= 2 rows of {len(header)} values, got shape {data.shape}")
    t = data[:, header.index("t_s")]
    q = data[:, [header.index(f"q_ref{j}") for j in range(1, 8)]]
    bad = np.flatnonzero(~np.isfinite(q).all(axis=1) | ~np.isfinite(t))
    if bad.size:
        raise ValueError(f"{path}: line {bad[0] + 2}: non-finite value")
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"{path}: line {int(np.flatnonzero(np.diff(t) <= 0)[0]) + 3}: t_s must increase")
    return t, q


def write_preview_svg(path: Path, plan: Plan, width: int = 900, panel_h: int = 170) -> None:
    """Four stacked panels of the continuous reference (offset and derivatives) vs time."""
    t = np.linspace(0.0, plan.total_s, 1201)  # 1200 segments per curve keep the file small
    ref = offsets(plan, t)
    titles = ("offset [rad]", "velocity [rad/s]", "acceleration [rad/s²]", "jerk [rad/s³]")
    left, right, top = 70, 20, 30
    plot_w = width - left - right
    joints = sorted(set(plan.joints)) if plan.mode != "hold" else [1]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + 4 * panel_h + 30}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="18" font-size="13">{plan.mode} joints {",".join(map(str, plan.joints))}: '
             f'{"designed tones" if plan.tone_table else f"{plan.amplitude_deg:g} deg"}, total {plan.total_s:g} s</text>']
    for i, title in enumerate(titles):
        y0 = top + i * panel_h
        h = panel_h - 30
        peak = float(np.abs(ref[i]).max()) or 1.0
        parts.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{h}" fill="none" stroke="#999"/>')
        parts.append(f'<text x="{left + 4}" y="{y0 + 12}">{title}, peak {peak:.3g}</text>')
        parts.append(f'<line x1="{left}" y1="{y0 + h / 2}" x2="{left + plot_w}" y2="{y0 + h / 2}" stroke="#ddd"/>')
        xs = left + plot_w * t / max(plan.total_s, 1e-9)
        for j in joints:
            ys = y0 + h / 2 - (h / 2 - 4) * ref[i][:, j - 1] / peak
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
            parts.append(f'<polyline fill="none" stroke="{_COLORS[j - 1]}" stroke-width="1" points="{pts}"/>')
    y_axis = top + 4 * panel_h
    parts.append(f'<text x="{left}" y="{y_axis}">0 s</text><text x="{left + plot_w - 40}" y="{y_axis}">'
                 f'{plan.total_s:g} s</text>')
    for k, j in enumerate(joints):
        parts.append(f'<text x="{left + 80 + 40 * k}" y="{y_axis}" fill="{_COLORS[j - 1]}">J{j}</text>')
    parts.append("</svg>\n")
    with open(path, "x", encoding="utf-8") as fh:
        fh.write("\n".join(parts))


def write_json_atomic(path: Path, data: dict) -> None:
    """Replace `path` by the JSON of `data` atomically (indent 2, no NaN;
    `twinlake.catalog.atomic_write_text`)."""
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def initial_metadata(plan: Plan, *, robot_id: str | None, host: str | None, cmd_port: int,
                     state_port: int, guards: dict, experiment: dict | None = None,
                     configured_load=None) -> dict:
    """The metadata keys every run starts with (status `initializing`); `configured_load`
    (a twinlake.sim EndLoad: the load set in Desk / setLoad) is stated when given."""
    meta = {
        "schema": SCHEMA,
        "status": "initializing",
        "created_at_utc": datetime.now(timezone.utc).isoformat(),
        "script_sha256": hashlib.sha256(Path(__file__).with_name("excite_run.py").read_bytes()).hexdigest(),
        "robot_id": robot_id,
        "host": host,
        "cmd_port": cmd_port,
        "state_port": state_port,
        "plan": plan.to_dict(),
        "experiment": experiment or {},
        "nuc_log_reference": None,
        "nuc_log_verified": False,
        "sysid_ready": False,
        "data_semantics": DATA_SEMANTICS,
        "guard_settings": guards,
        "commands_sent": 0,
        "motion_command_attempted": False,
    }
    if configured_load is not None:
        meta["configured_load"] = configured_load.to_json()
    return meta
