"""One episode of a campaign: its spec (index, seed, parameters, gains), its normalised config
(`episode_config.json`, whose SHA-256 over canonical JSON is `config_hash`), its 1 kHz samples
and its summary.

Episode ids: `e<sample:06d>` for one gain set, `<gains_id>-e<sample:06d>` with a gains grid
(sorting by id sorts by gain set, then sample). Sample i of every gain set draws its
parameters from the seed (campaign seed, i) (campaign/sampling.py).

`samples.parquet` (zstd), one row per 1 kHz tick, sample k = the state before tick k:
`tick` (int64), `t_s`, `q_target1..7` (the target in force, pre-EMA) [rad], `q1..7` [rad],
`dq1..7` [rad/s], `tau_cmd1..7` (after the slew limiter) [N·m].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..sim import LAYOUT
from ..sim.fr3 import TIMESTEP_S

from .gains import GainSet
from .store import canonical_json, sha256_text

EPISODE_SCHEMA = "twinlake.episode/v1"


@dataclass(frozen=True)
class EpisodeSpec:
    """Episode `index` (position in the campaign), `sample_index` (its parameter draw), gains
    and the drawn parameter vector (n,) in LAYOUT order."""

    episode_id: str
    index: int
    sample_index: int
    gains: GainSet
    params: tuple[float, ...]

    def parameters(self) -> dict:
        """The parameters by LAYOUT name (whole values as int)."""
        return {n: (int(round(v)) if i in LAYOUT.integer_indices else float(v))
                for i, (n, v) in enumerate(zip(LAYOUT.names, self.params))}

    @property
    def vector(self) -> np.ndarray:
        return np.asarray(self.params, dtype=np.float64)


def episode_id(sample_index: int, gains_id: str | None) -> str:
    return f"e{sample_index:06d}" if gains_id is None else f"{gains_id}-e{sample_index:06d}"


def plan_episodes(distribution, campaign_seed: int, episodes: int, gain_sets: list[GainSet]) -> list[EpisodeSpec]:
    """Every episode of the campaign: `episodes` samples × the gain sets (ids as above)."""
    draws = [tuple(distribution.draw(campaign_seed, i).tolist()) for i in range(episodes)]
    grid = len(gain_sets) > 1
    out = []
    for g, gains in enumerate(gain_sets):
        for i, params in enumerate(draws):
            out.append(EpisodeSpec(episode_id(i, gains.gains_id if grid else None), g * episodes + i, i, gains, params))
    return out


def episode_config(spec: EpisodeSpec, common: dict) -> tuple[dict, str]:
    """(normalised config, config_hash): the spec plus the campaign's common settings."""
    config = {"schema": EPISODE_SCHEMA, "episode_id": spec.episode_id, "index": spec.index,
              "sample_index": spec.sample_index, "gains": spec.gains.to_dict(), "parameters": spec.parameters(),
              **common}
    return config, sha256_text(canonical_json(config))


def samples_bytes(q_target: np.ndarray, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> bytes:
    """samples.parquet of one episode from (T, 7) arrays (deterministic bytes)."""
    t = q.shape[0]
    cols = {"tick": pa.array(np.arange(t, dtype=np.int64)), "t_s": pa.array(np.arange(t) * TIMESTEP_S)}
    for prefix, arr in (("q_target", q_target), ("q", q), ("dq", dq), ("tau_cmd", tau)):
        for j in range(7):
            cols[f"{prefix}{j + 1}"] = pa.array(np.ascontiguousarray(arr[:t, j], dtype=np.float64))
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table(cols), buf, compression="zstd")
    return buf.getvalue().to_pybytes()


__all__ = ["EPISODE_SCHEMA", "EpisodeSpec", "episode_config", "episode_id", "plan_episodes", "samples_bytes"]
