"""The fit partition `<lake>/fits/fit=<fit_id>/`: writer (`publish_fit`) and reader (`load_fit`).

Files (the lake contract, docs/architecture.md and fit/README.md):

- `fit.parquet`: one row: fit_source, created_utc, status, best_loss, one float64 column per
  parameter named as `twinlake.sim.PARAM_NAMES`, seed (int64, nullable), settings_json,
  generations, population, refine_iterations, wall_s, train_loss, holdout_loss, at_bounds,
  workers, actor_replacements;
- `history.parquet`: one row per CMA-ES generation and per refinement iteration,
  FrankaTwin's history fields (iter, min, mean, best, iter_s, ms_per_tick, eta_s,
  per_traj_min, best_candidate_weighted) + sigma, evals_per_s, delay_probs, stage;
- `runs.parquet`: one row per (run, interval) used: robot, run, interval_index, seq_first,
  seq_last, role ('train' | 'holdout'), weight, loss, run_sha256 (an imported fit also has
  `IMPORT_RUN_FIELDS`: real_csv, num_samples, linked);
- `seeds.parquet` (twinlake fits): one row per seed of `fit run --seeds N`: seed, best_loss,
  chosen (the seed whose optimum is the fit), the 29 parameters by name;
- `profile.json`: the best parameters as a twinlake.profile/v1 (`twinlake.sim.save_profile`);
- `raw/`: the source files of an imported fit, byte for byte (`publish_fit(raw_files=...)`).

Every fit, run here or imported (`twinlake.fit.records.frankatwin_import`), is a `FitRecord` written
by `publish_fit`; that is the one writer of `fits/`.

`fit.parquet` of a twinlake fit also holds `identifiability_json` (error bars at the optimum,
`twinlake.fit.trust.identifiability.IdentifiabilityResult.to_json()`, with the free parameters' full
covariance in their units under `covariance` (`FitRecord.covariance`; absent in older fits);
null when nothing was free),
`seed_count` (how many seeded searches were run), the model adequacy at the optimum
(`twinlake.fit.trust.adequacy.fit_adequacy_columns`): `adequacy_json` (`{"train": …, "holdout": …}`,
each an `Adequacy.to_dict()`), `train_floor_ratio` and `holdout_floor_ratio` (q RMSE over the
estimated noise floor; null when not measurable or without holdout), and `configured_load_json`
(the firmware's configured end-effector load each train interval replayed with, by interval label).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import FitNotFound, RecordError
from ...catalog import Lake, publish_partition
from ...sim import LAYOUT, PARAM_NAMES, DynamicsParams, save_profile

HISTORY_SCHEMA = pa.schema(
    [
        ("iter", pa.int64()),
        ("min", pa.float64()),
        ("mean", pa.float64()),
        ("best", pa.float64()),
        ("iter_s", pa.float64()),
        ("ms_per_tick", pa.float64()),
        ("eta_s", pa.float64()),
        ("per_traj_min", pa.list_(pa.float64())),
        ("best_candidate_weighted", pa.list_(pa.float64())),
        ("sigma", pa.float64()),
        ("evals_per_s", pa.float64()),
        ("delay_probs", pa.list_(pa.float64())),
        ("stage", pa.string()),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        ("robot", pa.string()),
        ("run", pa.string()),
        ("interval_index", pa.int64()),
        ("seq_first", pa.int64()),
        ("seq_last", pa.int64()),
        ("role", pa.string()),
        ("weight", pa.float64()),
        ("loss", pa.float64()),
        ("run_sha256", pa.string()),
    ]
)

IMPORT_RUN_FIELDS = pa.schema([("real_csv", pa.string()), ("num_samples", pa.int64()), ("linked", pa.bool_())])
"""runs.parquet columns after RUNS_SCHEMA when some run has them (an imported fit's trajectory
list): the source CSV path, its sample count, and whether a lake run of that CSV stem exists."""


@dataclass
class IntervalUse:
    """One (run, interval) a fit used, its role, weight, loss at the best parameters and the
    SHA-256 of the run's raw file (provenance). An imported fit may know only the run (no
    interval: None) and adds `IMPORT_RUN_FIELDS` (None otherwise)."""

    robot: str | None
    run: str
    interval_index: int | None
    seq_first: int | None
    seq_last: int | None
    role: str  # 'train' | 'holdout'
    weight: float | None
    loss: float | None = None
    run_sha256: str | None = None
    real_csv: str | None = None
    num_samples: int | None = None
    linked: bool | None = None


SEEDS_SCHEMA = pa.schema(
    [("seed", pa.int64()), ("best_loss", pa.float64()), ("chosen", pa.bool_())]
    + [(name, pa.float64()) for name in PARAM_NAMES]
)


@dataclass
class SeedResult:
    """The best-ever result of one seeded search of a `--seeds N` fit: `params` (29,) as a
    vector (delay as float); `chosen` marks the seed whose optimum became the fit."""

    seed: int
    best_loss: float
    params: np.ndarray
    chosen: bool = False

    @property
    def vector(self) -> np.ndarray:
        """The (29,) parameter vector (the `seed_records` interface of identifiability)."""
        return np.asarray(self.params, dtype=np.float64)


@dataclass
class FitRecord:
    """A fit as stored in the lake. `params` are the best parameters; `history` is one dict per
    generation (HISTORY_SCHEMA fields); `settings` is the parsed settings_json; `seeds` one
    SeedResult per seeded search (empty for imports and older fits)."""

    fit_id: str
    fit_source: str
    created_utc: str
    status: str
    best_loss: float
    params: DynamicsParams
    seed: int | None
    settings: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    runs: list[IntervalUse] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    seeds: list[SeedResult] = field(default_factory=list)

    @property
    def train(self) -> list[IntervalUse]:
        return [r for r in self.runs if r.role == "train"]

    @property
    def holdout(self) -> list[IntervalUse]:
        return [r for r in self.runs if r.role == "holdout"]

    @property
    def vector(self) -> np.ndarray:
        """The (29,) parameter vector as stored (delay as float)."""
        return self.params.to_vector()

    @property
    def other_seeds(self) -> list[SeedResult]:
        """The seeds not chosen (pass as `seed_records` to identifiability_for_fit)."""
        return [s for s in self.seeds if not s.chosen]

    @property
    def friction_law(self) -> str:
        """The plant's friction law the fit's parameters mean (its space's; FrankaTwin's
        Stribeck law for a fit stored without one)."""
        return self.settings.get("space", {}).get("friction_law", "stribeck")

    @property
    def configured_loads(self) -> dict[str, dict]:
        """The configured end-effector load each train interval replayed with, by interval
        label (parsed configured_load_json; empty for a fit stored without it)."""
        text = self.extra.get("configured_load_json")
        return json.loads(text) if text else {}

    @property
    def identifiability(self) -> dict[str, Any] | None:
        """The stored error bars (parsed identifiability_json), None when absent."""
        text = self.extra.get("identifiability_json")
        return json.loads(text) if text else None

    @property
    def covariance(self) -> tuple[list[str], np.ndarray] | None:
        """The free parameters' names and their covariance (k, k) in the parameters' own units
        (identifiability_json's `covariance`); None for a fit stored without one (older fits,
        imports: per-parameter standard errors at most)."""
        block = (self.identifiability or {}).get("covariance")
        if not block or not block.get("names"):
            return None
        matrix = np.array([[np.nan if v is None else v for v in row] for row in block["matrix"]], dtype=np.float64)
        return list(block["names"]), matrix


def _fit_row(rec: FitRecord, param_vector: np.ndarray) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "fit_source": pa.array([rec.fit_source], pa.string()),
        "created_utc": pa.array([rec.created_utc], pa.string()),
        "status": pa.array([rec.status], pa.string()),
        "best_loss": pa.array([float(rec.best_loss)], pa.float64()),
    }
    for name, value in zip(PARAM_NAMES, np.asarray(param_vector, dtype=np.float64)):
        cols[name] = pa.array([float(value)], pa.float64())
    cols["seed"] = pa.array([rec.seed], pa.int64())
    cols["settings_json"] = pa.array([json.dumps(rec.settings, sort_keys=True)], pa.string())
    for key, value in rec.extra.items():
        if value is None:
            cols[key] = pa.array([None], pa.string() if key.endswith("_json") else pa.float64())
        elif isinstance(value, (list, tuple)):
            numbers = value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            cols[key] = pa.array([list(value)], pa.list_(pa.float64() if numbers else pa.string()))
        else:
            cols[key] = pa.array([value])
    return pa.table(cols)


def history_table(history: list[dict[str, Any]]) -> pa.Table:
    """history.parquet's table from one dict per generation (missing fields are null)."""
    return pa.Table.from_pylist(
        [{f.name: h.get(f.name) for f in HISTORY_SCHEMA} for h in history], schema=HISTORY_SCHEMA
    )


