"""The README session's fit (tests/session/readme_session.py): `fit show`, `fit report` and
`fit list` say the same verdict with the same reasons, first; the local search's LM-cap caveat
("not converged", stored in `fits.local_gates`) is among them in all three exactly when the fit
hit its cap. Read-only over the session's lake."""

from __future__ import annotations

import html
import json
import re

from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.fit.records.record import load_fit
from twinlake.fit.reports.verdict_record import current_verdict


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_show_report_and_list_agree_on_the_verdict_and_the_lm_cap_caveat(readme_session, tmp_path):
    lake, fit = str(readme_session.lake), readme_session.fit
    verdict = current_verdict(readme_session.lake, load_fit(readme_session.lake, fit))
    assert verdict.created_utc is not None and verdict.trigger == "fit validate"  # the latest evidence's row
    run = CliRunner()
    shown = run.invoke(app, ["fit", "show", fit, "--lake", lake])
    as_json = json.loads(run.invoke(app, ["fit", "show", fit, "--json", "--lake", lake]).stdout)["verdict"]
    listed = run.invoke(app, ["fit", "list", "--lake", lake]).stdout
    listed_json = {f["fit"]: f["verdict"] for f in json.loads(run.invoke(app, ["fit", "list", "--json", "--lake", lake]).stdout)}
    report = run.invoke(app, ["fit", "report", fit, "--out", str(tmp_path / "rep"), "--lake", lake])
    assert shown.exit_code == 0 and report.exit_code == 0, shown.output + report.output
    page = (tmp_path / "rep" / "index.html").read_text()
    head = _flat(html.unescape(re.sub(r"<[^>]+>", " ", page[page.index("<body"):page.index("<h1>")])))
    line = verdict.verdict.line()
    assert shown.stdout.startswith(f"verdict: {verdict.verdict.level.value}")
    assert head.startswith(f"verdict: {verdict.verdict.level.value}")
    assert f"{fit}: {line}" in listed.splitlines()
    assert as_json["reasons"] == listed_json[fit]["reasons"] == list(verdict.verdict.reasons)
    for reason in verdict.verdict.reasons:
        assert _flat(reason) in _flat(shown.stdout) and _flat(reason) in head
    capped = "not converged" in (load_fit(readme_session.lake, fit).extra.get("local_gates") or "")
    for text in (_flat(shown.stdout), head, line):
        assert ("not converged: the full-data LM reached its cap" in text) == capped
    # the other route's fit on the same training run was compared in the verdict's evidence
    from twinlake.catalog import connect

    evidence = json.loads(connect(readme_session.lake).execute(
        "SELECT evidence_json FROM fit_verdicts WHERE fit = ?", [fit]).fetchone()[0])
    assert evidence["agreement"]["other_fit"] == readme_session.fit_torque
    assert evidence["agreement"]["other_method"] == "torque"
    disagreeing = evidence["agreement"]["disagreeing"]
    assert (readme_session.fit_torque in " ".join(verdict.verdict.reasons)) == bool(disagreeing)
    # the README's export line ran: a fit not 'not trusted' is exported with its verdict; a fit
    # whose held-out run is not explained (a live realisation) is refused in the verdict's words
    export = readme_session.step("fit export")
    if verdict.verdict.level.value == "not trusted":
        assert export.exit_code == 2 and verdict.verdict.reasons[0] in export.stderr, export.stderr
        assert not (readme_session.root / "fr3_left.json").exists()
    else:
        profile = json.loads((readme_session.root / "fr3_left.json").read_text())
        assert profile["provenance"]["verdict"]["level"] == verdict.verdict.level.value
