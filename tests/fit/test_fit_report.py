"""The fit report: PNGs written, HTML self-contained, every plot renders in a headless browser."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import numpy as np
import pytest

from twinlake.fit.reports.report import format_value, render_report
from twinlake.fit.reports.report_data import HeldOutTrace, ParamRow, ReportData
from twinlake.fit.reports.report_plots import residual_spectrum
from twinlake.fit.core.space import ParameterSpace
from twinlake.fit.core.noise_floor import estimate_noise_floor
from twinlake.sim import DEFAULT_BOUNDS, LAYOUT, PARAM_NAMES, DynamicsParams

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


NOISE_RAD = 1e-4  # σ of the synthetic recording's q noise
RESIDUAL_RAD = 1e-3  # σ of the synthetic replay's (white) residual
FREE = set(ParameterSpace().free_names)  # the default fit's free parameters


def _data() -> ReportData:
    rng = np.random.default_rng(0)
    nominal = DynamicsParams.nominal().to_vector()
    value = np.clip(nominal * 1.3, DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1])
    params = [ParamRow(n, float(v), float(nv), float(lo), float(hi), float(v) - 0.05, float(v) + 0.05,
                       ("unidentifiable",) if n == "armature_j7" else (), float(v) - 0.02, float(v) + 0.03,
                       n in FREE)
              for n, v, nv, (lo, hi) in zip(PARAM_NAMES, value, nominal, DEFAULT_BOUNDS)]
    t = np.arange(2000) * 0.001
    q_real = 0.2 * np.sin(np.outer(t, np.arange(1, 8)) * 0.5) + NOISE_RAD * rng.standard_normal((len(t), 7))
    stored = estimate_noise_floor([q_real])
    traces = [HeldOutTrace(f"robot=r1 run=held{i}", t, q_real,
                           q_real + RESIDUAL_RAD * rng.standard_normal(q_real.shape), q_real + 0.05,
                           stored if i == 1 else None) for i in range(2)]
    history = [{"iter": i, "best": 1.0 / (i + 1), "min": 1.0 / (i + 1), "mean": 2.0 / (i + 1)} for i in range(10)]
    return ReportData(
        fit_id="fit-test",
        summary={"fit_source": "twinlake", "best_loss": 0.1},
        params=params,
        history=history,
        held_out=traces,
        validations=[{"run": "held0", "sim_label": "fitted", "q_rmse_all_rad": 0.01, "verdict": "pass"}],
        flags=["armature_j7: unidentifiable (J7 barely moved)"],
        covariance=_covariance(rng),
        designs={"r1/designed": {"criterion": "worst", "linearised_at": "nominal",
                                 "predicted_half_width_rel": {"armature_j1": 0.1, "mu_viscous_j7": 0.2}}},
        verdict=("usable with caveats", ["not identified (1 of 28 freed): armature_j7"]),
    )


def _covariance(rng) -> dict:
    """A stored covariance block of 4 free parameters, the first two correlated ρ ≈ 0.95."""
    a = rng.standard_normal((200, 4))
    a[:, 1] = a[:, 0] + 0.3 * a[:, 1]
    cov = np.cov(a.T)
    return {"names": ["armature_j1", "mu_static_j1", "dynamic_ratio_j1", "mu_viscous_j1"],
            "matrix": cov.tolist(), "method": "hac_bartlett_andrews"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return render_report(_data(), out), out


def test_report_writes_pngs_and_a_self_contained_page(rendered):
    page, tmp_path = rendered
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["convergence.png", "correlation.png", "heldout_01_joints.png", "heldout_01_residual.png",
                    "heldout_02_joints.png", "heldout_02_residual.png", "parameters.png"]
    text = page.read_text()
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert len(embedded) == 7
    for b64, name in zip(embedded, ["convergence", "parameters", "correlation"]):
        assert base64.b64decode(b64) == (tmp_path / f"{name}.png").read_bytes()
    assert "http://" not in text and "https://" not in text  # nothing fetched from a network
    assert "armature_j7: unidentifiable" in text and "pass" in text
    assert "Correlation matrix of the free parameters" in text
    assert "residual over time and its spectrum against the noise floor" in text
    assert re.search(r"<figure id='heldout_01_residual'><img alt='[^']*' src='data:image/png;base64,", text)


def test_free_parameters_come_first_with_units_and_the_frozen_ones_are_folded(rendered):
    page, _ = rendered
    text = page.read_text()
    free_table = text[text.index("<table class='free-params'>"):]
    free_table = free_table[:free_table.index("</table>")]
    folded = text[text.index("<details class='frozen-params'>"):text.index("</details>")]
    free_rows = re.findall(r"<tr><td>([a-z0-9_]+)</td><td>([^<]*)</td>", free_table)
    assert [name for name, _ in free_rows] == [n for n in PARAM_NAMES if n in FREE]  # all free, in layout order
    units = dict(zip(LAYOUT.names, LAYOUT.units))
    assert all(unit == units[name] for name, unit in free_rows)
    assert ("armature_j1", "kg·m²") in free_rows and ("mu_viscous_j1", "N·m·s/rad") in free_rows
    frozen = [n for n in PARAM_NAMES if n not in FREE]
    assert len(frozen) > 0 and all(f"<td>{n}</td>" in folded for n in frozen)
    assert all(f"<td>{n}</td>" not in free_table for n in frozen)
    assert text.index("class='free-params'") < text.index("<details class='frozen-params'>")
    assert f"Frozen ({len(frozen)})" in folded
    # value and interval at the interval's precision: ± 0.05 gives 3 decimals
    row = re.search(r"<td>armature_j1</td><td>kg·m²</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>", free_table)
    assert row.group(1) == "0.254"  # 0.2535
    assert re.fullmatch(r"\[0\.20[34], 0\.30[34]\] \(± 0\.050\)", row.group(2)), row.group(2)  # 0.2035, 0.3035


def test_predicted_and_realised_half_widths_side_by_side_only_for_a_designed_run(rendered, tmp_path):
    page, _ = rendered
    text = page.read_text()
    table = text[text.index("<table class='design-check'>"):]
    table = table[:table.index("</table>")]
    # armature_j1: value 0.2535, interval ± 0.05 → realised 19.72 %, predicted 10 %
    assert "<tr><td>armature_j1</td><td>10.00%</td><td>19.72%</td><td>1.97</td></tr>" in table
    assert "Designed run r1/designed" in text
    data = _data()
    data.designs, data.held_out = {}, []
    plain = render_report(data, tmp_path / "plain").read_text()
    assert "design-check" not in plain and "Predicted against realised" not in plain


def test_format_value_rounds_to_the_interval():
    assert format_value(0.123456, 0.1, 0.14) == ("0.123", "[0.100, 0.140] (± 0.020)")
    assert format_value(12.345, 10.0, 14.0) == ("12.3", "[10.0, 14.0] (± 2.0)")
    assert format_value(123.4, 0.0, 300.0) == ("123", "[0, 300] (± 150)")
    assert format_value(3.2e-9, 3.0e-9, 3.4e-9) == ("3.20e-09", "[3.00e-09, 3.40e-09] (± 2.0e-10)")
    assert format_value(0.1234567) == ("0.1235", "—")
    assert format_value(0.4799, -75.6, 76.4) == ("0.480", "[-76, 76] (± 76)")  # never "0" for 0.4799


def test_the_residual_spectrum_sits_on_the_floor_it_is_drawn_against():
    """White residual of σ_r at 1 kHz: the Welch PSD averages 2σ_r²/fs; the floor line is the
    white-noise PSD of the noise floor σ (stored with the validation, or estimated when absent),
    and both agree on the same recording."""
    data = _data()
    estimated, stored = (residual_spectrum(t) for t in data.held_out)
    assert estimated.rate_hz == pytest.approx(1000.0)
    level = np.mean(estimated.psd_rad2_hz[1:-1], axis=0)
    assert level == pytest.approx(2 * RESIDUAL_RAD ** 2 / 1000.0, rel=0.15)
    assert estimated.floor_psd_rad2_hz == pytest.approx(2 * NOISE_RAD ** 2 / 1000.0, rel=0.2)
    assert "estimated from this recording" in estimated.floor_text
    assert "stored with the validation" in stored.floor_text
    silent = HeldOutTrace("noise-free", data.held_out[0].t_s, np.zeros((2000, 7)), np.zeros((2000, 7)))
    quiet = residual_spectrum(silent)
    assert "not measurable" in quiet.floor_text and "no floor line" in quiet.floor_text


def test_report_is_deterministic(tmp_path):
    data = _data()
    data.held_out = data.held_out[:1]
    a = render_report(data, tmp_path / "a").read_bytes()
    b = render_report(data, tmp_path / "b").read_bytes()
    assert a == b


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary on this machine")
def test_report_renders_every_plot_in_a_headless_browser(rendered, tmp_path):
    page, _ = rendered
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
           "--dump-dom", page.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dom = out.stdout
    expected = re.search(r'data-images-expected="(\d+)"', dom)
    ok = re.search(r'data-images-ok="(\d+)"', dom)
    assert expected and ok, f"chromium did not run the page's load script: {out.stderr[-500:]}"
    assert int(expected.group(1)) == 7  # the correlation matrix included
    assert int(ok.group(1)) == 7
    assert '<details class="frozen-params">' in dom  # folded: rendered closed (no `open` attribute)


def test_the_parameter_plot_draws_only_the_groups_a_fit_searched(tmp_path):
    """A fit of the default 29 (payload, asymmetry, bias, ... frozen) plots 5 groups and no
    empty axes; a fit with +payload adds the payload's; frozen groups warn nothing."""
    import warnings

    from twinlake.fit.reports.report_lake import _param_rows
    from twinlake.fit.reports.report_plots import plot_parameters, plotted_groups
    from twinlake.fit.core.space import parse_space
    from twinlake.sim import LAYOUT

    class Rec:
        def __init__(self, space):
            self.settings, self.vector, self.extra = {"space": space.to_json()}, DynamicsParams.nominal().to_vector(), {}
            self.identifiability = None

    nominal = DynamicsParams.nominal()
    default_rows, _ = _param_rows(Rec(parse_space([])), nominal, None)
    assert len(default_rows) == len(LAYOUT.names) > 29
    assert plotted_groups(default_rows) == ["armature", "mu_static", "dynamic_ratio", "mu_viscous", "motor_delay_ms"]
    payload_rows, _ = _param_rows(Rec(parse_space(["+payload", "+smooth-friction"])), nominal, None)
    assert plotted_groups(payload_rows) == ["armature", "mu_static", "mu_viscous", "motor_delay_ms", "payload_mass",
                                            "payload_com_x", "payload_com_y", "payload_com_z"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's tight_layout warning on too many axes
        assert plot_parameters(payload_rows, tmp_path / "p.png").startswith(PNG_MAGIC)


def test_a_designed_train_runs_predictions_reach_the_report_from_the_lake(tmp_path):
    """`twinlake excite --design` stores `design` in the run's metadata.json, which ingest keeps
    as the run's metadata_json: the report of a fit trained on it shows the table, only for it."""
    import synth

    from twinlake.fit.records.record import FitRecord, IntervalUse, publish_fit
    from twinlake.fit.records.design_check import train_designs
    from twinlake.fit.reports.report_lake import report_data_from_lake

    design = {"schema": "twinlake.excitation_design/v1", "criterion": "worst", "linearised_at": "nominal",
              "predicted_half_width_rel": {"armature_j1": 0.03, "mu_viscous_j1": 0.05}}
    synth.publish_run(tmp_path, "demo", "designed", synth.record(synth.TRUTH, 300, seed=1), {"design": design})
    synth.publish_run(tmp_path, "demo", "plain", synth.record(synth.TRUTH, 300, seed=2), {"status": "done"})
    synth.publish_run(tmp_path, "demo", "other", synth.record(synth.TRUTH, 300, seed=3), {"design": design})
    rec = FitRecord(fit_id="f1", fit_source="twinlake", created_utc="2026-01-01T00:00:00+00:00", status="done",
                    best_loss=0.0, params=synth.TRUTH, seed=0, settings={}, history=[],
                    runs=[IntervalUse("demo", "plain", 0, 0, 299, "train", 1.0),
                          IntervalUse("demo", "designed", 0, 0, 299, "train", 1.0),
                          IntervalUse("demo", "other", 0, 0, 299, "holdout", 1.0)])  # held out: not shown
    publish_fit(tmp_path, rec)
    assert list(train_designs(tmp_path, rec)) == ["demo/designed"]
    data = report_data_from_lake(tmp_path, "f1")
    assert data.designs == {"demo/designed": design}
    text = render_report(data, tmp_path / "rep").read_text()
    assert "Designed run demo/designed" in text and "<td>armature_j1</td><td>3.00%</td><td>—</td>" in text


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary on this machine")
def test_the_verdict_is_the_first_visible_text_in_a_headless_browser(rendered, tmp_path):
    """What a person sees first: the DOM Chromium built, its body's text in document order
    (scripts and styles are not text a person sees)."""
    page, _ = rendered
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000",
           "--dump-dom", page.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    body = dom[dom.index("<body"):]
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", body, flags=re.S)
    words = " ".join(re.sub(r"<[^>]+>", " ", body).split())
    assert words.startswith("verdict: usable with caveats not identified (1 of 28 freed): armature_j7"), words[:200]
    assert words.index("verdict:") < words.index("Fit fit-test") < words.index("Model adequacy")


def test_every_joints_parameter_is_readable_whatever_the_other_joints_ranges():
    """The old plot shared one axis per group: J7's ±76 interval flattened J1..J6 to a line at 0.
    Each joint is now drawn within its own bounds box: on every axis, each joint's plotted
    values (bounds, value, interval, nominal) span at least half the axis height."""
    from twinlake.fit.reports.report_plots import parameter_figure

    rows = []
    for n, nv, (lo, hi) in zip(PARAM_NAMES, DynamicsParams.nominal().to_vector(), DEFAULT_BOUNDS):
        wide = n.endswith("_j7")
        lo, hi = (lo, hi * 200) if wide else (lo, hi)
        v = lo + 0.3 * (hi - lo)
        half = 0.2 * (hi - lo) if wide else 0.01 * (hi - lo)
        rows.append(ParamRow(n, float(v), float(nv), float(lo), float(hi), v - half, v + half, (), None, None,
                             n in FREE, "estimated"))
    fig = parameter_figure(rows)
    axes = [ax for ax in fig.axes if ax.get_xticks().size]
    assert len(axes) == 5
    for ax in axes:
        bottom, top = ax.get_ylim()
        joints: dict[int, list[float]] = {}
        for line in ax.get_lines():
            for x, y in zip(np.atleast_1d(line.get_xdata()), np.atleast_1d(line.get_ydata())):
                joints.setdefault(int(round(float(x))), []).append(float(y))
        assert sorted(joints) == list(range(len(ax.get_xticks())))
        for j, ys in joints.items():
            assert (max(ys) - min(ys)) >= 0.5 * (top - bottom), (ax.get_title(), j)
            assert len({round(y, 6) for y in ys}) >= 3, (ax.get_title(), j)  # value, bounds, nominal apart


def test_the_convergence_axis_names_what_it_counts():
    from twinlake.fit.reports.report_plots import convergence_axis

    assert convergence_axis([{"stage": "local-cheap"}, {"stage": "local-full"}]) == "LM iteration"
    assert convergence_axis([{"stage": "cma"}, {}]) == "generation (CMA-ES)"
    assert convergence_axis([{"stage": "cma"}, {"stage": "refine"}]) == "generation (CMA-ES) / LM iteration"
