"""Model adequacy: does a replay explain a recording to its noise floor, and if not, why not?

`assess(segments, ...)` compares the joint position residual of a replay with the noise floor
estimated from the same recording (fit/core/noise_floor.py), per joint and in total, and looks for
structure in the residual `r = q_real − q_sim` (rad) that names a likely cause. Each candidate
structure is fitted to r alone by least squares and scored by the share of the residual power
above the noise floor it removes (`explained`, 0..1):

- `bias`: a constant per joint (an offset: calibration, encoder, an unmodelled static load);
- `payload`: the gravity torque a point mass at the flange would add along the recorded q
  (MuJoCo site Jacobian, `τ = Jₚᵀ·(0, 0, −9.81)` N·m per kg; joint-impedance runs only). One mass for
  all joints, in kg: > 0 the robot carries a load the model (and the firmware's gravity
  compensation) lacks, < 0 it compensates more than it carries;
- `friction`: the sign of the sim's velocity, per joint (Coulomb friction off by N·m);
- `viscous`: the sim's velocity, per joint (N·m·s/rad); `inertia`: its acceleration (kg·m²);
- `delay`: the rate of the sim's commanded torque, one coefficient (the motor delay off by ms);
- `time_shift`: the shift (±`MAX_SHIFT_MS`) of the whole sim that best aligns it with the
  recording (a clock or time-base offset).

Each torque shape is seen through the joint's closed impedance loop (fit/trust/signatures.py), so
the values are the linearised, one-joint-at-a-time amounts: they name the cause and its order
of magnitude, they are not a fit. With a residual under `EXCESS_RATIO`× the floor nothing is
diagnosed (what structure there is, is noise).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import DataError
from ..core.noise_floor import NoiseFloor, estimate_noise_floor
from ..core.residual import GRAVITY_STEP_S, MAX_SHIFT_MS, STILL_RAD_S, ResidualSegment, Signature  # noqa: F401 (public here too)

DEFAULT_MAX_FLOOR_RATIO = 3.0  # the verdict's default limit on residual / noise floor
EXCESS_RATIO = 1.5  # below this multiple of the floor the residual is not diagnosed
LIKELY_SHARE = 0.5  # a structure explaining this share of the excess is "the likely cause"
PARTLY_SHARE = 0.2  # ... this share: mentioned as a contributing structure
ALSO_BELOW = 0.8  # a cause explaining less than this: up to two other structures are named too
PAYLOAD_OVER_BIAS = 0.8  # one mass explaining this much of what 7 offsets do: the bias is the payload
@dataclass
class Adequacy:
    """A replay's q residual against the recording's noise floor, and its structure."""

    floor: NoiseFloor
    q_rmse_rad: np.ndarray  # (7,)
    q_rmse_all_rad: float
    samples: int
    signatures: list[Signature] = field(default_factory=list)
    dq_rmse_all_rad_s: float | None = None
    max_floor_ratio: float | None = DEFAULT_MAX_FLOOR_RATIO

    @property
    def ratio(self) -> np.ndarray:
        """(7,) per-joint q RMSE / σ (inf where σ is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.q_rmse_rad / self.floor.q_rad

    @property
    def ratio_all(self) -> float:
        """q RMSE over all joints / RMS of the per-joint floors."""
        total = self.floor.q_total_rad
        return self.q_rmse_all_rad / total if total > 0 else math.inf

    @property
    def dq_ratio_all(self) -> float | None:
        if self.dq_rmse_all_rad_s is None or self.floor.dq_rad_s is None:
            return None
        total = float(np.sqrt(np.mean(np.square(self.floor.dq_rad_s))))
        return self.dq_rmse_all_rad_s / total if total > 0 else None

    @property
    def cause(self) -> Signature | None:
        """The likely cause: the structure explaining most of the excess (≥ PARTLY_SHARE),
        the flange mass instead of per-joint offsets when one mass does nearly as well. None
        when the residual is within EXCESS_RATIO× the floor (nothing to explain)."""
        if not self.floor.measurable or not self.ratio_all >= EXCESS_RATIO:
            return None
        if not self.signatures or self.signatures[0].explained < PARTLY_SHARE:
            return None
        top = self.signatures[0]
        payload = next((s for s in self.signatures if s.name == "payload"), None)
        if top.name == "bias" and payload is not None and payload.explained >= PAYLOAD_OVER_BIAS * top.explained:
            return payload
        return top

    def cause_text(self) -> str:
        """The likely cause in words (with a hint), or why none is named."""
        if not self.floor.measurable:
            return ""
        if self.ratio_all < EXCESS_RATIO:
            return ""
        cause = self.cause
        if cause is None:
            return ("no simple structure (offset, flange mass, velocity sign, velocity, acceleration, torque rate, "
                    "time shift) explains the residual: the model misses something else")
        word = "likely" if cause.explained >= LIKELY_SHARE else "partly"
        share = f"{100 * cause.explained:.0f} % of the excess, {word}"
        bias = next((s for s in self.signatures if s.name == "bias"), None)
        if cause.name == "payload" and bias is not None and bias.joints:
            joints = "/".join(f"J{j}" for j in bias.joints)
            mass = cause.values["mass_kg"]
            text = (f"bias on {joints} correlates with flange-mass gravity (a {mass:.3g} kg point mass at the flange "
                    f"explains {share}): {cause.hint}")
        else:
            text = f"{cause.text} ({share}): {cause.hint}"
        skip = {cause.name, "bias"} if cause.name == "payload" else {cause.name}
        others = [s for s in self.signatures if s.name not in skip and s.explained >= PARTLY_SHARE][:2] \
            if cause.explained < ALSO_BELOW else []
        if others:
            text += "; also " + ", ".join(
                f"{s.name}{' on ' + '/'.join(f'J{j}' for j in s.joints) if s.joints else ''} "
                f"({100 * s.explained:.0f} %)" for s in others)
        return text

    def verdict(self) -> tuple[str | None, str]:
        """('pass' | 'fail' | None when no limit is set, the reason in words)."""
        limit = self.max_floor_ratio
        if limit is None:
            return None, ""
        if not math.isfinite(self.q_rmse_all_rad):
            return "fail", "q residual not finite (the replay went unstable)"
        if not self.floor.measurable:
            return "fail", (f"q residual against the noise floor: not measurable ({self.floor.reason}), "
                            f"limit {limit:g}×")
        r = self.ratio_all
        bound = "≥ " if self.floor.upper_bound else ""
        if r > limit:
            return "fail", f"q residual {bound}{r:.3g}× the noise floor > {limit:g}×"
        if self.floor.upper_bound:
            joints = "/".join(f"J{j}" for j in self.floor.signal_limited)
            return "fail", (f"q residual ≥ {r:.3g}× the noise floor: the floor is only an upper bound here "
                            f"(motion leaks into the high-frequency part of q on {joints}), "
                            f"limit {limit:g}× not shown")
        return "pass", ""

    def line(self, role: str = "held-out", subject: str = "this run") -> str:
        """One line for the top of `fit show` / the report / `fit validate`."""
        mrad = 1e3 * self.q_rmse_all_rad
        if not math.isfinite(mrad):
            return f"{role} replay went unstable (non-finite q): the model does not explain {subject}"
        if not self.floor.measurable:
            return (f"{role} residual {mrad:.3g} mrad; noise floor not measurable ({self.floor.reason}): "
                    f"cannot show the model explains {subject}")
        r, limit = self.ratio_all, self.max_floor_ratio
        bound = "≥ " if self.floor.upper_bound else ""
        head = (f"{role} residual {bound}{r:.3g}× the noise floor ({mrad:.3g} mrad; floor "
                f"{1e3 * self.floor.q_total_rad:.3g} mrad)")
        cause = self.cause_text()
        if limit is None:
            return f"{head}, no limit declared" + (f"; {cause}" if cause else "")
        if r > limit:
            return f"{head}: the model does not explain {subject}" + (f"; {cause}" if cause else "")
        if self.floor.upper_bound:
            return f"{head}: the noise floor is only an upper bound here, adequacy (limit {limit:g}×) not shown"
        return f"{head}, within {limit:g}×: the model explains {subject}" + (
            f"; remaining structure: {cause}" if cause else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (non-finite numbers become None); `adequacy_from_dict` reads it back."""
        verdict, reason = self.verdict()
        return _finite({
                "floor": self.floor.to_dict(), "q_rmse_rad": self.q_rmse_rad.tolist(),
                "q_rmse_all_rad": self.q_rmse_all_rad, "ratio": self.ratio.tolist(), "ratio_all": self.ratio_all,
                "dq_rmse_all_rad_s": self.dq_rmse_all_rad_s, "dq_ratio_all": self.dq_ratio_all,
                "samples": self.samples, "max_floor_ratio": self.max_floor_ratio, "verdict": verdict,
                "reason": reason, "cause": None if self.cause is None else self.cause.name,
                "cause_text": self.cause_text(), "line": self.line(),
                "signatures": [s.to_dict() for s in self.signatures]})


def _finite(value: Any) -> Any:
    """Plain JSON values: floats non-finite -> None, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def assess(segments: Sequence[ResidualSegment], params, *, model=None,
           max_floor_ratio: float | None = DEFAULT_MAX_FLOOR_RATIO, floor: NoiseFloor | None = None) -> Adequacy:
    """Residual RMS against the noise floor of the recorded q of `segments` replayed with
    `params` (DynamicsParams), with the residual's structure. `model`: the MjModel of the
    replay (load_model's; the bundled FR3 when None). `floor`: a precomputed floor of the same
    samples."""
    from .signatures import residual_signatures

    if not segments:
        raise DataError("model adequacy: no samples to assess")
    floor = floor or estimate_noise_floor([s.q_real_rad for s in segments],
                                          [s.dq_real_rad_s for s in segments if s.dq_real_rad_s is not None] or None)
    res = np.concatenate([s.q_real_rad - s.q_sim_rad for s in segments])
    ms = np.mean(res ** 2, axis=0)
    dq_rmse = None
    if all(s.dq_real_rad_s is not None and s.dq_sim_rad_s is not None for s in segments):
        dres = np.concatenate([s.dq_sim_rad_s - s.dq_real_rad_s for s in segments])
        dq_rmse = float(np.sqrt(np.mean(dres ** 2)))
    out = Adequacy(floor, np.sqrt(ms), float(np.sqrt(np.mean(ms))), int(len(res)), [], dq_rmse, max_floor_ratio)
    if floor.measurable and np.all(np.isfinite(res)):
        out.signatures = residual_signatures(segments, floor, armature=params.armature,
                                             viscous=params.mu_viscous, model=model)
    return out


def adequacy_from_dict(d: dict[str, Any]) -> Adequacy:
    """Rebuild an Adequacy from its stored dict (the signatures as stored)."""
    sigs = [Signature(s["name"], float(s["explained"]), tuple(s["joints"]), s["values"], s["text"])
            for s in d.get("signatures", [])]
    q = np.array([np.nan if v is None else v for v in d["q_rmse_rad"]], dtype=np.float64)
    total = d.get("q_rmse_all_rad")
    return Adequacy(NoiseFloor.from_dict(d["floor"]), q, math.nan if total is None else float(total),
                    int(d["samples"]), sigs, d.get("dq_rmse_all_rad_s"), d.get("max_floor_ratio"))


def problem_adequacy(data, vector: np.ndarray, *, max_floor_ratio: float | None = DEFAULT_MAX_FLOOR_RATIO) -> Adequacy:
    """Adequacy of the parameters `vector` (29,) on a fit's `ProblemData` (fit/core/objective.py):
    every interval replayed once in-process, the floor pooled over all of them."""
    from ...sim import DynamicsParams, PopulationEngine, load_model

    model = load_model(data.model_path) if data.model_path else None
    vec = np.asarray(vector, dtype=np.float64)
    results = PopulationEngine(data.inputs, model=model, nthread=1, friction_law=data.friction_law).run(vec[None])
    segments = [ResidualSegment.from_replay(inp, r.q[0], r.dq[0], r.tau_cmd[0]) for inp, r in zip(data.inputs, results)]
    return assess(segments, DynamicsParams.from_vector(vec), model=model, max_floor_ratio=max_floor_ratio)


def fit_adequacy_columns(train_data, holdout_data, vector: np.ndarray) -> dict[str, Any]:
    """The fit.parquet columns of a fit's adequacy at its optimum `vector`: `adequacy_json`
    ({"train": Adequacy.to_dict(), "holdout": ... or None}), `train_floor_ratio` and
    `holdout_floor_ratio` (None when not measurable or no holdout)."""
    parts = {"train": problem_adequacy(train_data, vector),
             "holdout": problem_adequacy(holdout_data, vector) if holdout_data is not None else None}

    def ratio(a: Adequacy | None) -> float | None:
        return a.ratio_all if a is not None and a.floor.measurable and math.isfinite(a.ratio_all) else None

    doc = {k: None if a is None else a.to_dict() for k, a in parts.items()}
    return {"adequacy_json": json.dumps(doc, allow_nan=False, sort_keys=True),
            "train_floor_ratio": ratio(parts["train"]), "holdout_floor_ratio": ratio(parts["holdout"])}

