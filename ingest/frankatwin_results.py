"""FrankaTwin result files → lake partitions that are not runs.

- `sysid_best_params.json` (specs/frankatwin.md §3.5) → `<lake>/fits/fit=ft-<sha16>/`:
  `fit.parquet` (one row, `fit_source = 'frankatwin_import'`, the 29 parameters named as
  `twinlake.sim.PARAM_NAMES`), `history.parquet` (one row per iteration), `runs.parquet` (one
  row per source trajectory), `profile.json` (`twinlake.sim.save_profile`), `raw/`.
- `metrics.json` (§4) → `<lake>/validations/validation=ftm-<sha16>/`: `validation.parquet`
  (one row) and the `metrics.json` file itself. It is linked to the real run it compares
  (`run`, when a run of that CSV stem is in the lake) and to the imported fit (`fit`, when
  its `sysid_params` file is found and hashed).

Ids derive from the file's SHA-256, so re-importing the same bytes is a no-op.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from twinlake.catalog import Lake, PartitionExists, publish_partition, sha256_file
from twinlake.ingest.frankatwin_io import dumps, load_json, try_json
from twinlake.ingest.registry import Detection, IngestError, ReadOptions, register

FIT_SOURCE = "frankatwin_import"
HISTORY_FLOATS = ("min", "mean", "best", "iter_s", "ms_per_tick", "eta_s")


@dataclass(frozen=True)
class ImportResult:
    """What an import did: `kind` ('fit' | 'validation'), partition id and path, whether it
    already existed (`existed`, a no-op), and the links it made."""

    kind: str
    partition_id: str
    path: Path
    existed: bool
    links: dict[str, Any]


def result_kind(path: Path) -> tuple[str | None, str]:
    """'fit' for a sysid_best_params.json body, 'validation' for a metrics.json body, with
    the reason (from content: keys present), else (None, why not)."""
    body = try_json(path) if path.is_file() and path.suffix == ".json" else None
    if not isinstance(body, dict):
        return None, "not a JSON object"
    if isinstance(body.get("best_params_decoded"), dict) and "best_score" in body:
        return "fit", "has best_score + best_params_decoded (FrankaTwin sysid_best_params.json)"
    if body.get("schema_version") == 1 and {"real_csv", "sim_csv", "ee"} <= body.keys():
        return "validation", "has real_csv, sim_csv, ee (FrankaTwin metrics.json)"
    return None, "neither sysid_best_params.json (best_params_decoded) nor metrics.json keys"


def _utc_mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat()


def fit_row(path: Path, body: dict) -> dict[str, Any]:
    """`fit.parquet` row from a sysid_best_params.json body (IngestError on bad fields)."""
    dec = body.get("best_params_decoded")
    row: dict[str, Any] = {"fit_source": FIT_SOURCE, "created_utc": _utc_mtime(path),
                           "status": "imported"}
    score = body.get("best_score")
    if not isinstance(score, (int, float)):
        raise IngestError(path, f"expected a number, got {score!r}", field="best_score")
    row["best_loss"] = float(score)
    row.update(decoded_values(path, dec))
    args = body.get("args") if isinstance(body.get("args"), dict) else {}
    row["seed"] = args.get("seed") if isinstance(args.get("seed"), int) else None
    row["settings_json"] = dumps({"args": args, "bounds": body.get("bounds"),
                                  "source": body.get("source")})
    row["best_params_raw"] = [float(v) for v in body.get("best_params_raw") or []] or None
    row["source_file"] = path.name
    row["source_sha256"] = sha256_file(path)
    return row


def decoded_values(path: Path, dec: dict) -> dict[str, float]:
    """The parameters of a `best_params_decoded` block by name (`twinlake.sim.LAYOUT`: names,
    order, FrankaTwin's keys; `dynamic_ratio` derived from `mu_dynamic` when only that is
    given; the delay's whole ticks as written). IngestError naming the field otherwise."""
    from twinlake.sim import LAYOUT

    values: list[float] = []
    for group in LAYOUT.groups:
        field = f"best_params_decoded.{group.frankatwin_key}"
        try:
            vec = LAYOUT.block_value(dec, group.name, frankatwin=True)
        except ValueError as exc:
            raise IngestError(path, str(exc), field=field) from None
        if not group.per_joint:
            kind = "an integer" if group.integer else "a number"
            if not isinstance(vec, (int, float)):
                raise IngestError(path, f"expected {kind}, got {vec!r}", field=field)
            values.append(float(int(vec)) if group.integer else float(vec))  # whole 1 ms ticks
        elif not isinstance(vec, list) or len(vec) != group.size:
            raise IngestError(path, f"expected a list of {group.size} numbers, got {vec!r:.60}", field=field)
        else:
            values += [float(v) for v in vec]
    return dict(zip(LAYOUT.names, values))


def history_table(body: dict) -> pa.Table:
    """`history.parquet`: FrankaTwin's per-iteration entries, typed."""
    hist = [h for h in body.get("history") or [] if isinstance(h, dict)]
    cols: dict[str, pa.Array] = {"iter": pa.array([h.get("iter") for h in hist], pa.int64())}
    for key in HISTORY_FLOATS:
        cols[key] = pa.array([_f(h.get(key)) for h in hist], pa.float64())
    for key in ("per_traj_min", "best_candidate_weighted"):
        cols[key] = pa.array([[_f(v) for v in h.get(key) or []] for h in hist],
                             pa.list_(pa.float64()))
    return pa.table(cols)


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _find_run(lake: Lake, stem: str, robot: str | None) -> tuple[str | None, str | None]:
    """(robot, run) of the lake run named `stem` (if exactly one robot has it)."""
    pattern = f"robot={robot}/run={stem}" if robot else f"robot=*/run={stem}"
    found = sorted(lake.runs_dir.glob(pattern)) if lake.runs_dir.is_dir() else []
    if len(found) == 1:
        return found[0].parent.name.removeprefix("robot="), stem
    return robot, None


def runs_table(lake: Lake, body: dict, robot: str | None) -> pa.Table:
    """`runs.parquet`: one row per source trajectory, linked to a lake run by CSV stem."""
    trajs = ((body.get("source") or {}).get("trajectories")) or []
    rows = []
    for traj in trajs:
        stem = Path(str(traj.get("real_csv") or "")).stem
        r_robot, r_run = _find_run(lake, stem, robot)
        sha = None
        if r_run is not None:
            run_pq = lake.run_dir(r_robot, r_run) / "run.parquet"
            if run_pq.is_file():
                tbl = pq.read_table(run_pq)
                if "raw_sha256" in tbl.column_names:
                    sha = tbl["raw_sha256"][0].as_py()
        rows.append({"robot": r_robot, "run": r_run or stem, "interval_index": None,
                     "seq_first": None, "seq_last": None, "role": "train",
                     "weight": _f(traj.get("weight")), "loss": None, "run_sha256": sha,
                     "real_csv": traj.get("real_csv"), "num_samples": traj.get("num_samples"),
                     "linked": r_run is not None})
    schema = pa.schema([("robot", pa.string()), ("run", pa.string()),
                        ("interval_index", pa.int64()), ("seq_first", pa.int64()),
                        ("seq_last", pa.int64()), ("role", pa.string()), ("weight", pa.float64()),
                        ("loss", pa.float64()), ("run_sha256", pa.string()),
                        ("real_csv", pa.string()), ("num_samples", pa.int64()),
                        ("linked", pa.bool_())])
    return pa.Table.from_pylist(rows, schema=schema)


def import_fit(lake: Lake, path: Path, robot: str | None = None, *,
               replace: bool = False) -> ImportResult:
    """Publish a FrankaTwin `sysid_best_params.json` as fit `ft-<sha16>`."""
    from twinlake.sim import load_params, save_profile

    body = load_json(path)
    if result_kind(path)[0] != "fit":
        raise IngestError(path, "not a sysid_best_params.json (no best_params_decoded)")
    row = fit_row(path, body)
    fit_id = "ft-" + row["source_sha256"][:16]
    hist, runs = history_table(body), runs_table(lake, body, robot)
    try:
        params = load_params(path)
    except ValueError as exc:
        raise IngestError(path, str(exc)) from None

    def write(stage: Path) -> None:
        pq.write_table(pa.Table.from_pylist([row]), stage / "fit.parquet")
        pq.write_table(hist, stage / "history.parquet")
        pq.write_table(runs, stage / "runs.parquet")
        save_profile(params, stage / "profile.json", fit=fit_id, fit_source=FIT_SOURCE,
                     source_file=path.name, source_sha256=row["source_sha256"])
        (stage / "raw").mkdir()
        shutil.copy2(path, stage / "raw" / path.name)

    return _publish(lake, f"fits/fit={fit_id}", write, "fit", fit_id, replace,
                    {"runs": [r for r in runs["run"].to_pylist()]})


def validation_row(lake: Lake, path: Path, body: dict, robot: str | None) -> dict[str, Any]:
    """`validation.parquet` row from a metrics.json body, with its run and fit links."""
    ee = body.get("ee") or {}
    joints = body.get("joints") or {}
    real_stem = Path(str(body.get("real_csv") or "")).stem
    v_robot, v_run = _find_run(lake, real_stem, robot)
    sim_run = _find_run(lake, Path(str(body.get("sim_csv") or "")).stem, v_robot)[1]
    fit = None
    params_ref = body.get("sysid_params")
    if isinstance(params_ref, str):
        for cand in (Path(params_ref), path.parent / params_ref, path.parent / Path(params_ref).name):
            if cand.is_file():
                fit = "ft-" + sha256_file(cand)[:16]
                break
    return {
        "validation_source": FIT_SOURCE, "created_utc": body.get("created_utc"),
        "robot": v_robot, "run": v_run, "fit": fit,
        "sim_label": Path(str(body.get("sim_csv") or "")).name or None,
        "num_samples": body.get("num_samples"), "duration_s": _f(body.get("duration_s")),
        "ee_pos_rmse_3d_m": _f(((ee.get("pos") or {}).get("rmse_m") or {}).get("3d")),
        "ee_ori_rmse_rad": _f((ee.get("ori") or {}).get("rmse_rad")),
        "q_rmse_all_rad": _f(joints.get("pos_rmse_all_rad")),
        "dq_rmse_all_rad_s": _f(joints.get("vel_rmse_all_rad_s")),
        "q_rmse_rad": [_f(v) for v in joints.get("pos_rmse_rad") or []] or None,
        "verdict": None, "thresholds_json": None,
        "metrics_json": json.dumps(body, indent=2),
        "real_csv": body.get("real_csv"), "sim_csv": body.get("sim_csv"), "sim_run": sim_run,
        "sysid_params": params_ref, "source_sha256": sha256_file(path),
    }


VALIDATION_SCHEMA = pa.schema([
    ("validation_source", pa.string()), ("created_utc", pa.string()), ("robot", pa.string()),
    ("run", pa.string()), ("fit", pa.string()), ("sim_label", pa.string()),
    ("num_samples", pa.int64()), ("duration_s", pa.float64()),
    ("ee_pos_rmse_3d_m", pa.float64()), ("ee_ori_rmse_rad", pa.float64()),
    ("q_rmse_all_rad", pa.float64()), ("dq_rmse_all_rad_s", pa.float64()),
    ("q_rmse_rad", pa.list_(pa.float64())), ("verdict", pa.string()),
    ("thresholds_json", pa.string()), ("metrics_json", pa.string()), ("real_csv", pa.string()),
    ("sim_csv", pa.string()), ("sim_run", pa.string()), ("sysid_params", pa.string()),
    ("source_sha256", pa.string())])


def import_validation(lake: Lake, path: Path, robot: str | None = None, *,
                      replace: bool = False) -> ImportResult:
    """Publish a FrankaTwin `metrics.json` as validation `ftm-<sha16>`."""
    body = load_json(path)
    if result_kind(path)[0] != "validation":
        raise IngestError(path, "not a FrankaTwin metrics.json (real_csv, sim_csv, ee expected)")
    row = validation_row(lake, path, body, robot)
    vid = "ftm-" + row["source_sha256"][:16]

    def write(stage: Path) -> None:
        pq.write_table(pa.Table.from_pylist([row], schema=VALIDATION_SCHEMA),
                       stage / "validation.parquet")
        shutil.copy2(path, stage / "metrics.json")

    return _publish(lake, f"validations/validation={vid}", write, "validation", vid, replace,
                    {"run": row["run"], "fit": row["fit"], "robot": row["robot"],
                     "sim_run": row["sim_run"]})


def _publish(lake: Lake, rel: str, write, kind: str, pid: str, replace: bool,
             links: dict) -> ImportResult:
    try:
        target = publish_partition(lake, rel, write, replace=replace)
        return ImportResult(kind, pid, target, False, links)
    except PartitionExists as exc:
        return ImportResult(kind, pid, exc.path, True, links)


def import_result(lake: Lake, path: Path, robot: str | None = None, *,
                  replace: bool = False) -> ImportResult:
    """Import a FrankaTwin result file by its content (fit or validation)."""
    kind, why = result_kind(path)
    if kind == "fit":
        return import_fit(lake, path, robot, replace=replace)
    if kind == "validation":
        return import_validation(lake, path, robot, replace=replace)
    raise IngestError(path, f"not a FrankaTwin result file: {why}")


def result_files(paths: list[Path]) -> list[Path]:
    """The FrankaTwin result files among `paths` (directories searched recursively), fits
    first, then validations, each sorted by path."""
    found: list[tuple[int, Path]] = []
    for path in map(Path, paths):
        cands = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for cand in cands:
            kind = result_kind(cand)[0]
            if kind is not None:
                found.append((0 if kind == "fit" else 1, cand))
    return [p for _, p in sorted(found)]


def import_results(lake: Lake, paths: list[Path], robot: str | None = None, *,
                   replace: bool = False):
    """Import every result file found; yields one dict per file (`ok`, `message`, ...).
    A path that is a file but not a result file yields an error naming why."""
    files = result_files(paths)
    for path in map(Path, paths):
        if path.is_file() and path not in files:
            yield {"ok": False, "path": str(path), "message": f"error: {path.name}: "
                   f"not a FrankaTwin result file ({result_kind(path)[1]})"}
    for path in files:
        try:
            res = import_result(lake, path, robot, replace=replace)
        except IngestError as err:
            yield {"ok": False, "path": str(path), "message": f"error: {err}"}
            continue
        verb = "already imported" if res.existed else "imported"
        yield {"ok": True, "path": str(path), "kind": res.kind, "id": res.partition_id,
               "partition": str(res.path), "existed": res.existed, "links": res.links,
               "message": f"{path.name}: {verb} {res.kind} {res.partition_id} {res.links}"}


class ResultFileHint:
    """Never matches: FrankaTwin result files are not runs. Its `detect` reason tells a user
    who passes one to `twinlake ingest` to use `twinlake import frankatwin` instead."""

    name = "frankatwin_result"

    def detect(self, path: Path) -> Detection:
        kind, why = result_kind(path) if path.is_file() else (None, "not a file")
        if kind is None:
            return Detection.no(why)
        return Detection.no(f"a FrankaTwin {'fit' if kind == 'fit' else 'metrics'} result "
                            "file, not a run: use `twinlake import frankatwin`")

    def read(self, path: Path, options: ReadOptions):
        raise IngestError(path, "not a run: use `twinlake import frankatwin`")


register(ResultFileHint())
