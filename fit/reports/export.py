"""Export a fit from the lake: a versioned profile, FrankaTwin's `sysid_best_params.json`, or
the MJCF joint attributes to paste into a user's model.

- `profile`: twinlake.profile/v1 JSON (`twinlake.sim.save_profile`), provenance = the fit.
- `frankatwin`: `sysid_best_params.json` with FrankaTwin's keys (FrankaTwin's sysid output):
  best_score, best_params_raw (29), best_params_decoded, history, bounds, args, source, plus
  one key of ours, `twinlake_verdict` (`verdict_doc`). A fit imported from FrankaTwin exports
  its original file byte for byte (kept under `raw/`).
- Every export carries the fit's verdict and each parameter's status (`verdict_doc`): the
  profile under `provenance.verdict`, the randomisation under `verdict`, the MJCF snippet and
  the model in a leading comment.
- `mjcf`: one `<joint>` element per arm joint with `armature`, `damping` (= mu_viscous) and
  `frictionloss` (= mu_dynamic, MuJoCo's Coulomb level); static friction and the motor delay
  have no MJCF attribute and are given as a comment; a fitted payload (mass > 0) is a `payload`
  body with its `<inertial>`, to put inside the flange body (`fr3_link7`, at the flange).
  FrankaTwin's file holds FrankaTwin's 29 only; the profile holds every group. FrankaTwin has one
  motor delay: a fit with per-joint delays (`motor_delay_offset_ms`) exports its shared delay
  there, and the file (`twinlake_not_exported`) and `export_notes` (printed by `fit export`)
  say that the per-joint delays are not in it.
- `model`: the whole FR3 MJCF as the fit identified it, gravity on: its joints, the links'
  inertials of a torque fit with `+links`, else a fitted payload body (fit/records/model_export.py).
- `randomization`: the fit as a distribution for domain randomisation (`randomization_doc`,
  schema `twinlake.randomization/v1`, fields in docs/campaigns.md): per parameter its value,
  bounds, 95 % interval and distribution (truncated normal, uniform or fixed), the joint
  covariance of the truncated-normal ones when the fit stores one (`"correlation":
  "joint_normal"`; older fits: `"independent"`), and the motor delay as a categorical
  distribution (its per-joint offsets fixed at the fit's whole ms). `twinlake campaign run --sample posterior` draws from
  exactly this description.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import RecordError, SettingError
from ..records.record import FitRecord
from ...sim import LAYOUT, save_profile, to_frankatwin_decoded
from ...sim.fr3 import FLANGE_OFFSET_M

FORMATS = ("profile", "frankatwin", "mjcf", "model", "randomization")
RANDOMIZATION_SCHEMA = "twinlake.randomization/v1"
HISTORY_KEYS = ("iter", "min", "mean", "best", "iter_s", "ms_per_tick", "eta_s", "per_traj_min",
                "best_candidate_weighted")


def default_name(rec: FitRecord, fmt: str) -> str:
    return {"profile": f"{rec.fit_id}.profile.json", "frankatwin": "sysid_best_params.json",
            "mjcf": f"{rec.fit_id}.joints.xml", "model": f"{rec.fit_id}.fr3.xml",
            "randomization": f"{rec.fit_id}.randomization.json"}[fmt]


def _per_joint_delays(rec: FitRecord) -> list[int] | None:
    """The fit's per-joint motor delays [ms] when they are not all the shared delay, else None."""
    delays = rec.params.joint_delay_ms.tolist()
    return delays if any(d != rec.params.motor_delay_ms for d in delays) else None


def export_notes(rec: FitRecord, fmt: str) -> list[str]:
    """What the export in `fmt` cannot hold of this fit, one sentence each ([] when it holds it all)."""
    delays = _per_joint_delays(rec)
    if fmt == "frankatwin" and raw_frankatwin(rec) is not None:
        return ["a FrankaTwin import exports its original file byte for byte: the verdict and parameter statuses "
                "are not in it (`twinlake fit show` has them)"]
    if fmt != "frankatwin" or delays is None:
        return []
    return [f"FrankaTwin's sysid_best_params.json cannot hold per-joint motor delays: its motor_delay_steps is "
            f"the shared delay {rec.params.motor_delay_ms} ms, while this fit has per-joint motor delays {delays} ms "
            f"(motor_delay_offset_ms {rec.params.motor_delay_offset_ms.astype(int).tolist()}); "
            "`--format profile` holds them"]


