"""What `twinlake fit report` shows, gathered from the lake: the fit's record and error bars, its
validations with their stored replays and noise floors, and the `design` section of every train
run recorded from a designed excitation (`twinlake excite --design` writes it into the run's
metadata.json; ingest keeps that verbatim in the run's `metadata_json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...sim.arm_model.params import LAYOUT
from ..records.design_check import train_designs
from .report_data import HeldOutTrace, ParamRow, ReportData


def report_data_from_lake(lake: Any, fit_id: str, *, nominal: Any = None, error_bars: bool = False) -> ReportData:
    """Gather a fit's record, its validations (with their stored samples) and its error bars
    (stored ``identifiability_json``, or computed now when ``error_bars``)."""
    from ...catalog import Lake
    from ...sim import DynamicsParams
    from ..core.covariance import method_line, strong_pairs
    from ..records.record import load_fit
    from .show import adequacy_lines, fit_validations
    from .verdict_record import current_verdict

    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    rec = load_fit(lk, fit_id)
    nominal = nominal if nominal is not None else DynamicsParams.nominal()
    ident = json.loads(rec.extra["identifiability_json"]) if rec.extra.get("identifiability_json") else None
    if ident is None and error_bars:
        from ..trust.identifiability import identifiability_for_fit

        ident = identifiability_for_fit(lk, rec, rec.other_seeds).to_dict()
    params, flags = _param_rows(rec, nominal, ident)
    verdict = current_verdict(lk.root, rec).verdict
    if ident is None:
        flags.append("no error bars: run `twinlake fit report --error-bars` (or store identifiability_json)")
    validations = _validations(lk, fit_id)
    if not validations:
        flags.append("not validated on any held-out run (G3 open): run `twinlake fit validate`")
    flags += [f"held-out {v['robot']}/{v['run']}: fitted parameters FAILED the declared thresholds"
              for v in validations if v["sim_label"] == "fitted" and v["verdict"] == "fail"]
    adequacy = adequacy_lines(rec, fit_validations(lk.root, fit_id))
    flags += [f"model adequacy: {text}" for text, ok in adequacy if ok is False]
    summary = {"fit": rec.fit_id, "fit_source": rec.fit_source, "status": rec.status, "created_utc": rec.created_utc,
               "best_loss": rec.best_loss, "seed": rec.seed, "method": rec.extra.get("method"),
               # the same columns as `fit list`: the generations setting and the LM iterations run
               "generations": rec.extra.get("generations"), "refine_iterations": rec.extra.get("refine_iterations"),
               "history rows": len(rec.history),
               "train intervals": len(rec.train), "holdout intervals (fit)": len(rec.holdout),
               "condition number": (ident or {}).get("condition_number")}
    cov = (ident or {}).get("covariance")
    if ident is not None:
        summary["error bars"] = method_line(cov)
        summary["strongly correlated pairs"] = ", ".join(f"{a} ~ {b} ({r:+.2f})" for a, b, r in strong_pairs(cov)) \
            or "none"
    shown = [{k: v for k, v in d.items() if k not in _HIDDEN_COLS} for d in validations]
    return ReportData(rec.fit_id, summary, params, list(rec.history), _held_out(lk, validations), shown,
                      list(dict.fromkeys(flags)), adequacy, cov, train_designs(lk, rec),
                      (verdict.level.value, list(verdict.reasons)))


def _param_rows(rec: Any, nominal: Any, ident: dict | None) -> tuple[list[ParamRow], list[str]]:
    """One ParamRow per parameter (bounds from the fit's settings) and the parameter flags."""
    from ..core.space import ParameterSpace
    from ..core.parameter_status import Status
    from .show import STATUS_FLAGS
    from ..trust.statuses import fit_statuses, intervals_agree

    space = (rec.settings or {}).get("space")
    bounds = np.array([space["bounds"][n] for n in LAYOUT.names]) if space else np.asarray(LAYOUT.bounds)
    free = set((ParameterSpace.from_json(space) if space else ParameterSpace()).free_names)
    statuses = {s.name: s for s in fit_statuses(_with_ident(rec, ident))}
    by_name = {p["name"]: p for p in (intervals_agree(ident, list(statuses.values())) or {}).get("parameters", [])}
    params, flags = [], []
    for i, (name, value, nom) in enumerate(zip(LAYOUT.names, rec.vector, nominal.to_vector())):
        p, st = by_name.get(name, {}), statuses[name]
        other = tuple(f for f in p.get("flags", []) if f not in STATUS_FLAGS)
        shown = "" if st.status in (Status.ESTIMATED, Status.FIXED) else f"{st.status.label}: {st.display()}"
        row = ParamRow(name, float(value), float(nom), float(bounds[i, 0]), float(bounds[i, 1]), p.get("ci95_low"),
                       p.get("ci95_high"), other, p.get("seed_min"), p.get("seed_max"), name in free,
                       st.status.label if not shown else shown)
        params.append(row)
        said = ([shown] if shown else []) + list(other)
        if said:  # one line per parameter: its status and its other flags
            flags.append(f"{name}: {'; '.join(said)}")
    return params, flags


def _with_ident(rec: Any, ident: dict | None) -> Any:
    """`rec` with error bars `ident` (computed now by `--error-bars`) when it stores none."""
    import json as _json
    from dataclasses import replace

    if ident is None or rec.extra.get("identifiability_json"):
        return rec
    return replace(rec, extra={**rec.extra, "identifiability_json": _json.dumps(ident)})


_VALIDATION_COLS = ("validation", "robot", "run", "sim_label", "q_rmse_all_rad", "dq_rmse_all_rad_s",
                    "ee_pos_rmse_3d_m", "verdict", "adequacy_json")
_HIDDEN_COLS = ("validation", "adequacy_json")  # read, not shown in the validation table


def _validations(lake: Any, fit_id: str) -> list[dict[str, Any]]:
    """The fit's validation rows from the catalog (view `validations`); `adequacy_json` None
    where the view has no such column (validations written before it existed)."""
    from ...catalog import connect

    con = connect(lake)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE validations").fetchall()]
        if "fit" not in cols:
            return []
        select = [c if c in cols else f"NULL AS {c}" for c in _VALIDATION_COLS]
        rows = con.execute(f"SELECT {', '.join(select)} FROM validations WHERE fit = ? "
                           "ORDER BY robot, run, sim_label, created_utc", [fit_id]).fetchall()
    finally:
        con.close()
    return [dict(zip(_VALIDATION_COLS, r)) for r in rows]


def _held_out(lake: Any, validations: list[dict[str, Any]]) -> list[HeldOutTrace]:
    """Traces of the latest fitted (and nominal) validation of each run that stored samples, with
    the fitted validation's stored noise floor (None when it stored none)."""
    from ..trust.adequacy import adequacy_from_dict
    from ..trust.validate import load_trajectory

    latest: dict[tuple[str, str], dict[str, dict]] = {}
    for v in validations:
        latest.setdefault((v["robot"], v["run"]), {})[v["sim_label"]] = v
    out = []
    for (robot, run), rows in sorted(latest.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        if "fitted" not in rows:
            continue
        fitted_id = rows["fitted"]["validation"]
        if not (lake.root / "validations" / f"validation={fitted_id}" / "trajectory.parquet").is_file():
            continue
        fitted = load_trajectory(lake, fitted_id)
        nominal_q = load_trajectory(lake, rows["nominal"]["validation"])["q_sim"] if "nominal" in rows else None
        stored = rows["fitted"].get("adequacy_json")
        floor = adequacy_from_dict(json.loads(stored)).floor if stored else None
        out.append(HeldOutTrace(f"{robot}/{run}", fitted["t_s"], fitted["q_real"], fitted["q_sim"], nominal_q, floor))
    return out
