"""`twinlake fit report`: a self-contained HTML page (no network) plus the same plots as PNG.

First the fit's verdict and its reasons (fit/trust/verdict.py), then the model-adequacy lines (training and held-out residual against the noise floor,
with the likely cause; fit/trust/adequacy.py), the summary, the flags and the validations. Then
the parameters: the free ones first, each with its unit (`sim.params.LAYOUT`), its value and 95 %
interval rounded to the interval's precision (an interval only for an estimated parameter; every
parameter's status beside it, and each flag said once per parameter); the frozen ones folded in a ``<details>`` element.
Where a train run was a designed excitation (`twinlake excite --design`), its predicted relative
95 % half-widths beside the realised ones. Then the figures (fit/reports/report_plots.py):
convergence, parameters, the correlation matrix of the free parameters (when a covariance is
stored), and per held-out run the replay over the recording and the residual with its spectrum
against the noise floor. The data (fit/reports/report_data.py) come from the lake via fit/reports/report_lake.py.

Images are embedded as base64 PNG; a tiny inline script marks ``<body data-images-ok="N">`` once
N images have decoded, which the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from ...sim.arm_model.params import LAYOUT
from .report_data import ParamRow, ReportData
from .report_plots import plot_convergence, plot_correlation, plot_joints, plot_parameters, plot_residual

UNITS: dict[str, str] = dict(zip(LAYOUT.names, LAYOUT.units))  # parameter → unit, from the layout's groups


def render_report(data: ReportData, out_dir: str | Path) -> Path:
    """Write the PNGs and `index.html` into ``out_dir`` (created); returns the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images: list[tuple[str, str, bytes]] = [
        ("convergence", "Convergence", plot_convergence(data.history, out / "convergence.png")),
        ("parameters", "Free parameters, 95 % intervals, nominal values and bounds",
         plot_parameters(data.params, out / "parameters.png")),
    ]
    if data.covariance and data.covariance.get("names"):
        images.append(("correlation", "Correlation matrix of the free parameters (|ρ| ≥ 0.9 outlined)",
                       plot_correlation(data.covariance, out / "correlation.png")))
    for i, trace in enumerate(data.held_out):
        stem = f"heldout_{i + 1:02d}"
        images.append((f"{stem}_joints", f"Held-out {trace.label}: the replay over the recording, q per joint",
                       plot_joints(trace, out / f"{stem}_joints.png")))
        images.append((f"{stem}_residual", f"Held-out {trace.label}: residual over time and its spectrum "
                                           "against the noise floor",
                       plot_residual(trace, out / f"{stem}_residual.png")))
    page = out / "index.html"
    page.write_text(_html(data, images), encoding="utf-8")
    return page


