"""Seeded measurement noise in a replay's control loop: what the controller reads is the
simulated state plus white noise, as a real arm's controller acts on its noisy encoders.

A recorder (daemon/offline.py) feeds the same per-tick offsets it records into the law; a
replay of a candidate sees the noise-free simulated state unless it is given a
`ControllerNoise`. Each candidate's noise is a function of its own seed and the input's index
only (numpy's PCG64 seeded with [seed, input]), so a replay is the same bytes whatever the
population's split into shards, chunks or workers. A seed < 0 means no noise for that row.

Shapes: P candidates, T ticks; q_std_rad, dq_std_rad_s (7,) per-joint σ [rad], [rad/s].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def noise_block(seed: int, input_index: int, n_ticks: int, q_std_rad: np.ndarray,
                dq_std_rad_s: np.ndarray) -> np.ndarray:
    """(T, 14) offsets of one candidate on one input: [q noise (7) | dq noise (7)] per tick."""
    block = np.random.default_rng([int(seed), int(input_index)]).standard_normal((int(n_ticks), 14))
    block[:, :7] *= np.asarray(q_std_rad, dtype=np.float64)
    block[:, 7:] *= np.asarray(dq_std_rad_s, dtype=np.float64)
    return block


@dataclass(frozen=True)
class ControllerNoise:
    """White noise added to the q and dq the replay's joint-impedance law reads (not to the
    physics, nor to the recorded samples): σ per joint and one seed per candidate row."""

    q_std_rad: np.ndarray
    dq_std_rad_s: np.ndarray
    seeds: np.ndarray

    def __post_init__(self) -> None:
        for name in ("q_std_rad", "dq_std_rad_s"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (7,) or not np.all(np.isfinite(value)) or np.any(value < 0):
                raise ValueError(f"ControllerNoise.{name}: expected 7 finite σ ≥ 0, got {value!r}")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "seeds", np.asarray(self.seeds, dtype=np.int64).reshape(-1))

    def rows(self, rows: slice) -> "ControllerNoise":
        """The same noise for candidate rows `rows` only."""
        return ControllerNoise(self.q_std_rad, self.dq_std_rad_s, self.seeds[rows])

    def block(self, input_index: int, n_ticks: int) -> np.ndarray:
        """(P, T, 14) C-contiguous offsets of every row on input `input_index` (zeros for a
        seed < 0)."""
        out = np.zeros((len(self.seeds), int(n_ticks), 14))
        for p, seed in enumerate(self.seeds.tolist()):
            if seed >= 0:
                out[p] = noise_block(seed, input_index, n_ticks, self.q_std_rad, self.dq_std_rad_s)
        return out


__all__ = ["ControllerNoise", "noise_block"]
