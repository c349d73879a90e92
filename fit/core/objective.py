"""The fit objective: replay each selected interval for a population of parameter vectors and
score joint position and velocity error on fixed, declared scales.

For interval b (S_b samples, 7 joints), candidate p:

    L_b(p) = mean_{s,j} ((q_sim − q_rec) / q_scale)²  +  mean_{s,j} ((dq_sim − dq_rec) / dq_scale)²
    loss(p) = Σ_b w_b · L_b(p) / Σ_b w_b            (w_b = the weight of interval b's run)

The default scales, q_scale = 0.01 rad and dq_scale = 0.01/√0.1 rad/s, weigh velocity
against position as FrankaTwin's w_q = 1, w_dq = 0.1 do; they are declared, never learned.
`residuals(params)` returns the (P, M) vector r with Σ_m r² = loss: every q and dq error of
every interval, divided by its scale and multiplied by √(w_b / (Σw · S_b · 7)).

Each interval replays with its own recorded gains (K, D, EMA α, friction flag), so runs with
different gains can be mixed, and with its run's configured end-effector load (the firmware's
gravity compensation, `twinlake.sim.arm_model.load`): the one given to the fit (`--configured-load`),
else the one its run's metadata states (`configured_load`), else none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import SettingError
from .intervals import IntervalRef, read_frames, replay_inputs, resolve

DEFAULT_Q_SCALE_RAD = 0.01
DEFAULT_DQ_SCALE_RAD_S = 0.01 / math.sqrt(0.1)


@dataclass(frozen=True)
class LossScales:
    """Declared error scales: position [rad] and velocity [rad/s]."""

    q_rad: float = DEFAULT_Q_SCALE_RAD
    dq_rad_s: float = DEFAULT_DQ_SCALE_RAD_S

    def __post_init__(self) -> None:
        for name in ("q_rad", "dq_rad_s"):
            if not getattr(self, name) > 0:
                raise SettingError(name.replace("_rad_s", "_scale").replace("_rad", "_scale"), str(getattr(self, name)),
                                   f"loss scale {name}: expected > 0")


@dataclass
class ProblemData:
    """Everything a worker needs to evaluate the objective (picklable; put in Ray's object
    store once): the replay inputs (one per interval), per-interval weights (B,), scales,
    the interval references and an optional MJCF path (None = the bundled FR3)."""

    inputs: list
    weights: np.ndarray
    scales: LossScales
    refs: list[IntervalRef]
    model_path: str | None = None
    use_ema: bool = True
    friction_law: str = "stribeck"  # the plant's friction law (twinlake.sim.arm_model.plant.FRICTION_LAWS)

    @property
    def configured_loads(self) -> dict[str, dict]:
        """The configured load each interval replays with, by interval label (JSON form)."""
        return {ref.label: inp.configured_load.to_json() for ref, inp in zip(self.refs, self.inputs)}

    @property
    def ticks_per_rollout(self) -> int:
        """Physics ticks of one candidate over all intervals (for ms_per_tick)."""
        return int(sum(int(i.n_ticks) for i in self.inputs))


def build_data(
    lake,
    selectors: list[str] | list[IntervalRef],
    *,
    run_weights: dict[str, float] | None = None,
    scales: LossScales | None = None,
    max_duration_s: float | None = None,
    min_duration_s: float = 0.5,
    model_path: str | None = None,
    use_ema: bool = True,
    configured_load=None,
    friction_law: str = "stribeck",
) -> ProblemData:
    """Resolve selectors (strings `[ROBOT/]RUN[:INTERVAL]` or IntervalRefs), read the frames and
    build the replay inputs. `run_weights` maps a run id (or ROBOT/RUN) to its weight (default 1).
    `configured_load` (a twinlake.sim EndLoad) overrides every run's configured load; None takes
    each run's from its metadata (none when it states none)."""

    refs = [s for s in selectors if isinstance(s, IntervalRef)]
    texts = [s for s in selectors if not isinstance(s, IntervalRef)]
    if texts:
        refs += resolve(lake, texts, min_duration_s=min_duration_s)
    if not refs:
        raise SettingError("train", None, "no intervals selected: give at least one RUN[:INTERVAL]")
    if max_duration_s is not None:
        cap = int(round(max_duration_s * 1000.0))
        refs = [replace(r, seq_last=min(r.seq_last, r.seq_first + cap)) for r in refs]
    tables = read_frames(lake, refs)
    inputs = replay_inputs(refs, tables, use_ema=use_ema)
    for inp, load in zip(inputs, configured_loads(lake, refs, configured_load)):
        inp.configured_load = load
    weights = np.array([_weight(run_weights or {}, r) for r in refs], dtype=np.float64)
    return ProblemData(inputs, weights, scales or LossScales(), refs, model_path, use_ema, friction_law)


def run_metadata(lake, runs: list[tuple[str | None, str]]) -> list[dict | None]:
    """Per (robot, run), the run's companion metadata (`runs.metadata_json`, kept verbatim by
    ingest) as a dict; None for a run without metadata, with unreadable JSON or not an object."""
    import json

    from ...catalog import connect

    con = connect(lake)
    try:
        out = []
        for robot, run in runs:
            row = con.execute("SELECT metadata_json FROM runs WHERE robot = ? AND run = ?", [robot, run]).fetchone()
            try:
                meta = json.loads(row[0]) if row and row[0] else None
            except ValueError:
                meta = None
            out.append(meta if isinstance(meta, dict) else None)
        return out
    finally:
        con.close()


