"""The fit report: PNGs written, HTML self-contained, every plot renders in a headless browser."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import numpy as np
import pytest

from twinlake.fit.records.report import HeldOutTrace, ParamRow, ReportData, render_report
from twinlake.sim import DEFAULT_BOUNDS, PARAM_NAMES, DynamicsParams

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _data() -> ReportData:
    rng = np.random.default_rng(0)
    nominal = DynamicsParams.nominal().to_vector()
    value = np.clip(nominal * 1.3, DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1])
    params = [ParamRow(n, float(v), float(nv), float(lo), float(hi), float(v) - 0.05, float(v) + 0.05,
                       ("unidentifiable",) if n == "armature_j7" else (), float(v) - 0.02, float(v) + 0.03)
              for n, v, nv, (lo, hi) in zip(PARAM_NAMES, value, nominal, DEFAULT_BOUNDS)]
    t = np.arange(500) * 0.01
    q_real = 0.2 * np.sin(np.outer(t, np.arange(1, 8)) * 0.5)
    traces = [HeldOutTrace(f"robot=r1 run=held{i}", t, q_real, q_real + 0.01 * rng.standard_normal(q_real.shape),
                           q_real + 0.05) for i in range(2)]
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
    assert pngs == ["convergence.png", "correlation.png", "heldout_01_error.png", "heldout_01_joints.png",
                    "heldout_02_error.png", "heldout_02_joints.png", "parameters.png"]
    text = page.read_text()
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert len(embedded) == 7
    for b64, name in zip(embedded, ["convergence", "parameters", "correlation"]):
        assert base64.b64decode(b64) == (tmp_path / f"{name}.png").read_bytes()
    assert "http://" not in text and "https://" not in text  # nothing fetched from a network
    assert "armature_j7: unidentifiable" in text and "pass" in text
    assert "Correlation matrix of the free parameters" in text


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


def test_the_parameter_plot_draws_only_the_groups_a_fit_searched(tmp_path):
    """A fit of the default 29 (payload, asymmetry, bias, ... frozen) plots 5 groups and no
    empty axes; a fit with +payload adds the payload's; frozen groups warn nothing."""
    import warnings

    from twinlake.fit.records.report import _param_rows, plot_parameters, plotted_groups
    from twinlake.fit.replay.space import parse_space
    from twinlake.sim import LAYOUT

    class Rec:
        def __init__(self, space):
            self.settings, self.vector, self.extra = {"space": space.to_json()}, DynamicsParams.nominal().to_vector(), {}

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
