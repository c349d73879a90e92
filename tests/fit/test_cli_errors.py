"""Bad input to `twinlake fit ...` gives a one-line error naming what was wrong (exit 2)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from twinlake.cli import app


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--train", "nosuchrun"], "no run 'nosuchrun'"),
        (["--train", "r1:7"], "run has no clean interval 7"),
        (["--train", "r1:x"], "INTERVAL must be a whole number"),
        (["--train", "otherbot/r1"], "robot 'otherbot'"),
        (["--train", "r1", "--weights", "r1"], "expected RUN=WEIGHT"),
        (["--train", "r1", "--weights", "r1=-1"], "expected a finite weight > 0"),
        (["--train", "r1", "--params", "armature=2:1"], "lo <= hi"),
        (["--train", "r1", "--q-scale", "0"], "loss scale q_rad"),
        (["--resume", "never-started"], "no unfinished fit"),
        ([], "give at least one --train"),
    ],
)
def test_fit_run_rejects_bad_input_with_one_line(synth_lake, extra, words):
    res = CliRunner().invoke(app, ["fit", "run", "--lake", str(synth_lake), "--workers", "0",
                                   "--generations", "1", "--population", "4"] + extra)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], res.output


def test_export_rejects_unknown_format(synth_lake):
    res = CliRunner().invoke(app, ["fit", "export", "whatever", "--lake", str(synth_lake), "--format", "urdf"])
    assert res.exit_code == 2 and "--format 'urdf': expected one of profile, frankatwin, mjcf" in res.output
