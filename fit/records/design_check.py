"""A designed excitation's promise checked: the half-widths `twinlake excite --design`
predicted beside the ones a fit on the recorded run realised.

`twinlake excite --design` stores, in its directory's metadata.json, a `design` section with
the predicted relative 95 % half-width of each chosen parameter, linearised at a fit or the
nominal profile: by default from one replay Jacobian of the design and the fit's own HAC rule
(`prediction` = "replay_jacobian_hac"), with `--no-confirm` the surrogate's ("surrogate"). A recording ingested with that directory keeps the metadata in
`runs.metadata_json`; a fit trained on such runs gets, per designed parameter, the realised
relative half-width of its stored 95 % interval: (high − low) / 2 / |estimate| (by the bound
width where the estimate is 0, as the design's prediction scales it). `relative_half_width` is
the one owner of that rule (`fit report`'s parameter table uses it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import RecordError

@dataclass(frozen=True)
class HalfWidthCheck:
    """One designed parameter: predicted and realised relative 95 % half-widths (fractions;
    realised None when the fit has no stderr for it), and whether the fit is at a bound (its
    stderr then assumes an interior optimum it does not have)."""

    name: str
    predicted_rel: float
    realised_rel: float | None
    at_bound: bool


@dataclass(frozen=True)
class DesignCheck:
    """The design of training run `robot/run` against the fit."""

    robot: str
    run: str
    criterion: str
    linearised_at: str
    parameters: tuple[HalfWidthCheck, ...]
    prediction: str = "surrogate"  # how the design predicted: replay_jacobian_hac or surrogate

    @property
    def worst_predicted_rel(self) -> float:
        return max(p.predicted_rel for p in self.parameters)

    @property
    def worst_realised_rel(self) -> float | None:
        """Worst realised over the parameters with a stderr (None if none has one)."""
        values = [p.realised_rel for p in self.parameters if p.realised_rel is not None]
        return max(values) if values else None

    def to_json(self) -> dict:
        return {"robot": self.robot, "run": self.run, "criterion": self.criterion, "prediction": self.prediction,
                "linearised_at": self.linearised_at, "worst_predicted_rel": self.worst_predicted_rel,
                "worst_realised_rel": self.worst_realised_rel,
                "parameters": [p.__dict__ for p in self.parameters]}


def relative_half_width(low: float | None, high: float | None, value: float, lower_bound: float,
                        upper_bound: float) -> float | None:
    """(high − low) / 2 / |value| of a 95 % interval, by the bound width where the value is 0;
    None without an interval or a scale."""
    if low is None or high is None:
        return None
    scale = abs(value) or (upper_bound - lower_bound)
    return (high - low) / 2.0 / scale if scale > 0 else None


def realised_half_widths(identifiability: dict | None) -> dict[str, tuple[float | None, bool]]:
    """name → (relative 95 % half-width or None, at a bound) for every free parameter of a
    fit's stored identifiability (`ci95_low`, `ci95_high`, `value`, bounds, `flags`)."""
    out = {}
    for p in (identifiability or {}).get("parameters", []):
        if not p.get("free"):
            continue
        rel = relative_half_width(p.get("ci95_low"), p.get("ci95_high"), float(p.get("value") or 0.0),
                                  float(p.get("lower_bound") or 0.0), float(p.get("upper_bound") or 0.0))
        out[p["name"]] = (rel, "at_bound" in (p.get("flags") or []))
    return out


def check_design(section: dict, identifiability: dict | None, robot: str, run: str) -> DesignCheck:
    """The design `section` (metadata.json's "design") of run robot/run against a fit's stored
    identifiability. Raises ValueError naming the run if the section has no predictions."""
    predicted = section.get("predicted_half_width_rel")
    if not isinstance(predicted, dict) or not predicted:
        raise RecordError(f"{robot}/{run}: metadata design section has no predicted_half_width_rel")
    realised = realised_half_widths(identifiability)
    rows = tuple(HalfWidthCheck(name, float("inf") if pred is None else float(pred), *realised.get(name, (None, False)))
                 for name, pred in predicted.items())  # None: a confirmation found no finite interval
    return DesignCheck(robot, run, str(section.get("criterion", "")), str(section.get("linearised_at", "")), rows,
                       str(section.get("prediction", "surrogate")))


def train_designs(lake: Path, rec) -> dict[str, dict]:
    """The `design` section of each of fit `rec`'s train runs whose metadata has one, by
    "robot/run" (sorted); {} when no train run was a designed excitation."""
    from ..core.objective import run_metadata

    runs = sorted({(u.robot, u.run) for u in rec.train}, key=lambda r: (str(r[0]), str(r[1])))
    out = {}
    for (robot, run), meta in zip(runs, run_metadata(lake, runs)):
        design = (meta or {}).get("design")
        if isinstance(design, dict) and isinstance(design.get("predicted_half_width_rel"), dict):
            out[f"{robot}/{run}"] = design
    return out


def fit_design_checks(lake: Path, rec) -> list[DesignCheck]:
    """One check per designed train run of fit `rec` (see `train_designs`)."""
    checks = []
    for key, section in train_designs(lake, rec).items():
        robot, run = key.split("/", 1)
        checks.append(check_design(section, rec.identifiability, robot, run))
    return checks


def design_lines(check: DesignCheck) -> list[str]:
    """Plain-text lines for `fit show`: one parameter a line, then the worst of each."""
    how = "replay Jacobian, HAC" if check.prediction == "replay_jacobian_hac" else "surrogate"
    lines = [f"designed excitation {check.robot}/{check.run} (criterion {check.criterion}, linearised at "
             f"{check.linearised_at}): relative 95 % half-width predicted ({how}) / realised"]
    for p in check.parameters:
        realised = "no stderr" if p.realised_rel is None else f"{p.realised_rel:.2%}"
        lines.append(f"  {p.name:<22}{p.predicted_rel:>10.2%}  {realised:>10}{'  at a bound' if p.at_bound else ''}")
    worst = check.worst_realised_rel
    ratio = "" if worst is None else f" ({worst / check.worst_predicted_rel:.2f}× the prediction)"
    lines.append(f"  worst: predicted {check.worst_predicted_rel:.2%}, realised "
                 f"{'unknown' if worst is None else f'{worst:.2%}'}{ratio}")
    return lines
