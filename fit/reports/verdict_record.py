"""A fit's verdict in the lake: the evidence gathered from the fit record and the lake, the
verdict decided (fit/trust/verdict.py), and the append-only partition of verdicts.

Layout (docs/lake.md): `<lake>/verdicts/fit=<id>/stamp=<UTC to the microsecond>Z-<sha8>/verdict.parquet`,
one row: created_utc (ISO 8601, microseconds), level, reasons_json, verdict_json (level,
reasons, every parameter's status), evidence_json, trigger (the command that produced it).
A verdict is never rewritten: `fit run`, `fit validate` and `fit compare` each append one.
View `fit_verdicts` (sql/fits.sql): the latest per fit, by created_utc, ties broken by the
larger `stamp` (whose suffix is the hash of the verdict's content).

`current_verdict(lake, rec)`: the latest stored verdict, or (a fit from before verdicts
existed) the one computed now, unstored — what `fit show`, `fit report`, `fit list` and the
exports print.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..trust.verdict import Agreement, Check, Evidence, Verdict, decide

REPLAY_METHODS = ("local", "cma")


@dataclass(frozen=True)
class StoredVerdict:
    """A verdict with where it comes from: `created_utc` None when computed now, not stored."""

    verdict: Verdict
    created_utc: str | None
    trigger: str


def route(rec) -> str:
    """'torque', 'replay' or 'imported'."""
    method = rec.extra.get("method") or (rec.settings or {}).get("method")
    if method == "torque":
        return "torque"
    return "replay" if method in REPLAY_METHODS or rec.fit_source == "twinlake" else "imported"


def convergence_note(rec) -> str | None:
    """The local search's "not converged: ..." sentence from `local_gates`, or None."""
    gates = rec.extra.get("local_gates") or ""
    at = gates.find("not converged:")
    if at < 0:
        return None
    end = gates.find("; ", at)
    return gates[at:] if end < 0 else gates[at:end]


def gate_failure(rec) -> str | None:
    """The local gates' line, without its convergence note (said apart), when they did not
    accept the local result and nothing searched further ('not accepted: ...; exploration off'),
    else None. After a CMA-ES fallback the fit is what the fallback found: its adequacy and
    error bars speak for it."""
    gates = rec.extra.get("local_gates") or ""
    if not gates.startswith(("not accepted", "not trusted")):  # the latter: fits stored before the rename
        return None
    note = convergence_note(rec)
    return gates.replace("; " + note, "") if note else gates


def checks(rec, validations: list[dict]) -> list[Check]:
    """The adequacy and validation checks of a fit: training first, then held-out."""
    from .show import adequacy_lines

    out = []
    for text, ok in adequacy_lines(rec, validations):
        if text.startswith("no held-out run assessed"):
            continue  # the verdict says "not validated" itself
        held = text.startswith("held-out")
        subject = text.split(" residual", 1)[0] if held else "training"
        out.append(Check(subject, text, ok, held))
    for v in validations:  # declared thresholds (fit validate)
        if v.get("fitted_verdict") is None:
            continue
        run = f"held-out {v['robot']}/{v['run']}"
        ok = bool(v.get("passed"))
        out.append(Check(run, "passed fit validate's declared thresholds" if ok else
                         "FAILED fit validate's declared thresholds", ok, True))
    return out


def other_route_fit(lake: Path, rec):
    """The latest fit of the other route (torque vs replay) on the same training runs, or None."""
    from ...catalog import connect
    from ..records.record import load_fit

    mine = route(rec)
    if mine == "imported" or not rec.train:
        return None
    runs = sorted({f"{u.robot}/{u.run}" for u in rec.train})
    con = connect(lake)
    rows = con.execute("SELECT fit, string_agg(DISTINCT robot || '/' || run, ',' ORDER BY robot || '/' || run) "
                       "FROM fit_runs WHERE role = 'train' AND fit <> ? GROUP BY fit", [rec.fit_id]).fetchall()
    same = [fit for fit, joined in rows if joined == ",".join(runs)]
    found = []
    for fit in same:
        other = load_fit(lake, fit)
        if route(other) not in (mine, "imported"):
            found.append((other.created_utc, other.fit_id, other))
    return max(found, key=lambda t: (t[0], t[1]))[2] if found else None


