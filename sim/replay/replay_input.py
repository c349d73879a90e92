"""ReplayInput: one interval of a recording, ready for the replay engines.

Tick timeline: tick 0 is the first replayed tick. At tick k the sim reads its own state
(never the recording's), runs the controller on the recorded target of tick k, and applies
the delayed torque for 1 ms. Sim sample s is the sim state *before* tick `sample_ticks[s]`;
compare it with recorded row `q_ref[s]` (recorded row k holds the measured q_k and the
tau_cmd computed from it).

`from_frames` takes the canonical frame columns (docs/architecture.md) of one interval:
  * 1 kHz rows (fr3_stack CSV v2, FrankaTwin ring log): one tick per row. The first
    `history_rows` rows are history: they seed the slew limiter (tau_cmd of the last one),
    the delay line (their tau_cmd) and the EMA (q_target_filtered of the last one); the
    replay starts at the next row from its recorded q, dq.
  * `time_base="zoh_1khz_ticks_per_csv_row"` (FrankaTwin 50 Hz logs): row k's target is
    held round(Δt/1 ms) ticks (≥ 1, last row 1), after `warmup_ticks` holding the initial
    pose from q0 at rest; the sim is sampled at each row's first tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..arm_model.controllers import CartesianGains
from ..arm_model.load import NO_LOAD, EndLoad
from ..arm_model.params import MAX_DELAY_MS

JOINT_IMPEDANCE = "joint_impedance"
CARTESIAN_IMPEDANCE = "cartesian_impedance"
TIME_BASE_TICKS = "ticks"
TIME_BASE_ZOH = "zoh_1khz_ticks_per_csv_row"


@dataclass
class ReplayInput:
    """One interval to replay. Shapes: T ticks, S samples; joint arrays (·, 7)."""

    controller: str  # JOINT_IMPEDANCE or CARTESIAN_IMPEDANCE
    q0: np.ndarray  # (7,) initial joint position [rad]
    dq0: np.ndarray  # (7,) initial joint velocity [rad/s]
    tau_prev0: np.ndarray  # (7,) slew-limiter state: tau_cmd of the tick before tick 0 [N·m]
    tau_history: np.ndarray  # (H, 7) tau_cmd of the ticks before tick 0, oldest first (delay line)
    sample_ticks: np.ndarray  # (S,) int64 ticks whose pre-tick state is sampled
    n_ticks: int  # T
    # joint impedance (T, ·): targets, gains; EMA applied by the sim when use_ema
    q_target: np.ndarray | None = None  # (T, 7) pre-EMA (use_ema) or post-EMA targets [rad]
    use_ema: bool = True
    ema0: np.ndarray | None = None  # (7,) EMA state before tick 0 [rad]
    k_nm_per_rad: np.ndarray | None = None  # (T, 7)
    d_nms_per_rad: np.ndarray | None = None  # (T, 7)
    filter_alpha: np.ndarray | None = None  # (T,)
    use_friction: np.ndarray | None = None  # (T,) bool
    # Cartesian impedance (T, ·): setpoint per tick; first `warmup_ticks` hold the initial pose
    target_pos: np.ndarray | None = None  # (T, 3) [m]
    target_quat_xyzw: np.ndarray | None = None  # (T, 4)
    cartesian: CartesianGains = field(default_factory=CartesianGains)
    warmup_ticks: int = 0
    # comparison signals (recorded), aligned with samples
    q_ref: np.ndarray | None = None  # (S, 7)
    dq_ref: np.ndarray | None = None  # (S, 7)
    t_s: np.ndarray | None = None  # (S,)
    source_rows: np.ndarray | None = None  # (S,) row index of each sample in the given frames
    # the end-effector load the robot's firmware was configured with (its gravity compensation)
    configured_load: EndLoad = NO_LOAD

    def __post_init__(self) -> None:
        if not isinstance(self.configured_load, EndLoad):
            raise ValueError(f"configured_load: expected an EndLoad, got {type(self.configured_load).__name__}")
        if self.controller not in (JOINT_IMPEDANCE, CARTESIAN_IMPEDANCE):
            raise ValueError(f"controller: expected '{JOINT_IMPEDANCE}' or '{CARTESIAN_IMPEDANCE}', got {self.controller!r}")
        self.sample_ticks = np.asarray(self.sample_ticks, dtype=np.int64)
        if self.sample_ticks.size and (self.sample_ticks.min() < 0 or self.sample_ticks.max() >= self.n_ticks):
            raise ValueError("sample_ticks: expected ticks within 0..n_ticks-1")
        self.tau_history = np.asarray(self.tau_history, dtype=np.float64).reshape(-1, 7)
        if self.controller == JOINT_IMPEDANCE:
            for name in ("q_target", "k_nm_per_rad", "d_nms_per_rad"):
                if getattr(self, name) is None or np.shape(getattr(self, name)) != (self.n_ticks, 7):
                    raise ValueError(f"{name}: expected shape ({self.n_ticks}, 7)")
            if self.filter_alpha is None:
                self.filter_alpha = np.ones(self.n_ticks)
            if self.use_friction is None:
                self.use_friction = np.zeros(self.n_ticks, dtype=bool)
            if self.ema0 is None:
                self.ema0 = np.asarray(self.q0, dtype=np.float64).copy()
        else:
            if self.target_pos is None or self.target_quat_xyzw is None:
                raise ValueError("Cartesian replay: target_pos and target_quat_xyzw are required")

    @property
    def n_samples(self) -> int:
        return int(self.sample_ticks.size)

    @classmethod
    def from_frames(
        cls,
        columns: Mapping[str, Any] | Any,
        *,
        controller: str | None = None,
        use_ema: bool = True,
        history_rows: int = MAX_DELAY_MS,
        time_base: str = TIME_BASE_TICKS,
        warmup_ticks: int = 50,
        cartesian: CartesianGains | None = None,
        q_init: np.ndarray | None = None,
        configured_load: EndLoad = NO_LOAD,
    ) -> "ReplayInput":
        """Build from canonical frame columns of one interval (dict of arrays or pyarrow.Table).

        controller: inferred from the `controller` column (2 joint, 1 Cartesian) if None.
        use_ema: joint impedance driven by `q_target` through the sim's EMA (True) or by
        `q_target_filtered` with the EMA bypassed (False). configured_load: the recording's
        configured end-effector load (its metadata's, load.load_from_metadata; none by
        default). Raises ValueError naming the column and row of bad input.
        """
        cols = _Columns(columns)
        if controller is None:
            controller = cols.infer_controller()
        if controller == JOINT_IMPEDANCE:
            inp = _joint_from_frames(cols, use_ema, history_rows)
        elif time_base == TIME_BASE_ZOH:
            inp = _cartesian_zoh(cols, warmup_ticks, cartesian or CartesianGains(), q_init)
        elif time_base != TIME_BASE_TICKS:
            raise ValueError(f"time_base: expected '{TIME_BASE_TICKS}' or '{TIME_BASE_ZOH}', got {time_base!r}")
        else:
            inp = _cartesian_ticks(cols, history_rows, cartesian or CartesianGains())
        if not isinstance(configured_load, EndLoad):
            raise ValueError(f"configured_load: expected an EndLoad, got {type(configured_load).__name__}")
        inp.configured_load = configured_load
        return inp


class _Columns:
    """Column access over a dict of arrays or a pyarrow Table, nulls → NaN, with checks."""

    def __init__(self, columns: Any):
        self._src = columns
        names = columns.column_names if hasattr(columns, "column_names") else list(columns.keys())
        self.names = set(names)
        first = names[0] if names else None
        self.n = len(self.get(first)) if first else 0

    def has(self, name: str) -> bool:
        return name in self.names

    def get(self, name: str) -> np.ndarray:
        if name not in self.names:
            raise ValueError(f"frames: missing column '{name}'")
        col = self._src.column(name) if hasattr(self._src, "column_names") else self._src[name]
        if hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
            if hasattr(col, "null_count") and col.null_count:
                col = col.cast("float64").fill_null(float("nan"))
            col = col.to_numpy(zero_copy_only=False) if "pyarrow" in type(col).__module__ else col.to_numpy()
        return np.asarray(col)

    def floats(self, names: list[str], rows: slice = slice(None)) -> np.ndarray:
        """(n, len(names)) float64; raises on non-finite values naming column and row."""
        out = np.column_stack([self.get(n).astype(np.float64) for n in names])[rows]
        bad = ~np.isfinite(out)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            start = rows.start or 0
            raise ValueError(f"frames: column '{names[c]}' row {start + r}: expected a finite number, got {out[r, c]}")
        return out

    def infer_controller(self) -> str:
        if not self.has("controller"):
            raise ValueError("frames: no 'controller' column; pass controller=")
        values = np.unique(self.get("controller"))
        if values.size != 1 or int(values[0]) not in (1, 2):
            raise ValueError(f"frames: column 'controller': expected one value, 1 or 2, got {values.tolist()}")
        return JOINT_IMPEDANCE if int(values[0]) == 2 else CARTESIAN_IMPEDANCE

    def check_contiguous(self) -> None:
        if self.has("seq"):
            seq = self.get("seq").astype(np.int64)
            jumps = np.flatnonzero(np.diff(seq) != 1)
            if jumps.size:
                r = int(jumps[0])
                raise ValueError(f"frames: column 'seq' row {r + 1}: expected {seq[r] + 1}, got {seq[r + 1]} (not one interval)")


def _j(prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, 8)]


def _split_history(cols: _Columns, history_rows: int):
    """The first `history_rows` rows are history (slew state, delay line, EMA state); the
    replay runs from the next one. Returns (h, run slice, q (N,7), dq (N,7), tau history (h,7))."""
    cols.check_contiguous()
    h = int(history_rows)
    if h < 1 or cols.n <= h:
        raise ValueError(f"frames: {cols.n} rows; expected more than history_rows={h} (and history_rows ≥ 1)")
    q, dq = cols.floats(_j("q")), cols.floats(_j("dq"))
    return h, slice(h, None), q, dq, cols.floats(_j("tau_cmd"), slice(0, h))


def _joint_from_frames(cols: _Columns, use_ema: bool, history_rows: int) -> ReplayInput:
    h, run, q, dq, tau = _split_history(cols, history_rows)
    target = cols.floats(_j("q_target" if use_ema else "q_target_filtered"), run)
    filtered = cols.floats(_j("q_target_filtered"), slice(h - 1, h))[0]
    alpha = cols.floats(["filter_alpha"], run)[:, 0] if use_ema else np.ones(cols.n - h)
    friction = cols.get("joint_use_friction")[run].astype(bool) if cols.has("joint_use_friction") else np.zeros(cols.n - h, bool)
    t_s = cols.floats(["t_s"], run)[:, 0] if cols.has("t_s") else None
    n = cols.n - h
    return ReplayInput(
        controller=JOINT_IMPEDANCE, q0=q[h], dq0=dq[h], tau_prev0=tau[-1], tau_history=tau,
        sample_ticks=np.arange(n), n_ticks=n, q_target=target, use_ema=use_ema, ema0=filtered,
        k_nm_per_rad=cols.floats(_j("K_joint"), run), d_nms_per_rad=cols.floats(_j("D_joint"), run),
        filter_alpha=alpha, use_friction=friction, q_ref=q[run], dq_ref=dq[run], t_s=t_s,
        source_rows=np.arange(h, cols.n),
    )


_TGT_POS = ["tgt_px", "tgt_py", "tgt_pz"]
_TGT_QUAT = ["tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw"]


def _cartesian_ticks(cols: _Columns, history_rows: int, gains: CartesianGains) -> ReplayInput:
    h, run, q, dq, tau = _split_history(cols, history_rows)
    n = cols.n - h
    return ReplayInput(
        controller=CARTESIAN_IMPEDANCE, q0=q[h], dq0=dq[h], tau_prev0=tau[-1], tau_history=tau,
        sample_ticks=np.arange(n), n_ticks=n, target_pos=cols.floats(_TGT_POS, run),
        target_quat_xyzw=cols.floats(_TGT_QUAT, run), cartesian=gains, warmup_ticks=0,
        q_ref=q[run], dq_ref=dq[run], t_s=cols.floats(["t_s"], run)[:, 0] if cols.has("t_s") else None,
        source_rows=np.arange(h, cols.n),
    )


def zoh_steps(t_s: np.ndarray) -> np.ndarray:
    """FrankaTwin compute_step_counts: max(1, round(Δt / 1 ms)) per row, last row 1."""
    steps = np.ones(len(t_s), dtype=np.int64)
    if len(t_s) > 1:
        steps[:-1] = np.maximum(1, np.rint(np.diff(t_s) / 1e-3)).astype(np.int64)
    return steps


def _cartesian_zoh(cols: _Columns, warmup: int, gains: CartesianGains, q_init) -> ReplayInput:
    t_s = cols.floats(["t_s"])[:, 0]
    steps = zoh_steps(t_s)
    q, dq = cols.floats(_j("q")), cols.floats(_j("dq"))
    starts = warmup + np.concatenate([[0], np.cumsum(steps)[:-1]])
    n_ticks = int(warmup + steps.sum())
    pos = np.repeat(cols.floats(_TGT_POS), steps, axis=0)
    quat = np.repeat(cols.floats(_TGT_QUAT), steps, axis=0)
    pad = ((warmup, 0), (0, 0))
    q0 = q[0] if q_init is None else np.asarray(q_init, dtype=np.float64)
    return ReplayInput(
        controller=CARTESIAN_IMPEDANCE, q0=q0, dq0=np.zeros(7), tau_prev0=np.zeros(7),
        tau_history=np.zeros((0, 7)), sample_ticks=starts, n_ticks=n_ticks,
        target_pos=np.pad(pos, pad, mode="edge"), target_quat_xyzw=np.pad(quat, pad, mode="edge"),
        cartesian=gains, warmup_ticks=warmup, q_ref=q, dq_ref=dq, t_s=t_s, source_rows=np.arange(cols.n),
    )


__all__ = ["CARTESIAN_IMPEDANCE", "JOINT_IMPEDANCE", "TIME_BASE_TICKS", "TIME_BASE_ZOH", "ReplayInput", "zoh_steps"]
