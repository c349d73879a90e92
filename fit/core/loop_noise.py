"""The closed loop's noise: the bias and spread it gives a fit, by a linearised parametric
bootstrap through the replay.

A real arm's controller acts on its noisy measurements, and so does the project's recorder;
the fit's replay acts on the simulated, noise-free state. The recorded run is one draw of a
noisy closed loop: the noise dithers the law (its friction compensation above all) and moves
the trajectory slowly, in directions that correlate with the parameters. Part of that is a
mean shift (the fit's optimum is biased), part a variance the measurement-noise covariance
(HAC, fit/core/covariance.py) does not see.

The bootstrap at the fit's optimum θ̂ (range-scaled coordinates z, J = ∂r/∂z the last
full-data LM iteration's Jacobian, r the fit's residuals of FitProblem.residuals):

- B replays of θ̂ with seeded white noise of the recording's estimated σ (fit/core/noise_floor.py,
  all training intervals together) in the law's q and dq (twinlake.sim ControllerNoise) —
  each draw's pseudo-recording y_b = x_b + n_b, the noisy-loop trajectory plus the same noise
  as its measurement, as a recorder writes it — and one noise-free replay g(θ̂);
- for each draw, the Gauss–Newton step from θ̂ towards it: δ_b = −(JᵀJ)⁻¹Jᵀ(g − y_b)/scale,
  split into the loop part (g − x_b) and the measurement part (−n_b), which add;
- the bias is the mean of the loop parts (the measurement part has mean zero), the loop
  covariance their sample covariance.

Cost: B + 1 replays of the training data (one population batch on the fit's workers) and
B products with J; no refit. Deterministic per seed: draw b uses seed `seed·1000 + b`.
Limits: linear in θ around θ̂ (a refit per draw would not be), white noise of one σ per joint
and signal (a real encoder's noise may be coloured), B draws (the bias's own standard error,
√(diag cov / B), is returned beside it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

DEFAULT_DRAWS = 16
WITHOUT = "hac_without_loop_noise"  # the alternative's key: the measurement-noise covariance alone


@dataclass(frozen=True)
class LoopNoise:
    """The bootstrap's result in range-scaled coordinates (k free parameters): `bias` (k,) the
    mean loop step (the fit's estimate minus the truth, as the bootstrap measures it),
    `bias_stderr` (k,), `cov_loop` (k, k) the loop steps' covariance, `cov_total` (k, k) of the
    whole steps (loop + measurement), `draws` B, `q_std_rad`, `dq_std_rad_s` (7,) the noise
    used, `seconds` the wall time."""

    bias: np.ndarray
    bias_stderr: np.ndarray
    cov_loop: np.ndarray
    cov_total: np.ndarray
    draws: int
    q_std_rad: np.ndarray
    dq_std_rad_s: np.ndarray
    seconds: float

    def to_json(self, ranges: np.ndarray) -> dict:
        """In the parameters' units (`ranges` (k,) the bound ranges of the free parameters); no
        wall time (stored JSON is the same bytes for the same inputs: it is in the fit's
        `error_bars_s`)."""
        r = np.asarray(ranges, dtype=np.float64)
        return {"draws": int(self.draws), "bias": (self.bias * r).tolist(),
                "bias_stderr": (self.bias_stderr * r).tolist(),
                "stderr_loop": (np.sqrt(np.clip(np.diag(self.cov_loop), 0, None)) * r).tolist(),
                "stderr_total": (np.sqrt(np.clip(np.diag(self.cov_total), 0, None)) * r).tolist(),
                "q_std_rad": self.q_std_rad.tolist(), "dq_std_rad_s": self.dq_std_rad_s.tolist()}


def recording_noise(data) -> tuple[np.ndarray, np.ndarray] | None:
    """(σ_q (7,) [rad], σ_dq (7,) [rad/s]) of the training recordings (`data` a ProblemData),
    None when the noise is not measurable."""
    from .noise_floor import estimate_noise_floor

    nf = estimate_noise_floor([inp.q_ref for inp in data.inputs], [inp.dq_ref for inp in data.inputs])
    if not nf.measurable or nf.dq_rad_s is None or not np.all(np.isfinite(nf.dq_rad_s)):
        return None
    return np.asarray(nf.q_rad, dtype=np.float64), np.asarray(nf.dq_rad_s, dtype=np.float64)


def measurement_rows(data, seeds: np.ndarray, q_std: np.ndarray, dq_std: np.ndarray) -> np.ndarray:
    """(B, M) each draw's measurement noise n_b in the residuals' rows and units (FitProblem.residuals'
    layout and weights): the offsets the law read at the sample ticks, as a recorder writes them."""
    import math

    from ...sim.replay.controller_noise import noise_block

    w, sc = data.weights, data.scales
    out = []
    for seed in seeds.tolist():
        parts = []
        for b, inp in enumerate(data.inputs):
            block = noise_block(seed, b, inp.n_ticks, q_std, dq_std)[inp.sample_ticks]
            f = math.sqrt(w[b] / (w.sum() * len(inp.sample_ticks) * 7))
            parts += [f * block[:, :7].reshape(-1) / sc.q_rad, f * block[:, 7:].reshape(-1) / sc.dq_rad_s]
        out.append(np.concatenate(parts))
    return np.stack(out)


def bootstrap(pool, data, params: np.ndarray, jac: np.ndarray, seed: int, draws: int = DEFAULT_DRAWS
              ) -> LoopNoise | None:
    """The linearised parametric bootstrap at `params` (n,) with `jac` (M, k) = ∂r/∂z of the
    training data `data` held by `pool`; None when the recording's noise is not measurable."""
    from ...sim import ControllerNoise

    noise = recording_noise(data)
    if noise is None or draws < 2:
        return None
    t0 = time.perf_counter()
    seeds = np.array([-1] + [int(seed) * 1000 + b for b in range(draws)], dtype=np.int64)
    rows = np.repeat(np.asarray(params, dtype=np.float64)[None], draws + 1, axis=0)
    res = pool.residuals(rows, ControllerNoise(noise[0], noise[1], seeds))
    loop = res[0][None] - res[1:]  # (g − x_b)/scale, since both residuals subtract the same recording
    meas = -measurement_rows(data, seeds[1:], *noise)
    q, r = np.linalg.qr(jac)
    r_inv = np.linalg.pinv(r)  # a direction J does not see (a zero column) gets no step
    step_loop, step_meas = -(r_inv @ (q.T @ loop.T)).T, -(r_inv @ (q.T @ meas.T)).T  # (B, k) Gauss–Newton steps
    step = step_loop + step_meas
    cov_loop = np.atleast_2d(np.cov(step_loop, rowvar=False))
    cov_total = np.atleast_2d(np.cov(step, rowvar=False))
    bias = step_loop.mean(axis=0)
    return LoopNoise(bias, np.sqrt(np.clip(np.diag(cov_loop), 0, None) / draws), cov_loop, cov_total, int(draws),
                     noise[0], noise[1], time.perf_counter() - t0)


def with_loop_noise(main, loop: LoopNoise):
    """The fit's covariance estimate (fit/core/covariance.py CovarianceEstimate, range-scaled)
    plus the loop's: HAC + cov_loop, same method, bandwidth and dof."""
    from dataclasses import replace

    return replace(main, cov=main.cov + loop.cov_loop)


__all__ = ["DEFAULT_DRAWS", "LoopNoise", "WITHOUT", "bootstrap", "measurement_rows", "recording_noise",
           "with_loop_noise"]
