"""A PC-side logger of a 1 kHz robot loop: turns a clean recording into what real logs look like.

A logger on the PC polls the robot state at its own pace: it misses some ticks (a slot with
no row: here exactly one in `skip_every`) and sometimes logs the state it already logged
(a stale repeat: q, dq and torques identical to the row before; `stale_fraction` of the
rows), each row stamped by the PC's clock (the tick's time plus Gaussian jitter, clipped).
The output is the common libfranka-example layout

    duration, success rate, q[0..6], q_d[0..6], dq[0..6], dq_d[0..6], tau_J[0..6],
    tau_ext_hat_filtered[0..6]

with `duration` the PC time in milliseconds since the first row (a ms counter). Built with
numpy over all rows; imports nothing from twinlake.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

J = range(7)
LIBFRANKA_COLUMNS: tuple[str, ...] = (("duration", "success rate")
                                      + tuple(f"q[{i}]" for i in J) + tuple(f"q_d[{i}]" for i in J)
                                      + tuple(f"dq[{i}]" for i in J) + tuple(f"dq_d[{i}]" for i in J)
                                      + tuple(f"tau_J[{i}]" for i in J)
                                      + tuple(f"tau_ext_hat_filtered[{i}]" for i in J))
STATE_SIGNALS = ("q", "dq", "tau_J", "tau_ext_hat_filtered")
"""The robot-state signals a stale row repeats (q_d, dq_d are the PC's own commands, but a
stale row repeats the whole logged sample, so they repeat too)."""


@dataclass(frozen=True)
class PcLogger:
    """How the logger misbehaves: `skip_every` (every n-th tick slot has no row),
    `stale_fraction` (fraction of the other rows that repeat the row before),
    `jitter_ms` (standard deviation of the PC clock around the tick time, clipped at
    ±3σ; keep 3σ below half a period so each row rounds to its own tick), `seed`."""

    skip_every: int = 12
    stale_fraction: float = 0.06
    jitter_ms: float = 0.08
    period_ms: float = 1.0
    seed: int = 0


@dataclass
class PcLog:
    """The log: `columns` (name → values per row, LIBFRANKA_COLUMNS), `tick` (the robot tick
    whose slot each row fills), `stale` (rows repeating the row before), `skipped` (tick
    slots with no row)."""

    columns: dict[str, np.ndarray]
    tick: np.ndarray
    stale: np.ndarray
    skipped: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.tick)


def pc_log(clean: dict[str, np.ndarray], logger: PcLogger = PcLogger()) -> PcLog:
    """The PC-side log of `clean`, a 1 kHz recording as 0-based fr3_stack CSV v2 columns
    (`q0..6`, `dq0..6`, `tau_J0..6`, `tau_cmd0..6`, `q_target0..6`), one row per tick."""
    n = len(clean["q0"])
    rng = np.random.default_rng(logger.seed)
    ticks = np.arange(n)
    skipped = ticks[(ticks % logger.skip_every) == logger.skip_every - 1]
    kept = np.setdiff1d(ticks, skipped)
    # a stale row shows the previous row's sample; never the first row, never two in a row
    candidates = np.flatnonzero(np.diff(kept) == 1) + 1
    count = int(round(logger.stale_fraction * kept.size))
    chosen = np.sort(rng.choice(candidates, size=count, replace=False))
    chosen = chosen[np.concatenate([[True], np.diff(chosen) > 1])]
    stale = np.zeros(kept.size, bool)
    stale[chosen] = True
    source = kept.copy()  # which tick's sample each row shows
    source[stale] = kept[np.flatnonzero(stale) - 1]
    dt = 1e-3 * logger.period_ms
    q_d = np.stack([clean[f"q_target{i}"] for i in J], axis=1)
    sample = {
        "q": np.stack([clean[f"q{i}"] for i in J], axis=1),
        "q_d": q_d,
        "dq": np.stack([clean[f"dq{i}"] for i in J], axis=1),
        "dq_d": np.gradient(q_d, dt, axis=0),
        "tau_J": np.stack([clean[f"tau_J{i}"] for i in J], axis=1),
        "tau_ext_hat_filtered": np.stack([clean[f"tau_J{i}"] - clean[f"tau_cmd{i}"] for i in J],
                                         axis=1),
    }
    jitter = np.clip(rng.normal(0.0, logger.jitter_ms, kept.size), -3 * logger.jitter_ms,
                     3 * logger.jitter_ms)
    duration = kept * logger.period_ms + jitter
    cols: dict[str, np.ndarray] = {"duration": np.round(duration - duration[0], 3),
                                   "success rate": np.full(kept.size, 1.0 - 1.0 / logger.skip_every)}
    for name, values in sample.items():
        for i in J:
            cols[f"{name}[{i}]"] = values[source, i]
    return PcLog(cols, kept, stale, skipped)


def write_csv(log: PcLog, path: str | Path) -> Path:
    """The log as a headed CSV (`%.12g`), columns in LIBFRANKA_COLUMNS order."""
    path = Path(path)
    grid = np.column_stack([log.columns[c] for c in LIBFRANKA_COLUMNS])
    np.savetxt(path, grid, fmt="%.12g", delimiter=",", header=",".join(LIBFRANKA_COLUMNS),
               comments="")
    return path
