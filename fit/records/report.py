"""`twinlake fit report`: a self-contained HTML page (no network) plus the same plots as PNG.

At the top, the model-adequacy lines (training and held-out residual against the noise floor,
with the likely cause; fit/trust/adequacy.py). Plots (matplotlib, Agg): convergence per generation;
the parameters with their 95 % intervals against the nominal values and the bounds; the
correlation matrix of the free parameters (from the stored covariance, when there is one); and per
held-out run, sim against real per joint and the joint error over time. Images are embedded as
base64 PNG; a tiny inline script marks ``<body data-images-ok="N">`` once N images have decoded,
which the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ...sim.params import LAYOUT  # noqa: E402

_PNG_META = {"Software": None}


@dataclass(frozen=True)
class HeldOutTrace:
    """One held-out replay: times (N,), real and simulated joint positions (N,7) [rad]."""

    label: str
    t_s: np.ndarray
    q_real_rad: np.ndarray
    q_fitted_rad: np.ndarray
    q_nominal_rad: np.ndarray | None = None


@dataclass(frozen=True)
class ParamRow:
    """One parameter: value, 95 % interval (None when not computed), nominal, bounds, flags."""

    name: str
    value: float
    nominal: float
    lower_bound: float
    upper_bound: float
    ci_low: float | None = None
    ci_high: float | None = None
    flags: tuple[str, ...] = ()
    seed_min: float | None = None  # spread of the optima over several seeds
    seed_max: float | None = None
    free: bool = True  # searched by the fit (False: frozen at its value)


@dataclass
class ReportData:
    """Everything the page shows; built from the lake by the CLI, or directly in tests."""

    fit_id: str
    summary: dict[str, Any]
    params: list[ParamRow]
    history: list[dict[str, Any]] = field(default_factory=list)
    held_out: list[HeldOutTrace] = field(default_factory=list)
    validations: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    adequacy: list[tuple[str, bool | None]] = field(default_factory=list)  # (line, passed or None)
    covariance: dict | None = None  # the stored covariance block (names, matrix, method), None: not stored


def _save(fig: plt.Figure, path: Path) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata=_PNG_META)
    plt.close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return data


def plot_convergence(history: list[dict[str, Any]], path: Path) -> bytes:
    """Best, mean and min loss per generation (log scale when all positive)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    it = [h.get("iter") for h in history]
    for key, style in (("best", "-"), ("min", ":"), ("mean", "--")):
        ys = [np.nan if h.get(key) is None else h[key] for h in history]
        ax.plot(it, ys, style, label=key)
    vals = [h.get(k) for h in history for k in ("best", "min", "mean") if h.get(k) is not None]
    if vals and min(vals) > 0:
        ax.set_yscale("log")
    if not history:
        ax.text(0.5, 0.5, "no history recorded (imported fit?)", ha="center", transform=ax.transAxes)
    ax.set_xlabel("generation")
    ax.set_ylabel("loss")
    ax.set_title("Convergence")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return _save(fig, path)


def plotted_groups(params: list[ParamRow]) -> list[str]:
    """The `LAYOUT` groups `plot_parameters` draws: those with a row the fit searched."""
    free = {p.name for p in params if p.free}
    return [g.name for g in LAYOUT.groups if free.intersection(g.names)]


