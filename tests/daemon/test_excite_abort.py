"""An aborted excitation explains itself, and a stopped daemon is reported promptly.

The client is made late on purpose: `twinlake excite --execute` runs as its own process against
a real daemon (a thread here, ZMQ on 127.0.0.1) and is stopped with SIGSTOP for 0.3 s while it
streams, three times its `--max-lateness`. fr3_stack's client then aborts and asks the daemon to
terminate; the daemon stops. The next `excite` finds no daemon and says so within a second or two.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from twinlake.cli import app

PYTHON_CLASS = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Abort|Timeout)\b|Traceback")
PLAN = ["--mode", "sine", "--joints", "1", "--seconds", "4", "--ramp", "1", "--hold", "0.5",
        "--amplitude-deg", "0.5", "--max-lateness", "0.1"]


def _ports(d) -> list[str]:
    p = d.daemon.ports
    return ["--host", "127.0.0.1", "--robot-id", "sim", "--cmd-port", str(p["cmd"]),
            "--state-port", str(p["state"]), "--recording-port", str(p["recording"])]


def _wait_streaming(log, proc, timeout_s: float = 60.0) -> None:
    """Until the client has sent a few commands (its commands_and_state.csv has rows)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_text().count("\n") > 6:
            return
        time.sleep(0.02)
    raise AssertionError(f"the client never streamed (exit {proc.poll()}): {proc.stderr.read() if proc.poll() is not None else ''}")


def test_a_late_client_aborts_stops_the_daemon_and_says_what_helps(start_daemon, tmp_path):
    d = start_daemon(initial_controller="joint_impedance", seed=2)
    d.wait_state(lambda s: s.controller == "joint_impedance")
    out = tmp_path / "late"
    proc = subprocess.Popen([sys.executable, "-m", "twinlake", "excite", *PLAN, "--execute", *_ports(d),
                             "--output", str(out), "--record", "run.csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_streaming(out / "commands_and_state.csv", proc)
        os.kill(proc.pid, signal.SIGSTOP)  # the machine "does not run the client" for 0.3 s
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert not PYTHON_CLASS.search(err), err
    assert "twinlake excite: [" in err and "] streaming sine, 5 s at 60 Hz" in err  # a line per stage
    first = next(line for line in err.splitlines() if "aborted" in line)
    assert re.match(r"twinlake excite: aborted at t = \d+\.\d{3} s of 5 s: the client was 0\.\d{3} s late for "
                    r"a send \(--max-lateness 0\.1 s\)", first), err
    assert "asked the daemon to terminate; the daemon at 127.0.0.1 has stopped" in err
    for remedy in ("twinlake daemon serve --rt-priority N", "twinlake excite --max-lateness S", "less loaded machine"):
        assert remedy in err, err
    assert "the recording" in err and "rows up to the abort" in err
    # the daemon really stopped, and the run's files say what happened
    d.thread.join(timeout=10)
    assert not d.thread.is_alive()
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "aborted" and meta["termination"] == "attempted"
    assert meta["daemon_after_abort"] == "stopped" and meta["error"].startswith("ExcitationAbort: ")
    assert json.loads((out / "run.status.json").read_text())["finished"] is True

    # a following excite against the stopped daemon says so, promptly
    started = time.monotonic()
    again = CliRunner().invoke(app, ["excite", *PLAN, "--execute", *_ports(d), "--output", str(tmp_path / "again")])
    elapsed = time.monotonic() - started
    assert again.exit_code == 1 and elapsed < 2.5, (elapsed, again.output)
    p = d.daemon.ports
    assert again.stderr.splitlines()[-1].startswith(f"twinlake excite: aborted: no daemon answers on 127.0.0.1 (no state on port "
                                   f"{p['state']} within 1 s; commands go to port {p['cmd']})"), again.stderr
    assert "twinlake daemon serve" in again.stderr and not PYTHON_CLASS.search(again.stderr)


def test_a_refused_recording_names_the_path_and_the_daemon_keeps_running(start_daemon, tmp_path):
    d = start_daemon(initial_controller="joint_impedance", seed=3)
    d.wait_state(lambda s: s.controller == "joint_impedance")
    missing = tmp_path / "no-such-dir" / "run.csv"
    res = CliRunner().invoke(app, ["excite", *PLAN, "--execute", *_ports(d), "--output", str(tmp_path / "o"),
                                   "--record", str(missing)])
    assert res.exit_code == 1 and not PYTHON_CLASS.search(res.stderr), res.stderr
    assert (f"twinlake excite: aborted: --record {missing}: the daemon refused the recording: recording I/O "
            "failure: open, errno 2 (No such file or directory)") in res.stderr
    assert "no motion command had been sent, so the daemon was not asked to terminate" in res.stderr
    assert "a --record path that does not exist yet" in res.stderr
    assert json.loads((tmp_path / "o" / "metadata.json").read_text())["status"] == "aborted"
    assert d.thread.is_alive() and d.wait_state(lambda s: s.running)
