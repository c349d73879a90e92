"""Every refusal of `excite`, `daemon serve`, `record` and `intervals` speaks the user's terms:
the option and what it allows, never a Python exception class or a traceback."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from twinlake.cli import app

PYTHON_CLASS = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Abort|Timeout)\b|Traceback|File \"")
MULTISINE = ["excite", "--mode", "multisine", "--joints", "1,2,3,4,5,6,7"]

REFUSALS = [
    (MULTISINE + ["--seconds", "8"], "--ramp 5 s needs --seconds ≥ 10"),
    (["excite", "--rate", "5"], "--rate: expected 10..200 Hz, got 5"),
    (["excite", "--rate", "10", "--ramp", "0.4", "--seconds", "20"], "--ramp 0.4 s at --rate 10 Hz"),
    (["excite", "--joints", "9"], "--joints: expected distinct joints in 1..7, got 9"),
    (["excite", "--mode", "square"], "--mode: expected one of hold, sine, chirp, multisine"),
    (["excite", "--amplitude-deg", "0"], "--amplitude-deg: expected > 0°"),
    (["excite", "--hold", "-1"], "--hold: expected ≥ 0 s"),
    (["excite", "--f0", "4", "--f1", "5"], "--f0: the highest frequency 4 Hz exceeds --rate/20 = 3 Hz"),
    (["excite", "--max-jerk", "0"], "--max-jerk: expected > 0 rad/s³"),
    (["excite", "--seconds", "700"], "expected total duration ≤ 600 s"),
    (["excite", "--kp", "0"], "--kp: expected stiffnesses > 0"),
    (["excite", "--kp", "1", "2"], "--kp: expected 1 or 7 values, got 2"),
    (["excite", "--filter-alpha", "2"], "--filter-alpha: expected 0 < alpha ≤ 1"),
    (["excite", "--max-lateness", "0"], "--max-lateness: expected a finite number > 0 s"),
    (["excite", "--tracking-rule", "both"], "--tracking-rule: expected one of anchor, target"),
    (["excite", "--dry-run", "--execute"], "cannot be combined with --execute"),
    (["excite", "--execute"], "--execute needs --host and --robot-id"),
    (["excite", "--finish", "later"], "--finish: expected hold or terminate"),
    (["excite", "--q0-rad", "0", "1"], "--q0-rad: expected 7 joint angles, got 2"),
    (["excite", "--mode", "sine", "--amplitude-deg", "10", "--f0", "0.5"], "exceeds --max-velocity 0.1"),
    (["excite", "--experiment-metadata", "{missing}"], "missing.json"),
    (["excite", "--output", "{existing}"], "already exists (--output must name a new directory)"),
    (["daemon", "serve", "--cmd-port", "70000"], "--cmd-port: expected 1..65535, got 70000"),
    (["daemon", "serve", "--noise", "q=abc"], "--noise: q must be a number"),
    (["daemon", "serve", "--joint", "--idle"], "--joint and --idle are exclusive"),
    (["daemon", "serve", "--initial-controller", "cartesian"], "--initial-controller: expected idle or joint_impedance"),
    (["daemon", "serve", "--truth", "{missing}"], "missing.json"),
    (["record", "--host", "127.0.0.1", "start", "relative.csv"], "absolute"),
    (["intervals", "--lake", "{lake}", "--no-split", "seq_gap"], "--no-split 'seq_gap': expected one of"),
    (["intervals", "--lake", "{lake}", "--period-s", "0"], "--period-s: expected a finite number > 0"),
    (["intervals", "--lake", "{lake}", "--min-duration-s", "-1"], "--min-duration-s: expected a finite number >= 0"),
    (["intervals", "--lake", "{missing}"], "no such directory"),
]


@pytest.mark.parametrize("argv, said", REFUSALS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in REFUSALS])
def test_refusals_name_the_option_and_no_python_class(argv, said, tmp_path):
    (tmp_path / "existing").mkdir()
    (tmp_path / "lake").mkdir()
    fill = {"{missing}": str(tmp_path / "missing.json"), "{existing}": str(tmp_path / "existing"),
            "{lake}": str(tmp_path / "lake")}
    argv = [fill.get(a, a) for a in argv]
    if argv[0] == "excite" and "--output" not in argv:
        argv += ["--output", str(tmp_path / "out")]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code != 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert said in res.stderr, res.stderr
    assert not PYTHON_CLASS.search(res.stderr + res.stdout), res.stderr
    if argv[0] == "excite":
        assert not (tmp_path / "out").exists()  # refused before anything was written