def agreement(lake: Path, rec) -> Agreement | None:
    """`fit compare` against the other route's latest fit on the same training runs."""
    from ..trust.compare import compare_fits

    other = other_route_fit(lake, rec)
    if other is None:
        return None
    cmp = compare_fits(rec, other)
    return Agreement(other.fit_id, route(other), tuple(p.name for p in cmp.disagreeing), tuple(cmp.causes))


def gather(lake: Path, rec, validations: list[dict] | None = None) -> Evidence:
    """The evidence for `rec`'s verdict, from its record and the lake."""
    from .show import fit_validations
    from ..trust.statuses import fit_statuses

    vals = fit_validations(lake, rec.fit_id) if validations is None else validations
    ident = rec.identifiability or {}
    spread = tuple(p["name"] for p in ident.get("parameters", []) if "seed_spread" in (p.get("flags") or []))
    return Evidence(rec.fit_id, route(rec), tuple(checks(rec, vals)), tuple(fit_statuses(rec)),
                    convergence_note(rec), gate_failure(rec), agreement(lake, rec), spread)


def publish_verdict(lake: Path, fit_id: str, verdict: Verdict, evidence: Evidence, trigger: str) -> Path:
    """Append one verdict row for `fit_id` (never replaces one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ...catalog import Lake, check_id, publish_partition

    now = datetime.now(timezone.utc)
    body = json.dumps(verdict.to_dict(), sort_keys=True)
    digest = hashlib.sha256((body + json.dumps(evidence.to_dict(), sort_keys=True)).encode()).hexdigest()[:8]
    stamp = check_id("verdict", now.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + digest)
    row = pa.table({"created_utc": [now.isoformat(timespec="microseconds")], "level": [verdict.level.value],
                    "reasons_json": [json.dumps(list(verdict.reasons))], "verdict_json": [body],
                    "evidence_json": [json.dumps(evidence.to_dict(), sort_keys=True)], "trigger": [trigger]})
    rel = f"verdicts/fit={check_id('fit', fit_id)}/stamp={stamp}"
    return publish_partition(Lake(Path(lake)), rel, lambda d: pq.write_table(row, d / "verdict.parquet"))


def record_verdict(lake: Path, rec, trigger: str, validations: list[dict] | None = None) -> Verdict:
    """Decide `rec`'s verdict from the evidence now and append it; returns it."""
    evidence = gather(lake, rec, validations)
    verdict = decide(evidence)
    publish_verdict(lake, rec.fit_id, verdict, evidence, trigger)
    return verdict


def record_with_other_route(lake: Path, rec, trigger: str) -> Verdict:
    """`record_verdict` for `rec`, and a new verdict for the other route's latest fit on the
    same training runs (its comparison just arrived)."""
    verdict = record_verdict(lake, rec, trigger)
    other = other_route_fit(lake, rec)
    if other is not None:
        record_verdict(lake, other, f"{trigger} (fit {rec.fit_id} of the other route)")
    return verdict


def stored_verdicts(lake: Path) -> dict[str, StoredVerdict]:
    """The latest stored verdict of every fit (view `fit_verdicts`)."""
    import duckdb

    from ...catalog import connect

    try:
        rows = connect(lake).execute("SELECT fit, verdict_json, created_utc, trigger FROM fit_verdicts").fetchall()
    except duckdb.CatalogException:
        return {}
    return {fit: StoredVerdict(Verdict.from_dict(json.loads(body)), created, trigger)
            for fit, body, created, trigger in rows}


def current_verdict(lake: Path, rec, validations: list[dict] | None = None) -> StoredVerdict:
    """The latest stored verdict of `rec`, else the one computed now (not stored)."""
    stored = stored_verdicts(lake).get(rec.fit_id)
    if stored is not None:
        return stored
    return StoredVerdict(decide(gather(lake, rec, validations)), None, "computed now (no verdict stored)")


__all__ = ["StoredVerdict", "agreement", "checks", "convergence_note", "current_verdict", "gate_failure", "gather",
           "other_route_fit", "publish_verdict", "record_verdict", "record_with_other_route", "route",
           "stored_verdicts"]
