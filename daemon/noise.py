"""Measurement noise on q, dq and tau_J, drawn from a seeded numpy Generator in blocks.

White Gaussian noise with per-signal standard deviations; `NoiseSource.next()` returns one
tick's (q, dq, tau_J) offsets, drawing `block_ticks` ticks at a time so the stream for a
seed is the same whatever the caller's pace (daemon and offline recorder agree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NoiseConfig:
    """Standard deviations: q [rad], dq [rad/s], tau_J [N·m]. Defaults are ours (FR3-like)."""

    q_std_rad: float = 2e-5
    dq_std_rad_s: float = 5e-4
    tau_std_nm: float = 0.05

    @classmethod
    def parse(cls, text: str) -> "NoiseConfig":
        """Parse `none` or `q=2e-5,dq=5e-4,tau=0.05` (any subset; others keep defaults)."""
        text = text.strip()
        if text.lower() in ("none", "off", "0"):
            return cls(0.0, 0.0, 0.0)
        keys = {"q": "q_std_rad", "dq": "dq_std_rad_s", "tau": "tau_std_nm"}
        values = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            if not sep or name.strip() not in keys:
                raise ValueError(f"--noise: expected 'none' or q=..,dq=..,tau=.., got {part!r}")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"--noise: {name.strip()} must be a number, got {value!r}") from None
            if not np.isfinite(number) or number < 0:
                raise ValueError(f"--noise: {name.strip()} must be finite and >= 0, got {value!r}")
            values[keys[name.strip()]] = number
        return cls(**values)


class NoiseSource:
    """Seeded per-tick noise: `next()` -> (q (7,), dq (7,), tau_J (7,)) offsets."""

    def __init__(self, config: NoiseConfig, seed: int, block_ticks: int = 1024) -> None:
        self.config = config
        self._rng = np.random.default_rng(seed)
        self._scale = np.repeat([config.q_std_rad, config.dq_std_rad_s, config.tau_std_nm], 7)
        self._block_ticks = block_ticks
        self._block = np.empty((0, 21))
        self._i = 0

    def block(self, n: int) -> np.ndarray:
        """The next n ticks of noise, (n, 21): q | dq | tau_J columns."""
        out = np.empty((n, 21))
        filled = 0
        while filled < n:
            if self._i >= self._block.shape[0]:
                self._block = self._rng.standard_normal((self._block_ticks, 21)) * self._scale
                self._i = 0
            take = min(n - filled, self._block.shape[0] - self._i)
            out[filled:filled + take] = self._block[self._i:self._i + take]
            self._i += take
            filled += take
        return out

    def next_row(self) -> np.ndarray:
        """One tick's offsets (21,): q | dq | tau_J (a view of the current block)."""
        if self._i >= self._block.shape[0]:
            self._block = self._rng.standard_normal((self._block_ticks, 21)) * self._scale
            self._i = 0
        row = self._block[self._i]
        self._i += 1
        return row

    def next(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One tick's offsets as (q (7,), dq (7,), tau_J (7,))."""
        row = self.next_row()
        return row[0:7], row[7:14], row[14:21]