def frankatwin_doc(rec: FitRecord) -> dict:
    """FrankaTwin's sysid_best_params.json object for a twinlake fit (plus `twinlake_not_exported`,
    the export_notes, when the fit has what FrankaTwin's file cannot hold)."""
    space = rec.settings.get("space", {})
    ft = list(LAYOUT.frankatwin_indices)  # the values FrankaTwin's vector holds, in its order
    bounds = [space.get("bounds", {}).get(LAYOUT.names[i]) for i in ft]
    train = rec.train
    notes = export_notes(rec, "frankatwin")
    return {
        **({"twinlake_not_exported": "; ".join(notes)} if notes else {}),
        "best_score": rec.best_loss,
        "best_params_raw": rec.vector[ft].tolist(),
        "best_params_decoded": to_frankatwin_decoded(rec.params),
        "history": [{k: h.get(k) for k in HISTORY_KEYS} for h in rec.history],
        "bounds": bounds,
        "args": {**rec.settings, "fit_id": rec.fit_id, "fit_source": rec.fit_source},
        "source": {
            "trajectories": [
                {
                    "real_csv": f"{u.robot}/{u.run}",
                    "real_sidecar": None,
                    "num_samples": (u.seq_last - u.seq_first + 1) if u.seq_last is not None else None,
                    "weight": u.weight,
                    "gains": None,
                    "interval_index": u.interval_index,
                    "seq_first": u.seq_first,
                    "seq_last": u.seq_last,
                    "run_sha256": u.run_sha256,
                }
                for u in train
            ],
            "num_trajectories": len(train),
            "time_base": "ticks_1khz",
            "warmup_steps": 0,
        },
    }


def mjcf_snippet(rec: FitRecord) -> str:
    """The `<joint>` attributes of J1..J7 as MJCF text (names fr3_joint1..7)."""
    p = rec.params
    lines = [
        f"<!-- twinlake fit {rec.fit_id} ({rec.fit_source}), best loss {rec.best_loss:.6g}.",
        "     armature [kg m^2]; damping = viscous [N m s/rad]; frictionloss = dynamic Coulomb [N m].",
        f"     Not expressible in MJCF: mu_static [N m] = {[round(float(v), 6) for v in p.mu_static]},",
        f"     motor delay = {_delay_text(rec)} (apply in your controller); friction law: {rec.friction_law}"
        f"{' (frictionloss is the tanh law Coulomb level; MuJoCo applies it as a hard constraint)' if rec.friction_law == 'tanh' else ''}. -->",
    ]
    for j in range(7):
        lines.append(
            f'<joint name="fr3_joint{j + 1}" armature="{p.armature[j]:.6g}" '
            f'damping="{p.mu_viscous[j]:.6g}" frictionloss="{p.mu_dynamic[j]:.6g}"/>'
        )
    lines += _payload_lines(p)
    return "\n".join(lines) + "\n"


def _delay_text(rec: FitRecord) -> str:
    """The motor delay for a comment: `2 ms`, or per joint `J1 2 ms, J2 2 ms, ...`."""
    delays = _per_joint_delays(rec)
    if delays is None:
        return f"{rec.params.motor_delay_ms} ms"
    return "per joint " + ", ".join(f"J{j + 1} {d} ms" for j, d in enumerate(delays))


def _payload_lines(p) -> list[str]:
    """The fitted payload as an MJCF body at the flange (none when its mass is 0)."""
    load = p.payload
    if load.mass_kg <= 0.0:
        return ["<!-- payload: none (mass 0 kg) -->"]
    com = " ".join(f"{v:.6g}" for v in load.com_m)
    inertia = " ".join(f"{v:.6g}" for v in load.inertia_kgm2)
    return [
        "<!-- the payload: put inside <body name=\"fr3_link7\">; pos is the flange, the inertial's pos",
        "     the centre of mass [m] in the flange frame -->",
        f'<body name="payload" pos="{" ".join(f"{v:g}" for v in FLANGE_OFFSET_M)}">',
        f'  <inertial pos="{com}" mass="{load.mass_kg:.6g}" diaginertia="{inertia}"/>',
        "</body>",
    ]