def _table(headers: list[str], rows: list[list[Any]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    cls = f" class='{css}'" if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _decimals(half_width: float) -> int | None:
    """Decimal places that show `half_width` to 2 significant digits (None: not a usable width)."""
    if not (math.isfinite(half_width) and half_width > 0):
        return None
    return max(0, 1 - math.floor(math.log10(half_width)))


def format_value(value: float, low: float | None = None, high: float | None = None) -> tuple[str, str]:
    """(value, 95 % interval) as text, rounded to the interval's precision (the half-width to 2
    significant digits); without an interval the value to 4 significant digits and "—"."""
    half = None if low is None or high is None else (high - low) / 2.0
    places = None if half is None else _decimals(half)
    if places is None:
        return f"{value:.4g}", "—" if half is None else f"[{low:.4g}, {high:.4g}]"
    if places > 6 or max(abs(value), abs(low), abs(high)) >= 1e6:  # tiny or huge: scientific, same precision
        digits = max(1, math.floor(math.log10(max(abs(value), half))) - math.floor(math.log10(half)) + 1)
        return f"{value:.{digits}e}", f"[{low:.{digits}e}, {high:.{digits}e}] (± {half:.1e})"
    # never fewer than 3 significant digits of the value: a wide interval must not print 0.4799 as "0"
    shown = max(places, 2 - math.floor(math.log10(abs(value)))) if value != 0 else places
    return f"{value:.{shown}f}", f"[{low:.{places}f}, {high:.{places}f}] (± {half:.{places}f})"


def _param_cells(p: ParamRow) -> list[Any]:
    value, interval = format_value(p.value, p.ci_low, p.ci_high)
    rel = p.half_width_rel
    return [p.name, UNITS[p.name], p.status or "—", value, interval, "—" if rel is None else f"{rel:.2%}",
            f"{p.nominal:.4g}", f"[{p.lower_bound:.4g}, {p.upper_bound:.4g}]", ", ".join(p.flags)]


def _parameters_html(params: list[ParamRow]) -> str:
    """The free parameters' table, then the frozen ones folded in a <details> element."""
    free = [p for p in params if p.free]
    frozen = [p for p in params if not p.free]
    parts = [f"<h2>Parameters</h2><h3>Free ({len(free)})</h3>",
             _table(["parameter", "unit", "status", "value", "95 % interval (estimated only)", "± relative", "nominal",
                     "bounds", "other flags"],
                    [_param_cells(p) for p in free], "free-params")]
    if frozen:
        parts.append(f"<details class='frozen-params'><summary>Frozen ({len(frozen)}): held at these values, "
                     "not searched</summary>")
        parts.append(_table(["parameter", "unit", "value", "nominal", "bounds"],
                            [[p.name, UNITS[p.name], f"{p.value:.4g}", f"{p.nominal:.4g}",
                              f"[{p.lower_bound:.4g}, {p.upper_bound:.4g}]"] for p in frozen]))
        parts.append("</details>")
    return "".join(parts)


def _designs_html(designs: dict[str, dict], params: list[ParamRow]) -> str:
    """Per designed train run, its predicted relative 95 % half-widths beside the realised ones
    (and their ratio); '' when no train run was designed."""
    by_name = {p.name: p for p in params}
    parts = []
    for run, design in designs.items():
        rows = []
        for name, predicted in design["predicted_half_width_rel"].items():
            realised = by_name[name].half_width_rel if name in by_name else None
            ratio = realised / predicted if realised is not None and predicted else None
            rows.append([name, f"{predicted:.2%}", "—" if realised is None else f"{realised:.2%}",
                         "—" if ratio is None else f"{ratio:.2f}"])
        parts.append(f"<h3>Designed run {html.escape(run)} (criterion {html.escape(str(design.get('criterion')))}, "
                     f"linearised at {html.escape(str(design.get('linearised_at')))})</h3>")
        parts.append(_table(["parameter", "predicted ± relative", "realised ± relative", "realised / predicted"],
                            rows, "design-check"))
    if not parts:
        return ""
    return "<h2>Predicted against realised 95 % half-widths</h2>" + "".join(parts)


_STYLE = (".verdict p{font-size:22px;margin:0 0 .3em}.verdict li{font-size:15px}"
          "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}img{max-width:100%;display:block}"
          ".flag{color:#a00}figure{margin:1.5em 0}.adequacy li{font-size:15px;margin:.3em 0}"
          ".ok{color:#070}.open{color:#850}details summary{cursor:pointer;margin:.5em 0}")
_ADEQUACY_CLASS = {True: "ok", False: "flag", None: "open"}
_SCRIPT = ("window.addEventListener('load',function(){var n=0;for(const i of document.images){"
           "if(i.complete&&i.naturalWidth>0)n++;}document.body.setAttribute('data-images-ok',String(n));});")


_VERDICT_CLASS = {"trusted": "ok", "usable with caveats": "open", "not trusted": "flag"}


def _verdict_html(verdict: tuple[str, list[str]] | None) -> str:
    """The verdict and its reasons: the first thing on the page."""
    if verdict is None:
        return "<p class='verdict open'><strong>verdict: not decided</strong></p>"
    level, reasons = verdict
    items = "".join(f"<li>{html.escape(r)}</li>" for r in reasons)
    return (f"<div class='verdict'><p class='{_VERDICT_CLASS.get(level, 'open')}'><strong>verdict: "
            f"{html.escape(level)}</strong></p><ul class='reasons'>{items}</ul></div>")


def _html(data: ReportData, images: list[tuple[str, str, bytes]]) -> str:
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>twinlake fit {esc(data.fit_id)}</title>",
             f"<style>{_STYLE}</style></head><body data-images-expected='{len(images)}'>",
             _verdict_html(data.verdict),
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
    parts.append(_parameters_html(data.params))
    parts.append(_designs_html(data.designs, data.params))
    for key, caption, png in images:
        b64 = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure id='{key}'><img alt='{esc(caption)}' src='data:image/png;base64,{b64}'>"
                     f"<figcaption>{esc(caption)} ({key}.png)</figcaption></figure>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(parts)