def runs_table(runs: list[IntervalUse]) -> pa.Table:
    """runs.parquet's table: RUNS_SCHEMA, then IMPORT_RUN_FIELDS when some run has one."""
    extra = [f for f in IMPORT_RUN_FIELDS if any(getattr(r, f.name) is not None for r in runs)]
    return pa.Table.from_pylist([vars(r) for r in runs], schema=pa.schema([*RUNS_SCHEMA, *extra]))


def seeds_table(seeds: list[SeedResult]) -> pa.Table:
    """seeds.parquet's table: one row per seed (SEEDS_SCHEMA)."""
    rows = []
    for s in seeds:
        row = {"seed": int(s.seed), "best_loss": float(s.best_loss), "chosen": bool(s.chosen)}
        row.update(zip(PARAM_NAMES, (float(v) for v in s.vector)))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SEEDS_SCHEMA)


PROFILE_PROVENANCE_EXTRAS = ("source_file", "source_sha256")
"""`extra` fields that also go into profile.json's provenance (an imported fit's source)."""


def write_fit_files(directory: Path, rec: FitRecord, param_vector: np.ndarray | None = None,
                    raw_files: Iterable[Path] = ()) -> None:
    """Write fit.parquet, history.parquet, runs.parquet, seeds.parquet (when there are
    seeds), profile.json and a copy of each of `raw_files` under raw/ into `directory`.

    `param_vector` (29,) overrides `rec.params.to_vector()` in fit.parquet (e.g. to keep an
    imported delay as written, out of range included); the profile always holds `rec.params`.
    """
    vec = rec.params.to_vector() if param_vector is None else np.asarray(param_vector, dtype=np.float64)
    pq.write_table(_fit_row(rec, vec), directory / "fit.parquet")
    pq.write_table(history_table(rec.history), directory / "history.parquet")
    pq.write_table(runs_table(rec.runs), directory / "runs.parquet")
    if rec.seeds:
        pq.write_table(seeds_table(rec.seeds), directory / "seeds.parquet")
    source = {k: rec.extra[k] for k in PROFILE_PROVENANCE_EXTRAS if rec.extra.get(k) is not None}
    save_profile(rec.params, directory / "profile.json", fit=rec.fit_id, fit_source=rec.fit_source,
                 created_utc=rec.created_utc, best_loss=rec.best_loss, **source)
    raw = list(raw_files)
    if raw:
        (directory / "raw").mkdir()
        for path in raw:
            shutil.copy2(path, directory / "raw" / Path(path).name)


