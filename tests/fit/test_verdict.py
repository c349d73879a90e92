"""The verdict per fit (fit/trust/verdict.py, fit/reports/verdict_record.py) on real fits of
small recordings of the simulated arm (the demo robot's parameters, 2 s multisines):

- `good`: 14 parameters freed, at the noise floor, converged, identified; validated on a
  held-out run it is *trusted* (before that: *usable with caveats: not validated*);
- `payload`: trained on a run whose arm carries a 1 kg flange mass the model lacks (as the
  demo's first fit of FrankaTwin's 29): *not trusted*, the reason names the flange mass;
- `bound`: one parameter's box excludes its truth (at a bound), one barely resolvable: *usable
  with caveats* naming both;
- `cap`: started far off with the full-data LM capped at one iteration: its "not converged"
  caveat is in `fit show`, `fit report` and `fit list` alike (the README session's fixture
  lands with the live-path issue; this fit hits the same cap cheaply).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
import synth
from floor_recording import record_arm
from typer.testing import CliRunner

from twinlake.catalog import connect
from twinlake.cli import app
from twinlake.fit.records.record import load_fit
from twinlake.fit.reports.verdict_record import current_verdict, publish_verdict, stored_verdicts
from twinlake.fit.core.space import parse_space
from twinlake.fit.run import FitSettings, run_fit
from twinlake.fit.core.parameter_status import classify
from twinlake.fit.trust.verdict import Check, Evidence, Level, Verdict, decide
from twinlake.sim import DEMO_PROFILE_PATH, HOME_Q, PARAM_NAMES, load_params

TRUTH = load_params(DEMO_PROFILE_PATH)
FREE = {f"mu_viscous_j{j}": "0:4" for j in range(1, 8)} | {f"armature_j{j}": "0:0.6" for j in range(1, 8)}
FRANKATWIN_KEYS = {"best_score", "best_params_raw", "best_params_decoded", "history", "bounds", "args", "source"}


def _targets(seed: int, n: int = 2000) -> np.ndarray:
    return np.r_[np.tile(HOME_Q, (300, 1)), synth.multisine_targets(n - 300, seed=seed)]


def _specs(free: dict[str, str]) -> list[str]:
    """Every parameter frozen at the truth but `free` (name -> bounds)."""
    return [f"{n}={float(v)!r}" for n, v in zip(PARAM_NAMES, TRUTH.to_vector()) if n not in free] + \
        [f"{n}={b}" for n, b in free.items()]


def _cli(*args: str):
    return CliRunner().invoke(app, [*args])


def _run(lake: Path, fit_id: str, run: str, free: dict[str, str], *extra: str):
    """`fit run` through the CLI, in-process (`--workers 0`)."""
    params = [arg for spec in _specs(free) for arg in ("--params", spec)]
    res = _cli("fit", "run", "--train", f"r/{run}", *params, "--population", "4", "--generations", "1",
               "--refine", "0", "--workers", "0", "--id", fit_id, "--lake", str(lake), *extra)
    assert res.exit_code == 0, res.output[-3000:]
    return res


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("verdict") / "lake"
    synth.publish_run(root, "r", "train", record_arm(TRUTH, _targets(1), seed=1))
    synth.publish_run(root, "r", "hold", record_arm(TRUTH, _targets(2), seed=2))
    synth.publish_run(root, "r", "payload", record_arm(TRUTH, _targets(3), seed=3, payload_kg=1.0))
    return root


@pytest.fixture(scope="module")
def good(lake):
    """`fit run` of fit `good` (its CLI result)."""
    return _run(lake, "good", "train", FREE)


def test_a_fit_at_the_floor_converged_identified_and_validated_is_trusted(lake, good):
    res = good
    assert res.stdout.startswith("verdict: usable with caveats")  # first, before the adequacy lines
    assert "not validated on held-out runs" in " ".join(res.stdout.split()[:20])
    val = _cli("fit", "validate", "good", "--runs", "r/hold", "--lake", str(lake))
    assert val.exit_code == 0, val.output[-2000:]
    assert "q RMSE [mrad]" in val.stdout and "EE RMSE [mm]" in val.stdout  # the units survive rich
    shown = json.loads(_cli("fit", "show", "good", "--json", "--lake", str(lake)).stdout)
    assert shown["verdict"]["level"] == "trusted" and shown["verdict"]["trigger"] == "fit validate"
    assert any("held-out r/hold" in r and "explains this run" in r for r in shown["verdict"]["reasons"])
    assert {p["status"] for p in shown["parameter_status"] if p["name"] in FREE} == {"estimated"}
    # two rows, never rewritten: the fit run's and the validation's; the view keeps the latest
    rows = connect(lake).execute("SELECT level, trigger FROM verdicts WHERE fit = 'good' ORDER BY created_utc").fetchall()
    assert rows == [("usable with caveats", "fit run"), ("trusted", "fit validate")]
    text = _cli("fit", "show", "good", "--lake", str(lake)).stdout
    assert text.startswith("verdict: trusted") and "[kg·m²]" in text and "EE RMSE [mm]" in text
    assert "q RMSE fitted [mrad]" in text


def test_the_latest_verdict_wins_and_a_tie_goes_to_the_larger_stamp(lake, good):
    rec = load_fit(lake, "good")
    before = stored_verdicts(lake)["good"]
    ev = Evidence("good", "replay", (), ())
    for level in (Level.NOT_TRUSTED, Level.CAVEATS):
        publish_verdict(lake, "good", Verdict(level, (f"{level.value} by hand",)), ev, "test")
    latest = current_verdict(lake, rec)
    assert latest.verdict.reasons == ("usable with caveats by hand",) and latest.created_utc > before.created_utc
    con = connect(lake)
    same = con.execute("SELECT max(stamp) FROM verdicts WHERE fit = 'good' AND created_utc = "
                       "(SELECT max(created_utc) FROM verdicts WHERE fit = 'good')").fetchone()[0]
    assert con.execute("SELECT stamp FROM fit_verdicts WHERE fit = 'good'").fetchone()[0] == same


def test_an_unknown_flange_payload_is_not_trusted_and_refused_for_export(lake, tmp_path):
    _run(lake, "payload", "payload", FREE)
    verdict = current_verdict(lake, load_fit(lake, "payload")).verdict
    assert verdict.level is Level.NOT_TRUSTED
    first = verdict.reasons[0]
    assert "does not explain its own training data" in first and "flange-mass gravity" in first
    assert "parameter spec `+payload`" in first
    out = tmp_path / "sysid_best_params.json"
    refused = _cli("fit", "export", "payload", "--format", "frankatwin", "--out", str(out), "--lake", str(lake))
    assert refused.exit_code == 2 and not out.exists()
    assert "fit payload is not trusted" in refused.output and "flange-mass gravity" in refused.output
    forced = _cli("fit", "export", "payload", "--format", "frankatwin", "--out", str(out), "--force",
                  "--lake", str(lake))
    assert forced.exit_code == 0, forced.output
    doc = json.loads(out.read_text())
    assert set(doc) == FRANKATWIN_KEYS | {"twinlake_verdict"}  # FrankaTwin's keys unchanged, one of ours added
    assert doc["twinlake_verdict"]["level"] == "not trusted" and len(doc["best_params_raw"]) == 29
    assert doc["twinlake_verdict"]["parameter_status"]["armature_j1"]["status"] in ("estimated", "not_identified")
    for fmt, name in (("profile", "p.json"), ("randomization", "r.json"), ("mjcf", "j.xml"), ("model", "m.xml")):
        res = _cli("fit", "export", "payload", "--format", fmt, "--out", str(tmp_path / name), "--force",
                   "--lake", str(lake))
        assert res.exit_code == 0, res.output
        assert "not trusted" in (tmp_path / name).read_text()
    assert json.loads((tmp_path / "p.json").read_text())["provenance"]["verdict"]["level"] == "not trusted"
    assert np.array_equal(load_params(tmp_path / "p.json").to_vector(), load_fit(lake, "payload").vector)


def test_a_parameter_at_a_bound_and_one_unresolved_give_caveats_naming_them(lake, good):
    free = {"mu_viscous_j1": "3.3:4", "mu_viscous_j2": "0:4", "armature_j7": "0.0795:0.0815"}  # truth 3.1, 2.7, 0.08
    _run(lake, "bound", "train", free)
    verdict = current_verdict(lake, load_fit(lake, "bound")).verdict
    assert verdict.level is Level.CAVEATS, verdict.line()
    said = " ".join(verdict.reasons)
    assert "at a bound" in said and "mu_viscous_j1 ≥ 3.3" in said
    assert "not identified" in said and "armature_j7" in said and "mu_viscous_j2" not in said
    cmp = json.loads(_cli("fit", "compare", "good", "bound", "--json", "--lake", str(lake)).stdout)
    compared = {p["name"] for p in cmp["parameters"]}
    assert {"mu_viscous_j1", "mu_viscous_j2"} <= compared and "armature_j7" not in compared
    rest = {p["name"]: (p["status_a"], p["status_b"]) for p in cmp["not_compared"]}
    assert rest["armature_j7"] == ("estimated", "not identified") and rest["armature_j1"] == ("estimated", "fixed")


def test_wide_intervals_are_a_caveat_naming_the_parameters():
    ok = classify("armature_j1", 0.31, 0.0, 0.6, stderr=1e-3)
    wide = classify("mu_static_j7", 1.0, 0.0, 3.0, stderr=0.3)  # ± 0.59: 20 % of the range, under half
    held = (Check("training", "training residual 1.1× the noise floor, within 3×", True, False),
            Check("held-out r/hold", "held-out r/hold residual 1.0× the noise floor, within 3×", True, True))
    assert decide(Evidence("f", "replay", held, (ok,))).level is Level.TRUSTED
    v = decide(Evidence("f", "replay", held, (ok, wide)))
    assert v.level is Level.CAVEATS and v.reasons == ("wide 95 % intervals (half-width over 10 % of the bound range): "
                                                      "mu_static_j7",)


def test_the_lm_cap_caveat_is_in_show_report_and_list_alike(lake, tmp_path):
    start = TRUTH.to_vector().copy()
    for n in FREE:
        start[PARAM_NAMES.index(n)] = 0.55 if n.startswith("armature") else 3.9
    settings = FitSettings(train=["r/train"], holdout=[], space=parse_space(_specs(FREE)).to_json(), population=4,
                           generations=1, refine_iterations=1, explore_s=0.0, start_params=start.tolist(), starts=1)
    rec = run_fit(lake, settings, fit_id="cap", workers=0, progress=False)
    assert "not converged: the full-data LM reached its cap of 1" in rec.extra["local_gates"]
    shown = _cli("fit", "show", "cap", "--lake", str(lake)).stdout  # no verdict stored: decided now
    listed = _cli("fit", "list", "--lake", str(lake)).stdout
    as_json = {f["fit"]: f["verdict"] for f in json.loads(_cli("fit", "list", "--json", "--lake", str(lake)).stdout)}
    assert _cli("fit", "report", "cap", "--out", str(tmp_path / "rep"), "--lake", str(lake)).exit_code == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    verdict = current_verdict(lake, rec).verdict
    cap = next(r for r in verdict.reasons if r.startswith("not converged"))
    flat = lambda text: " ".join(text.split())  # noqa: E731  (undo the console's wrapping)
    assert flat(shown).startswith(f"verdict: {verdict.level.value}")
    assert as_json["cap"]["level"] == verdict.level.value and as_json["cap"]["reasons"] == list(verdict.reasons)
    row = next(line for line in listed.splitlines() if line.startswith("│ cap "))
    assert verdict.level.value.split()[0] in row
    assert f"cap: {verdict.line()}" in listed.splitlines()  # the reasons under the table, as show and report say them
    head = html.unescape(re.sub(r"<[^>]+>", " ", page[:page.index("<h1>")]))
    for reason in verdict.reasons:
        assert flat(reason) in flat(shown) and flat(reason) in flat(head)
    assert cap in as_json["cap"]["reasons"] and cap in verdict.line()


def test_rendered_sql_tables_keep_bracketed_units(lake):
    """rich reads "[mrad]" as markup and drops it unless escaped: `twinlake sql`'s table keeps it,
    in a name and in a value."""
    res = _cli("sql", "select 'q RMSE [mrad]' as label, 0.5 as \"EE RMSE [mm]\", 'armature [kg·m²]' as unit",
               "--lake", str(lake))
    assert res.exit_code == 0, res.output
    assert "q RMSE [mrad]" in res.stdout and "EE RMSE [mm]" in res.stdout and "armature [kg·m²]" in res.stdout