def plot_parameters(params: list[ParamRow], path: Path) -> bytes:
    """Per group (`LAYOUT`) with a parameter the fit searched (`ParamRow.free`; frozen groups are
    listed in the table only), each joint's value with its 95 % interval, the nominal value,
    the range over seeds (when known) and the bounds (grey)."""
    by_name = {p.name: p for p in params}
    groups = [g for g in LAYOUT.groups if g.name in plotted_groups(params)] or list(LAYOUT.groups[:1])
    widths = [g.size if g.per_joint else 1.4 for g in groups]
    fig, axes = plt.subplots(1, len(widths), figsize=(max(4.0, 15 * sum(widths) / 36), 3.6),
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, g in zip(axes[0], groups):
        labels = [f"J{j}" for j in range(1, g.size + 1)] if g.per_joint else [g.display]
        _param_axis(ax, [by_name.get(n) for n in g.names], labels, f"{g.display} [{g.unit}]")
    fig.tight_layout()
    return _save(fig, path)


def _param_axis(ax: plt.Axes, rows: list[ParamRow | None], labels: list[str], title: str) -> None:
    x = np.arange(len(rows))
    for i, p in enumerate(rows):
        if p is None:
            continue
        ax.plot([i - 0.35, i + 0.35], [p.lower_bound] * 2, color="0.6", lw=1)
        ax.plot([i - 0.35, i + 0.35], [p.upper_bound] * 2, color="0.6", lw=1)
        ax.plot(i + 0.15, p.nominal, "x", color="tab:orange", label="nominal" if i == 0 else None)
        if p.seed_min is not None and p.seed_max is not None:
            ax.plot([i - 0.15] * 2, [p.seed_min, p.seed_max], color="tab:green", lw=2,
                    label="seed range" if i == 0 else None)
        color = "tab:red" if p.flags else "tab:blue"
        if p.ci_low is not None and p.ci_high is not None:
            ax.errorbar(i, p.value, yerr=[[p.value - p.ci_low], [p.ci_high - p.value]], fmt="o", color=color,
                        capsize=3, label="fit ± 95 %" if i == 0 else None)
        else:
            ax.plot(i, p.value, "o", color=color, label="fit" if i == 0 else None)
    ax.set_xticks(x, labels)
    ax.set_title(title, fontsize=9)
    if len(rows) > 1:
        ax.legend(fontsize=7, loc="upper right")


def plot_correlation(covariance: dict, path: Path) -> bytes:
    """The correlation matrix (k, k) of the free parameters as a heat map (−1 blue … +1 red),
    the pairs with |ρ| ≥ 0.9 outlined."""
    from ..trust.covariance import STRONG_RHO, correlation

    names = covariance["names"]
    m = np.array([[np.nan if v is None else v for v in row] for row in covariance["matrix"]], dtype=np.float64)
    rho = correlation(m)
    size = max(4.0, 0.22 * len(names) + 2.0)
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    im = ax.imshow(rho, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for i, j in zip(*np.nonzero(np.abs(np.nan_to_num(rho)) >= STRONG_RHO)):
        if i != j:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.2, ec="k"))
    fig.colorbar(im, ax=ax, fraction=0.046, label="correlation ρ")
    ax.set_title(f"Correlation of the free parameters ({covariance.get('method')})", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_joints(trace: HeldOutTrace, path: Path) -> bytes:
    """Sim against real, per joint, for one held-out run."""
    fig, axes = plt.subplots(7, 1, figsize=(9, 11), sharex=True)
    for j, ax in enumerate(axes):
        ax.plot(trace.t_s, trace.q_real_rad[:, j], color="k", lw=1.2, label="real")
        ax.plot(trace.t_s, trace.q_fitted_rad[:, j], color="tab:blue", lw=1, label="sim, fitted")
        if trace.q_nominal_rad is not None:
            ax.plot(trace.t_s, trace.q_nominal_rad[:, j], color="tab:orange", lw=1, ls="--", label="sim, nominal")
        ax.set_ylabel(f"q{j + 1} [rad]", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper right", ncol=3)
    axes[0].set_title(f"Held-out run {trace.label}: sim against real")
    axes[-1].set_xlabel("t [s]")
    fig.tight_layout()
    return _save(fig, path)


def plot_errors(trace: HeldOutTrace, path: Path) -> bytes:
    """Joint error sim − real over time, fitted (solid) and nominal (dashed)."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for j in range(7):
        line, = ax.plot(trace.t_s, 1e3 * (trace.q_fitted_rad[:, j] - trace.q_real_rad[:, j]), lw=1, label=f"J{j + 1}")
        if trace.q_nominal_rad is not None:
            ax.plot(trace.t_s, 1e3 * (trace.q_nominal_rad[:, j] - trace.q_real_rad[:, j]), lw=0.8, ls="--",
                    color=line.get_color())
    ax.set_xlabel("t [s]")
    ax.set_ylabel("q_sim − q_real [mrad]")
    ax.set_title(f"Error over time, {trace.label} (solid: fitted, dashed: nominal)")
    ax.legend(fontsize=7, ncol=7, loc="upper right")
    fig.tight_layout()
    return _save(fig, path)


def render_report(data: ReportData, out_dir: str | Path) -> Path:
    """Write the PNGs and `index.html` into ``out_dir`` (created); returns the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images: list[tuple[str, str, bytes]] = [
        ("convergence", "Convergence", plot_convergence(data.history, out / "convergence.png")),
        ("parameters", "Parameters, 95 % intervals, nominal values and bounds",
         plot_parameters(data.params, out / "parameters.png")),
    ]
    if data.covariance and data.covariance.get("names"):
        images.append(("correlation", "Correlation matrix of the free parameters (|ρ| ≥ 0.9 outlined)",
                       plot_correlation(data.covariance, out / "correlation.png")))
    for i, trace in enumerate(data.held_out):
        stem = f"heldout_{i + 1:02d}"
        images.append((f"{stem}_joints", f"Held-out {trace.label}: sim against real per joint",
                       plot_joints(trace, out / f"{stem}_joints.png")))
        images.append((f"{stem}_error", f"Held-out {trace.label}: error over time",
                       plot_errors(trace, out / f"{stem}_error.png")))
    page = out / "index.html"
    page.write_text(_html(data, images), encoding="utf-8")
    return page


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}img{max-width:100%;display:block}"
          ".flag{color:#a00}figure{margin:1.5em 0}.adequacy li{font-size:15px;margin:.3em 0}"
          ".ok{color:#070}.open{color:#850}")
