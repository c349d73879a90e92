"""twinlake/progress.Stages: a line per stage on stderr when stderr is not a terminal, nothing
with --json (enabled=False), never anything on stdout."""

from __future__ import annotations

import re

from twinlake.progress import Stages


def test_a_line_per_stage_on_stderr_and_none_for_fractions(capsys):
    with Stages("fit report") as stages:
        stages.stage("gathering")
        for k in range(100):
            stages.fraction(k / 100)
        stages.stage("plotting")
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and all(re.match(r"twinlake fit report: \[ +\d+\.\d s\] ", line) for line in lines)
    assert lines[0].endswith("gathering") and lines[1].endswith("plotting")


def test_quiet_when_disabled(capsys):
    with Stages("excite", enabled=False) as stages:
        stages.stage("streaming")
        stages.fraction(0.5)
    assert capsys.readouterr() == ("", "")
