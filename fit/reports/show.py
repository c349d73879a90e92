"""What `twinlake fit run` and `twinlake fit show` print about a fit: at the top the model
adequacy (training and held-out residual against the noise floor, with the likely cause;
fit/trust/adequacy.py), then parameters per joint, the intervals used, the stored error bars (95 %
intervals, flags, condition number, weak directions), the spread over seeds and the held-out
validations (view `fit_validations`).

`fit_summary(rec, validations)` is the JSON form (`--json`); `print_fit(rec, validations)`
the rich tables. Both show the same facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.markup import escape

VALIDATION_COLUMNS = ("robot", "run", "passed", "fitted_verdict", "fitted_q_rmse_all_rad",
                      "nominal_q_rmse_all_rad", "fitted_ee_pos_rmse_3d_m", "fitted_torque_floor_ratio",
                      "fitted_source", "thresholds_json", "fitted_validation")


def fit_validations(lake: Path, fit_id: str) -> list[dict[str, Any]]:
    """The `fit_validations` rows of a fit (which held-out runs it passed), sorted by run;
    empty when the lake has no validation of it."""
    import duckdb

    from ...catalog import connect

    try:
        con = connect(lake)
        cur = con.execute(f"SELECT {', '.join(VALIDATION_COLUMNS)} FROM fit_validations "
                          "WHERE fit = ? ORDER BY robot, run", [fit_id])
        rows = [dict(zip(VALIDATION_COLUMNS, row)) for row in cur.fetchall()]
        stored = {}
        if "adequacy_json" in {r[0] for r in con.execute("DESCRIBE validations").fetchall()}:
            stored = dict(con.execute("SELECT validation, adequacy_json FROM validations WHERE fit = ? "
                                      "AND adequacy_json IS NOT NULL", [fit_id]).fetchall())
    except duckdb.CatalogException:  # a lake whose validation views could not be defined
        return []
    for row in rows:
        text = stored.get(row["fitted_validation"])
        row["fitted_adequacy"] = json.loads(text) if text else None
    return rows


def adequacy_lines(rec, validations: list[dict[str, Any]] | None = None) -> list[tuple[str, bool | None]]:
    """The model-adequacy lines of a fit, (text, passed: True | False | None when not
    assessed): its training data (and `fit run --holdout` runs) from the fit record, then each
    held-out run's latest `fit validate`. Never empty: what was not assessed says so."""
    from ..trust.adequacy import adequacy_from_dict

    lines: list[tuple[str, bool | None]] = []
    stored = json.loads(rec.extra["adequacy_json"]) if rec.extra.get("adequacy_json") else None
    torque = json.loads(rec.extra["torque_json"]) if rec.extra.get("torque_json") else None
    if torque is not None:  # a torque fit (fit/torque): its torque residual against the torque noise floor
        lines.extend((text, ok) for text, ok in torque.get("adequacy_lines", []))
    elif stored is None:
        lines.append(("training residual against the noise floor: not assessed (a fit made before twinlake "
                      "assessed adequacy, or imported)", None))
    for key, role, subject in (("train", "training", "its own training data"),
                               ("holdout", "held-out (fit run --holdout)", "the held-out runs")):
        if stored and stored.get(key):
            a = adequacy_from_dict(stored[key])
            lines.append((a.line(role, subject), a.verdict()[0] != "fail"))
    assessed = [v for v in validations or [] if v.get("fitted_adequacy")]
    for v in assessed:
        a = adequacy_from_dict(v["fitted_adequacy"])
        verdict = a.verdict()[0]
        passed = None if verdict is None else verdict == "pass"
        lines.append((a.line(f"held-out {v['robot']}/{v['run']}", "this run"), passed))
    if not assessed:
        lines.append((f"no held-out run assessed against its noise floor: `twinlake fit validate {rec.fit_id} "
                      "--runs RUN`", None))
    return lines