def _parameter_entry(name: str, value: float, stored: dict | None) -> dict:
    """One continuous parameter of the randomisation document: a truncated normal at the
    optimum with the stored standard error (free, finite error), uniform over its bounds (free,
    unbounded error: the data do not constrain it), else fixed at the fit's value."""
    group = LAYOUT.group_of(name)
    lo, hi = (float(b) for b in LAYOUT.bounds[LAYOUT.index(name)])
    stored = stored or {}
    lo = stored.get("lower_bound") if stored.get("lower_bound") is not None else lo
    hi = stored.get("upper_bound") if stored.get("upper_bound") is not None else hi
    entry = {"name": name, "group": group.name, "unit": group.unit, "value": float(value),
             "lower_bound": float(lo), "upper_bound": float(hi),
             "ci95_low": stored.get("ci95_low"), "ci95_high": stored.get("ci95_high"),
             "status": stored.get("status"), "flags": list(stored.get("flags", []))}
    stderr = stored.get("stderr")
    if not stored.get("free"):
        entry.update(distribution="fixed", std=None)
    elif stderr is None or not math.isfinite(stderr):
        entry.update(distribution="uniform", std=None)
    else:
        entry.update(distribution="truncated_normal", std=float(stderr))
    return entry


def delay_distribution(rec: FitRecord) -> dict:
    """The motor delay [ms] as a categorical distribution: the search's last delay
    probabilities (`history.delay_probs`) when stored, else all mass at the fit's delay."""
    group = LAYOUT.group("motor_delay_ms")
    values = list(range(int(group.bounds[0]), int(group.bounds[1]) + 1))
    probs = next((h.get("delay_probs") for h in reversed(rec.history) if h.get("delay_probs")), None)
    source = "search_delay_probs"
    if probs is None or len(probs) != len(values) or not math.isclose(sum(probs), 1.0, abs_tol=1e-6):
        probs = [1.0 if v == rec.params.motor_delay_ms else 0.0 for v in values]
        source = "fit_value"
    return {"name": group.name, "unit": group.unit, "value": int(rec.params.motor_delay_ms),
            "distribution": "categorical", "values": values, "probabilities": [float(p) for p in probs],
            "source": source}


def randomization_doc(rec: FitRecord) -> dict:
    """The fit as a randomisation distribution (schema `twinlake.randomization/v1`).

    Needs the fit's stored error bars (`identifiability_json`); ValueError naming the fit
    otherwise. A fit that stores its full covariance gives the truncated-normal parameters as
    one multivariate normal (`"correlation": "joint_normal"`, `"covariance": {names, matrix}`
    in the parameters' units, truncated to the bounds box); an older fit's per-parameter
    errors only: `"correlation": "independent"` says so. The delay stays categorical.
    """
    ident = rec.identifiability
    if not ident or not ident.get("parameters"):
        raise RecordError(f"fit {rec.fit_id}: no stored error bars (identifiability_json is empty); "
                         "a posterior needs them (use a twinlake fit, or declared ranges)")
    from ..trust.statuses import fit_statuses, intervals_agree

    statuses = fit_statuses(rec)
    stored = {p["name"]: p for p in intervals_agree(ident, statuses)["parameters"]}  # intervals: estimated only
    integer = {LAYOUT.names[i] for i in LAYOUT.integer_indices}
    params = [_parameter_entry(n, v, stored.get(n) if n not in integer else None)  # offsets: fixed whole ms
              for n, v in zip(LAYOUT.names, rec.vector.tolist()) if n != "motor_delay_ms"]
    return {"schema": RANDOMIZATION_SCHEMA, "fit": rec.fit_id, "fit_source": rec.fit_source,
            "created_utc": rec.created_utc,
            "best_loss": rec.best_loss if math.isfinite(rec.best_loss) else None,
            "method": ident.get("method"), **_correlation(ident, params),
            "parameters": params, "delay": delay_distribution(rec)}


