"""`twinlake sim record` reports fr3_stack's client guards (daemon/guards.py): where its client
would have aborted the run and why, under the anchor rule its code applies and the documented
last-target rule, speed and state age; `--enforce-guards` ends the recording there."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.daemon import csv_v2 as C

# a preview a user would write: 5° on every joint (0.087 rad: beyond the 0.05 rad tracking guard
# under both rules), the speed bound raised explicitly to 2 rad/s
LIVELY = ["excite", "--mode", "multisine", "--joints", "1,2,3,4,5,6,7", "--seconds", "1.5", "--ramp", "0.3",
          "--hold", "0.2", "--rate", "100", "--tones", "0.6,1.3", "--amplitude-deg", "5", "--max-velocity", "2",
          "--max-acceleration", "50", "--max-jerk", "1000"]


def test_sim_record_says_where_the_client_would_abort_and_enforce_stops_there(tmp_path):
    runner = CliRunner()
    preview = tmp_path / "preview"
    assert runner.invoke(app, LIVELY + ["--output", str(preview)]).exit_code == 0
    reference = preview / "reference.csv"
    full = runner.invoke(app, ["sim", "record", "--reference", str(reference), "--out", str(tmp_path / "full.csv"),
                               "--tail", "0.2", "--json"])
    assert full.exit_code == 0, full.output
    report = json.loads(full.output)["guards"]
    assert report["bounds"]["max_velocity"] == 2.0 and report["bounds"]["tracking_error"] == 0.05  # metadata.json's
    abort = report["would_abort"]
    assert abort["guard"] == "tracking_anchor" and abort["value"] > 0.05 and 1 <= abort["joint"] <= 7
    assert report["verdict"].startswith("fr3_stack's client would abort: tracking error (anchor rule")
    assert f"at t = {abort['t_s']:.3f} s" in report["verdict"]
    both = report["first_trip"]
    assert both["tracking_target"] is not None and both["tracking_target"]["value"] > 0.05  # the documented rule too
    assert both["speed"] is None and report["peak"]["speed"]["value"] <= 2.0
    assert report["peak"]["state_age"]["value"] <= 0.004 + 1e-12 and both["state_age"] is None
    rows = np.loadtxt(tmp_path / "full.csv", delimiter=",", skiprows=1)
    assert len(rows) == json.loads(full.output)["rows"]  # the whole reference and its tail
    # the reported value is what the recording shows at that check (the latest 5 ms state)
    k = round(abort["t_s"] * 1000)
    seen = rows[k - k % 5, C.Q][abort["joint"] - 1]
    assert abs(abs(seen - rows[0, C.Q][abort["joint"] - 1]) - abort["value"]) < 1e-3
    text = runner.invoke(app, ["sim", "record", "--reference", str(reference), "--out", str(tmp_path / "t.csv"),
                               "--tail", "0.2"])
    assert "fr3_stack's client would abort: tracking error (anchor rule" in text.output
    assert "also: tracking error (documented rule" in text.output
    # --enforce-guards: the recording ends at that check, as the live client's run would; exit 1
    cut = runner.invoke(app, ["sim", "record", "--reference", str(reference), "--out", str(tmp_path / "cut.csv"),
                              "--tail", "0.2", "--enforce-guards"])
    assert cut.exit_code == 1 and "(the recording stops there: --enforce-guards)" in cut.output
    kept = np.loadtxt(tmp_path / "cut.csv", delimiter=",", skiprows=1)
    assert len(kept) == k + 1 and np.array_equal(kept, rows[: k + 1])  # the same ticks, then nothing
    meta = json.loads((tmp_path / "cut.meta.json").read_text())
    assert meta["excitation_status"] == "aborted" and meta["guards"]["would_abort"] == abort
    assert json.loads((tmp_path / "cut.status.json").read_text())["written"] == k + 1
    # the documented rule enforced, with the bound raised: a later (or no) abort
    target = runner.invoke(app, ["sim", "record", "--reference", str(reference), "--out", str(tmp_path / "d.csv"),
                                 "--tail", "0.2", "--tracking-rule", "target", "--tracking-error", "0.2", "--json"])
    doc = json.loads(target.output)["guards"]
    assert doc["tracking_rule"] == "target" and doc["would_abort"] is None
    assert doc["first_trip"]["tracking_anchor"] is None or doc["first_trip"]["tracking_anchor"]["value"] > 0.2