_ADEQUACY_CLASS = {True: "ok", False: "flag", None: "open"}
_SCRIPT = ("window.addEventListener('load',function(){var n=0;for(const i of document.images){"
           "if(i.complete&&i.naturalWidth>0)n++;}document.body.setAttribute('data-images-ok',String(n));});")


def _html(data: ReportData, images: list[tuple[str, str, bytes]]) -> str:
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>twinlake fit {esc(data.fit_id)}</title>",
             f"<style>{_STYLE}</style></head><body data-images-expected='{len(images)}'>",
             f"<h1>Fit {esc(data.fit_id)}</h1>",
             "<h2>Model adequacy</h2><ul class='adequacy'>",
             *[f"<li class='{_ADEQUACY_CLASS[ok]}'>{esc(text)}</li>" for text, ok in data.adequacy],
             "</ul>" if data.adequacy else "<li class='open'>not assessed</li></ul>",
             _table(["field", "value"], [[k, v] for k, v in data.summary.items()]),
             "<h2>Flags</h2><ul>"]
    parts += [f"<li class='flag'>{esc(f)}</li>" for f in data.flags] or ["<li>none</li>"]
    parts.append("</ul><h2>Validation on held-out runs</h2>")
    if data.validations:
        keys = list(data.validations[0])
        parts.append(_table(keys, [[v.get(k) for k in keys] for v in data.validations]))
    else:
        parts.append("<p>No validation rows for this fit yet (run <code>twinlake fit validate</code>).</p>")
    parts.append("<h2>Parameters</h2>")
    parts.append(_table(["parameter", "value", "95 % low", "95 % high", "nominal", "lower bound", "upper bound",
                         "seeds min", "seeds max", "flags"],
                        [[p.name, p.value, p.ci_low, p.ci_high, p.nominal, p.lower_bound, p.upper_bound,
                          p.seed_min, p.seed_max, ", ".join(p.flags)] for p in data.params]))
    for key, caption, png in images:
        b64 = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure id='{key}'><img alt='{esc(caption)}' src='data:image/png;base64,{b64}'>"
                     f"<figcaption>{esc(caption)} ({key}.png)</figcaption></figure>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(parts)