def verdict_json(stored) -> dict[str, Any] | None:
    """The `verdict` block of every `--json` (a `verdict_record.StoredVerdict`, or None)."""
    if stored is None:
        return None
    return {"level": stored.verdict.level.value, "reasons": list(stored.verdict.reasons),
            "created_utc": stored.created_utc, "trigger": stored.trigger}


def fit_summary(rec, validations: list[dict[str, Any]] | None = None, verdict=None) -> dict[str, Any]:
    """JSON-able summary of a FitRecord: its verdict (a `StoredVerdict`) first, parameters,
    losses, runs, extra columns, every parameter's status, the parsed error bars
    (`identifiability`, None when not stored; a 95 % interval only for estimated parameters),
    seeds and validations."""
    from ...sim import PARAM_NAMES
    from ..trust.statuses import fit_statuses, intervals_agree

    statuses = fit_statuses(rec)
    extra = {k: v for k, v in rec.extra.items()
             if not isinstance(v, bytes) and k not in ("identifiability_json", "adequacy_json")}
    adequacy = json.loads(rec.extra["adequacy_json"]) if rec.extra.get("adequacy_json") else None
    return {
        "fit": rec.fit_id,
        "verdict": verdict_json(verdict),
        "fit_source": rec.fit_source,
        "status": rec.status,
        "created_utc": rec.created_utc,
        "best_loss": rec.best_loss,
        "seed": rec.seed,
        "params": dict(zip(PARAM_NAMES, rec.vector.tolist())),
        "history_rows": len(rec.history),
        "runs": [vars(u) for u in rec.runs],
        **extra,
        "parameter_status": [st.to_dict() for st in statuses],
        "identifiability": intervals_agree(rec.identifiability, statuses),  # intervals only for estimated
        "adequacy": {"train": (adequacy or {}).get("train"), "holdout": (adequacy or {}).get("holdout"),
                     "lines": [text for text, _ in adequacy_lines(rec, validations)]},
        "seeds": [{"seed": s.seed, "best_loss": s.best_loss, "chosen": s.chosen,
                   "params": dict(zip(PARAM_NAMES, s.vector.tolist()))} for s in rec.seeds],
        "validations": list(validations or []),
    }