def publish_fit(lake: Lake | str | Path, rec: FitRecord, *, replace: bool = False,
                param_vector: np.ndarray | None = None, raw_files: Iterable[Path] = ()) -> Path:
    """Publish `rec` atomically as `<lake>/fits/fit=<rec.fit_id>/` (`write_fit_files`);
    returns the partition path. `PartitionExists` when it is there and not `replace`."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    rel = lk.fit_dir(rec.fit_id).relative_to(lk.root)
    return publish_partition(lk, rel, lambda d: write_fit_files(d, rec, param_vector, raw_files),
                             replace=replace)


def _read_row(path: Path) -> dict[str, Any]:
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowInvalid) as exc:
        raise RecordError(f"{path}: cannot read fit row ({exc})") from None
    if len(rows) != 1:
        raise RecordError(f"{path}: expected exactly one row, found {len(rows)}")
    return rows[0]


def load_fit(lake: Lake | str | Path, fit_id: str) -> FitRecord:
    """Read `<lake>/fits/fit=<fit_id>/` back into a FitRecord (twinlake fits and FrankaTwin
    imports alike). ValueError naming the file and field when something is missing."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    directory = lk.fit_dir(fit_id)
    if not (directory / "fit.parquet").is_file():
        raise FitNotFound(f"fit {fit_id!r}: no {directory / 'fit.parquet'} (no such fit in this lake)")
    row = _with_later_groups(_read_row(directory / "fit.parquet"))
    missing = [n for n in ("fit_source", "best_loss", *PARAM_NAMES) if n not in row]
    if missing:
        raise RecordError(f"{directory / 'fit.parquet'}: missing column(s) {', '.join(missing)}")
    params = DynamicsParams.from_vector([row[n] for n in PARAM_NAMES])
    try:
        settings = json.loads(row.get("settings_json") or "{}")
    except json.JSONDecodeError as exc:
        raise RecordError(f"{directory / 'fit.parquet'}: settings_json is not JSON ({exc.msg})") from None
    history = pq.read_table(directory / "history.parquet").to_pylist() if (directory / "history.parquet").is_file() else []
    runs = []
    if (directory / "runs.parquet").is_file():
        for r in pq.read_table(directory / "runs.parquet").to_pylist():
            runs.append(IntervalUse(**{k: r.get(k) for k in (*RUNS_SCHEMA.names, *IMPORT_RUN_FIELDS.names)}))
    seeds = _read_seeds(directory / "seeds.parquet")
    known = {"fit_source", "created_utc", "status", "best_loss", "seed", "settings_json", "fit", *PARAM_NAMES}
    return FitRecord(
        fit_id=fit_id,
        fit_source=row["fit_source"],
        created_utc=row.get("created_utc") or "",
        status=row.get("status") or "",
        best_loss=float(row["best_loss"]) if row["best_loss"] is not None else float("nan"),
        params=params,
        seed=row.get("seed"),
        settings=settings,
        history=history,
        runs=runs,
        extra={k: v for k, v in row.items() if k not in known},
        path=directory,
        seeds=seeds,
    )


def _read_seeds(path: Path) -> list[SeedResult]:
    if not path.is_file():
        return []
    return [SeedResult(int(r["seed"]), float(r["best_loss"]), np.array([r[n] for n in PARAM_NAMES], dtype=np.float64),
                       bool(r["chosen"]))
            for r in map(_with_later_groups, pq.read_table(path).to_pylist())]


def _with_later_groups(row: dict[str, Any]) -> dict[str, Any]:
    """A row written before a frozen-by-default group existed (e.g. the delay offsets) gets
    that group's nominal values, as the fit held them."""
    for i, value in LAYOUT.default_frozen.items():
        row.setdefault(PARAM_NAMES[i], value)
    return row


def list_fits(lake: Lake | str | Path) -> list[str]:
    """Fit ids present in the lake, sorted."""
    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    if not lk.fits_dir.is_dir():
        return []
    return sorted(p.name[4:] for p in lk.fits_dir.glob("fit=*") if (p / "fit.parquet").is_file())