def report_data_from_lake(lake: Any, fit_id: str, *, nominal: Any = None, error_bars: bool = False) -> ReportData:
    """Gather a fit's record, its validations (with their stored samples) and its error bars
    (stored ``identifiability_json``, or computed now when ``error_bars``)."""
    import json

    from ...catalog import Lake
    from .record import load_fit
    from ...sim import DynamicsParams

    lk = lake if isinstance(lake, Lake) else Lake(Path(lake))
    rec = load_fit(lk, fit_id)
    nominal = nominal if nominal is not None else DynamicsParams.nominal()
    ident = json.loads(rec.extra["identifiability_json"]) if rec.extra.get("identifiability_json") else None
    if ident is None and error_bars:
        from ..trust.identifiability import identifiability_for_fit

        ident = identifiability_for_fit(lk, rec, rec.other_seeds).to_dict()
    params, flags = _param_rows(rec, nominal, ident)
    if ident is None:
        flags.append("no error bars: run `twinlake fit report --error-bars` (or store identifiability_json)")
    validations = _validations(lk, fit_id)
    if not validations:
        flags.append("not validated on any held-out run (G3 open): run `twinlake fit validate`")
    flags += [f"held-out {v['robot']}/{v['run']}: fitted parameters FAILED the declared thresholds"
              for v in validations if v["sim_label"] == "fitted" and v["verdict"] == "fail"]
    from .show import adequacy_lines, fit_validations

    adequacy = adequacy_lines(rec, fit_validations(lk.root, fit_id))
    flags += [f"model adequacy: {text}" for text, ok in adequacy if ok is False]
    summary = {"fit": rec.fit_id, "fit_source": rec.fit_source, "status": rec.status, "created_utc": rec.created_utc,
               "best_loss": rec.best_loss, "seed": rec.seed, "generations": len(rec.history),
               "train intervals": len(rec.train), "holdout intervals (fit)": len(rec.holdout),
               "condition number": (ident or {}).get("condition_number")}
    from ..trust.covariance import method_line, strong_pairs

    cov = (ident or {}).get("covariance")
    if ident is not None:
        summary["error bars"] = method_line(cov)
        summary["strongly correlated pairs"] = ", ".join(f"{a} ~ {b} ({r:+.2f})" for a, b, r in strong_pairs(cov)) \
            or "none"
    return ReportData(rec.fit_id, summary, params, list(rec.history), _held_out(lk, validations),
                      [{k: v for k, v in d.items() if k != "validation"} for d in validations], flags, adequacy, cov)


def _param_rows(rec: Any, nominal: Any, ident: dict | None) -> tuple[list[ParamRow], list[str]]:
    """One ParamRow per parameter (bounds from the fit's settings) and the parameter flags."""
    from ..replay.space import ParameterSpace

    space = (rec.settings or {}).get("space")
    bounds = np.array([space["bounds"][n] for n in LAYOUT.names]) if space else np.asarray(LAYOUT.bounds)
    free = set((ParameterSpace.from_json(space) if space else ParameterSpace()).free_names)
    by_name = {p["name"]: p for p in (ident or {}).get("parameters", [])}
    params, flags = [], []
    for i, (name, value, nom) in enumerate(zip(LAYOUT.names, rec.vector, nominal.to_vector())):
        p = by_name.get(name, {})
        row = ParamRow(name, float(value), float(nom), float(bounds[i, 0]), float(bounds[i, 1]), p.get("ci95_low"),
                       p.get("ci95_high"), tuple(f for f in p.get("flags", []) if f != "discrete"),
                       p.get("seed_min"), p.get("seed_max"), name in free)
        params.append(row)
        flags += [f"{name}: {f}" for f in row.flags]
    flags += [f"{name}: at a bound (fit record)" for name in rec.extra.get("at_bounds") or []]
    return params, flags


_VALIDATION_COLS = ("validation", "robot", "run", "sim_label", "q_rmse_all_rad", "dq_rmse_all_rad_s",
                    "ee_pos_rmse_3d_m", "verdict")


def _validations(lake: Any, fit_id: str) -> list[dict[str, Any]]:
    """The fit's validation rows from the catalog (view `validations`)."""
    from ...catalog import connect

    con = connect(lake)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE validations").fetchall()]
        if "fit" not in cols:
            return []
        rows = con.execute(f"SELECT {', '.join(_VALIDATION_COLS)} FROM validations WHERE fit = ? "
                           "ORDER BY robot, run, sim_label, created_utc", [fit_id]).fetchall()
    finally:
        con.close()
    return [dict(zip(_VALIDATION_COLS, r)) for r in rows]


def _held_out(lake: Any, validations: list[dict[str, Any]]) -> list[HeldOutTrace]:
    """Traces of the latest fitted (and nominal) validation of each run that stored samples."""
    from ..trust.validate import load_trajectory

    latest: dict[tuple[str, str], dict[str, str]] = {}
    for v in validations:
        latest.setdefault((v["robot"], v["run"]), {})[v["sim_label"]] = v["validation"]
    out = []
    for (robot, run), ids in sorted(latest.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        path = lake.root / "validations" / f"validation={ids.get('fitted')}" / "trajectory.parquet"
        if "fitted" not in ids or not path.is_file():
            continue
        fitted = load_trajectory(lake, ids["fitted"])
        nominal_q = load_trajectory(lake, ids["nominal"])["q_sim"] if "nominal" in ids else None
        out.append(HeldOutTrace(f"{robot}/{run}", fitted["t_s"], fitted["q_real"], fitted["q_sim"], nominal_q))
    return out