def console():
    """stdout console; not a terminal (pipes, logs): wide enough not to truncate tables."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=160)


LEVEL_STYLE = {"trusted": "bold green", "usable with caveats": "bold yellow", "not trusted": "bold red"}


def print_verdict(out, stored) -> None:
    """The verdict line and its reasons, one per line, most important first."""
    if stored is None:
        return
    v = stored.verdict
    style = LEVEL_STYLE[v.level.value]
    when = f" ({stored.trigger}, {stored.created_utc})" if stored.created_utc else f" ({stored.trigger})"
    out.print(f"[{style}]verdict: {escape(v.level.value)}[/{style}]{escape(when)}", highlight=False)
    for reason in v.reasons:
        out.print(f"  - {escape(reason)}", highlight=False)


def print_fit(rec, validations: list[dict[str, Any]] | None = None, verdict=None) -> None:
    """Print a fit as rich tables (the verdict first, then adequacy, parameters, intervals,
    error bars and statuses, seeds, validations)."""
    out = console()
    print_verdict(out, verdict)
    _adequacy(out, rec, validations or [])
    _parameters(out, rec)
    _intervals(out, rec)
    _error_bars(out, rec)
    _seeds(out, rec)
    _validations(out, rec, validations or [])


def _adequacy(out, rec, validations: list[dict[str, Any]]) -> None:
    for text, ok in adequacy_lines(rec, validations):
        style = {True: "green", False: "bold red", None: "yellow"}[ok]
        out.print(f"[{style}]model adequacy: {escape(text)}[/{style}]", highlight=False)


def _parameters(out, rec) -> None:
    from rich.table import Table

    from ...sim import LAYOUT

    p = rec.params
    table = Table(title=escape(f"fit {rec.fit_id} ({rec.fit_source}, {rec.status}), best loss {rec.best_loss:.6g}"))
    groups = LAYOUT.joint_groups
    for col in ("joint", *(g.name if g.unit == "-" else f"{g.name} [{g.unit}]" for g in groups)):
        table.add_column(escape(col), justify="right")
    for j in range(7):
        table.add_row(f"J{j + 1}", *(f"{getattr(p, g.name)[j]:.4f}" for g in groups))
    out.print(table)
    joints = p.joint_delay_ms.tolist()
    per_joint = f" (per joint J1..J7: {', '.join(map(str, joints))} ms)" if any(d != p.motor_delay_ms for d in joints) else ""
    out.print(f"motor delay: {p.motor_delay_ms} ms{per_joint}; history rows: {len(rec.history)}; seed: {rec.seed}")
    if rec.extra.get("lake_version") is not None:  # what it read: `twinlake sql --as-of VERSION`
        out.print(f"lake version read: {rec.extra['lake_version']} (`twinlake sql --as-of {rec.extra['lake_version']}`)")


def _intervals(out, rec) -> None:
    from rich.table import Table

    if not rec.runs:
        return
    runs = Table(title="intervals")
    for col in ("role", "robot/run", "interval", "seq", "weight", "loss"):
        runs.add_column(col)
    for u in rec.runs:
        seq = f"{u.seq_first}..{u.seq_last}" if u.seq_first is not None else "-"
        loss = f"{u.loss:.6g}" if u.loss is not None else "-"
        runs.add_row(*(escape(c) for c in (u.role, f"{u.robot}/{u.run}", str(u.interval_index), seq, f"{u.weight}", loss)))
    out.print(runs)


def _error_bars(out, rec) -> None:
    from rich.table import Table

    ident = rec.identifiability
    if ident is None:
        out.print("no error bars stored with this fit (imported, older, or nothing free): "
                  f"`twinlake fit report {rec.fit_id} --error-bars --out DIR` computes them")
        return
    table = Table(title="parameters: status, error bars at the optimum (linearised, 95 %)")
    with_seeds = (ident.get("seeds") or 0) >= 2
    cols = ("parameter", "status", "value [95 % interval] / bound", "bounds", "range over seeds", "other flags")
    for col in cols:
        if with_seeds or col != "range over seeds":
            table.add_column(escape(col), justify="left" if col in ("parameter", "status", "other flags") else "right")
    for row in status_rows(rec, ident):
        table.add_row(*(escape(c) for i, c in enumerate(row) if with_seeds or i != 4))
    out.print(table)
    cond = ident.get("condition_number")
    out.print(f"condition number (range-scaled Jacobian): {'∞' if cond is None else f'{cond:.4g}'}; "
              f"residual variance {ident.get('sigma2') or 0:.4g} with {ident.get('dof')} degrees of freedom")
    if ident.get("error_bar_note") and not ident.get("covariance"):  # else _correlations prints it
        out.print(ident["error_bar_note"], highlight=False)
    counts = ", ".join(f"{n} {label}" for label, n in status_counts(rec).items() if n)
    out.print(f"parameter status: {counts}", highlight=False)
    for d in ident.get("weak_directions", []):
        out.print(f"  weak direction {_direction(d)}", highlight=False)
    _correlations(out, ident)


# the flags the status already says (fit/core/parameter_status.py): not repeated beside it
STATUS_FLAGS = frozenset({"at_bound", "unidentifiable", "discrete"})


def status_rows(rec, ident: dict) -> list[list[str]]:
    """Rows (name, status, value [interval] or bound, bounds, seed range, other flags) of every
    parameter the fit freed (the statuses of fit/trust/statuses.py)."""
    from ..core.parameter_status import Status
    from ..core.parameter_status import format_number as fmt
    from ..trust.statuses import fit_statuses

    stored = {p["name"]: p for p in ident.get("parameters", [])}
    rows = []
    for st in fit_statuses(rec):
        if st.status is Status.FIXED:
            continue  # counted on the status line below the table
        p = stored.get(st.name, {})
        seeds = f"[{fmt(p['seed_min'])}, {fmt(p['seed_max'])}]" if p.get("seed_min") is not None else "—"
        flags = [f for f in p.get("flags", []) if f not in STATUS_FLAGS]
        rows.append([st.name, st.status.label, st.display(), f"[{fmt(st.lower)}, {fmt(st.upper)}]", seeds,
                     ", ".join(flags)])
    return rows


def status_counts(rec) -> dict[str, int]:
    """How many parameters per status label."""
    from ..core.parameter_status import Status, count
    from ..trust.statuses import fit_statuses

    return {Status(k).label: n for k, n in count(fit_statuses(rec)).items()}


def _direction(d: dict) -> str:
    comps = ", ".join(f"{n} {c:+.2f}" for n, c in sorted(d["components"].items(), key=lambda kv: -abs(kv[1])))
    half = d["half_width_fraction"]
    return f"(95 % half-width {'∞' if half is None else f'{half:.3g}'}× the box): {comps}"


def _correlations(out, ident: dict) -> None:
    """The covariance's method, its strongly correlated pairs and weakest directions."""
    from ..core.covariance import STRONG_RHO, method_line, strong_pairs

    cov = ident.get("covariance")
    out.print(method_line(cov), highlight=False)
    if cov is None:
        out.print("no full covariance stored (an older fit): pairs and directions unknown")
        return
    pairs = strong_pairs(cov)
    out.print(f"strongly correlated pairs (|ρ| ≥ {STRONG_RHO:g}): "
              + (", ".join(f"{a} ~ {b} ρ {r:+.3f}" for a, b, r in pairs) if pairs else "none"), highlight=False)
    for d in ident.get("weakest_directions", []):
        out.print(f"  weakest direction {_direction(d)}", highlight=False)