def configured_loads(lake, refs: list[IntervalRef], override=None) -> list:
    """Per interval, the EndLoad it replays with: `override` if given, else its run's metadata
    `configured_load` (twinlake.sim.arm_model.load.load_from_metadata), else none (also when the metadata
    is unreadable: ingest keeps it verbatim). ValueError naming the run when its metadata states
    a malformed load."""
    from ...sim.arm_model.load import NO_LOAD, load_from_metadata

    if override is not None:
        return [override] * len(refs)
    metas = run_metadata(lake, [(ref.robot, ref.run) for ref in refs])
    return [load_from_metadata(meta, f"run {ref.robot}/{ref.run} metadata") or NO_LOAD
            for ref, meta in zip(refs, metas)]


def _weight(run_weights: dict[str, float], ref: IntervalRef) -> float:
    w = run_weights.get(f"{ref.robot}/{ref.run}", run_weights.get(ref.run, 1.0))
    if not (w > 0 and math.isfinite(w)):
        raise SettingError("weights", ref.run, f"expected a finite weight > 0, got {w}")
    return float(w)


class FitProblem:
    """The objective over a fixed set of intervals, evaluated with the population engine.

    `interval_losses(params (P,29)) -> (P, B)` per-interval L_b; `loss(params) -> (P,)`;
    `residuals(params) -> (P, M)` with `(residuals**2).sum(1) == loss`.
    """

    def __init__(self, data: ProblemData, nthread: int = 1) -> None:
        self.data = data
        self.nthread = int(nthread)
        self._engine = None

    @classmethod
    def from_lake(cls, lake, selectors, *, scales: LossScales | None = None,
                  weights: dict[str, float] | None = None, max_duration_s: float | None = None,
                  nthread: int = 1, model_path: str | None = None) -> "FitProblem":
        """Build from a lake and a list of `[ROBOT/]RUN[:INTERVAL]` selectors or IntervalRefs."""
        data = build_data(lake, selectors, run_weights=weights, scales=scales,
                          max_duration_s=max_duration_s, model_path=model_path)
        return cls(data, nthread=nthread)

    @property
    def n_intervals(self) -> int:
        return len(self.data.inputs)

    @property
    def weights(self) -> np.ndarray:
        return self.data.weights

    @property
    def engine(self):
        if self._engine is None:
            from ...sim import PopulationEngine, load_model

            model = load_model(self.data.model_path) if self.data.model_path else None
            self._engine = PopulationEngine(self.data.inputs, model=model, nthread=self.nthread,
                                            friction_law=self.data.friction_law)
        return self._engine

    def rollout(self, params: np.ndarray, noise=None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per interval, (q_sim, dq_sim), each (P, S_b, 7); `noise` (a twinlake.sim
        ControllerNoise, one seed per row): the replay's law reads seeded measurement noise."""
        params = np.atleast_2d(np.asarray(params, dtype=np.float64))
        return [(r.q, r.dq) for r in self.engine.run(params, noise=noise)]

    def _errors(self, params: np.ndarray, noise=None):
        sc = self.data.scales
        for inp, (q, dq) in zip(self.data.inputs, self.rollout(params, noise)):
            yield (q - inp.q_ref[None]) / sc.q_rad, (dq - inp.dq_ref[None]) / sc.dq_rad_s

    def interval_losses(self, params: np.ndarray) -> np.ndarray:
        """(P, B) per-interval mean squares L_b; a non-finite rollout gives +inf.

        The engine sums the errors inside its tick loop (PopulationEngine.mean_square_errors),
        so a generation never holds the (P, S, 7) trajectories.
        """
        params = np.atleast_2d(np.asarray(params, dtype=np.float64))
        sc = self.data.scales
        lb = self.engine.mean_square_errors(params, sc.q_rad, sc.dq_rad_s).sum(axis=2)
        return np.where(np.isfinite(lb), lb, np.inf)

    def combine(self, interval_losses: np.ndarray) -> np.ndarray:
        """(P,) weighted mean of (P, B) per-interval losses."""
        w = self.data.weights
        return interval_losses @ w / w.sum()

    def loss(self, params: np.ndarray) -> np.ndarray:
        """(P,) weighted mean square (dimensionless)."""
        return self.combine(self.interval_losses(params))

    def residuals(self, params: np.ndarray, noise=None) -> np.ndarray:
        """(P, M) scaled, weighted errors, M = Σ_b 2·S_b·7; Σ r² = loss. `noise` as rollout()."""
        w = self.data.weights
        parts = []
        for b, (eq, edq) in enumerate(self._errors(params, noise)):
            f = math.sqrt(w[b] / (w.sum() * eq.shape[1] * 7))
            parts += [f * eq.reshape(len(eq), -1), f * edq.reshape(len(edq), -1)]
        return np.concatenate(parts, axis=1)