def _correlation(ident: dict, params: list[dict]) -> dict:
    """{"correlation": "joint_normal", "covariance": {names, matrix, method}} over the
    truncated-normal parameters when the stored covariance covers them, else independent."""
    cov = ident.get("covariance") or {}
    names = [p["name"] for p in params if p["distribution"] == "truncated_normal"]
    stored = list(cov.get("names") or [])
    if not names or not set(names) <= set(stored):
        return {"correlation": "independent"}
    idx = [stored.index(n) for n in names]
    matrix = [[cov["matrix"][i][j] for j in idx] for i in idx]
    if any(v is None or not math.isfinite(v) for row in matrix for v in row):
        return {"correlation": "independent"}
    return {"correlation": "joint_normal",
            "covariance": {"names": names, "matrix": matrix, "method": cov.get("method"),
                           "truncation": "the bounds box (redraw, then clip)"}}


def verdict_doc(rec: FitRecord, verdict=None) -> dict:
    """What every export carries of the fit's verdict (a `verdict_record.StoredVerdict`, None:
    not known) and each parameter's status (fit/core/parameter_status.py)."""
    from ..trust.statuses import fit_statuses

    doc = {"level": None, "reasons": [], "created_utc": None} if verdict is None else {
        "level": verdict.verdict.level.value, "reasons": list(verdict.verdict.reasons),
        "created_utc": verdict.created_utc}
    doc["parameter_status"] = {st.name: {"status": st.status.value, "shown": st.display(6), "reason": st.reason}
                               for st in fit_statuses(rec)}
    return doc


def verdict_comment(rec: FitRecord, verdict=None) -> str:
    """The verdict and the freed parameters' statuses as one XML comment (no '--' inside)."""
    doc = verdict_doc(rec, verdict)
    by: dict[str, list[str]] = {}
    for name, st in doc["parameter_status"].items():
        if st["status"] != "fixed":
            by.setdefault(st["status"].replace("_", " "), []).append(
                name if st["status"] in ("estimated", "not_identified") else f"{name} {st['shown']}")
    text = (f"verdict: {doc['level'] or 'unknown'}" + "".join(f"; {r}" for r in doc["reasons"]) + ". Parameter status: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in by.items()))
    return "<!-- " + text.replace("--", "- -") + " -->\n"


def export_fit(rec: FitRecord, fmt: str, out: Path, verdict=None) -> Path:
    """Write `rec` in format `fmt` (one of FORMATS) to `out`, carrying its `verdict` (a
    `StoredVerdict`) and every parameter's status; returns the path written. A FrankaTwin
    import's own file goes out byte for byte (its notes say the verdict is not in it)."""
    if fmt not in FORMATS:
        raise SettingError("format", repr(fmt), f"expected one of {', '.join(FORMATS)}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    trust = verdict_doc(rec, verdict)
    if fmt == "profile":
        return save_profile(rec.params, out, fit=rec.fit_id, fit_source=rec.fit_source,
                            created_utc=rec.created_utc, best_loss=rec.best_loss, friction_law=rec.friction_law,
                            configured_loads=rec.configured_loads, verdict=trust)
    if fmt == "mjcf":
        out.write_text(verdict_comment(rec, verdict) + mjcf_snippet(rec))
        return out
    if fmt == "model":
        from ..records.model_export import model_xml

        out.write_text(verdict_comment(rec, verdict) + model_xml(rec))
        return out
    if fmt == "randomization":
        out.write_text(json.dumps({**randomization_doc(rec), "verdict": trust}, indent=2, allow_nan=False) + "\n")
        return out
    raw = raw_frankatwin(rec)
    if raw is not None:
        out.write_bytes(raw.read_bytes())
        return out
    out.write_text(json.dumps({**frankatwin_doc(rec), "twinlake_verdict": trust}, indent=2, default=float) + "\n")
    return out


def raw_frankatwin(rec: FitRecord) -> Path | None:
    """The original sysid_best_params.json of a FrankaTwin import, or None."""
    raw = sorted((rec.path / "raw").glob("*.json")) if rec.path is not None and (rec.path / "raw").is_dir() else []
    return raw[0] if rec.fit_source == "frankatwin_import" and raw else None