def _seeds(out, rec) -> None:
    from rich.table import Table

    if len(rec.seeds) < 2:
        return
    table = Table(title=f"{len(rec.seeds)} seeds (best = the fit)")
    for col in ("seed", "best loss", "chosen"):
        table.add_column(col, justify="right")
    for s in rec.seeds:
        table.add_row(str(s.seed), f"{s.best_loss:.6g}", "yes" if s.chosen else "")
    out.print(table)
    spread = [p["name"] for p in (rec.identifiability or {}).get("parameters", []) if "seed_spread" in p["flags"]]
    out.print("spread over seeds above 10 % of the range: " + (", ".join(spread) if spread else "none"))


def _validations(out, rec, validations: list[dict[str, Any]]) -> None:
    from rich.table import Table

    if not validations:
        out.print(f"no held-out validation yet: `twinlake fit validate {rec.fit_id} --runs RUN "
                  "--max-q-rmse-rad X`")
        return
    milli = lambda v: "—" if v is None else f"{1e3 * v:.3f}"  # noqa: E731
    table = Table(title="held-out validations (fit validate)")
    ratio = lambda v: "—" if v is None else f"{v:.2f}×"  # noqa: E731
    for col in ("robot/run", "q RMSE fitted [mrad]", "q RMSE nominal [mrad]", "EE RMSE [mm]", "torque / floor",
                "verdict", "passed"):
        table.add_column(escape(col))
    for v in validations:
        table.add_row(*(escape(c) for c in (f"{v['robot']}/{v['run']}", milli(v["fitted_q_rmse_all_rad"]),
                                             milli(v["nominal_q_rmse_all_rad"]), milli(v["fitted_ee_pos_rmse_3d_m"]),
                                             ratio(v.get("fitted_torque_floor_ratio")),
                                             v["fitted_verdict"] or "no thresholds", "yes" if v["passed"] else "no")))
    out.print(table)
    passed = [f"{v['robot']}/{v['run']}" for v in validations if v["passed"]]
    out.print(f"passed {len(passed)} of {len(validations)} held-out run(s)" + (f": {', '.join(passed)}" if passed else ""))
