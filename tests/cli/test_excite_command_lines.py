"""fr3_stack's documented `examples/joint_sysid.py` command lines, run as `twinlake excite` by
the installed script as a new user would: the previews write preview.svg, reference.csv and
metadata.json (in a new recordings/joint-<UTC time> directory when --output is omitted), and a
multisine line with --execute streams to `twinlake daemon serve`, even after a refused
Cartesian command."""

from __future__ import annotations

import json
import math
import re
import queue
import subprocess
import threading
import time

import numpy as np
import pytest
import zmq

from twinlake.daemon.client import Fr3Client
from twinlake.daemon.wire import schema

# fr3_stack's README ("Preview first", "Chirp and multisine"), `uv run python
# examples/joint_sysid.py` replaced by `twinlake excite`, continuation lines joined.
PREVIEW_LINE = "twinlake excite --dry-run --output /tmp/joint-preview"
CHIRP_LINE = ("twinlake excite --mode chirp --joints 1 2 3 4 5 6 7 "
              "--seconds 40 --ramp 5 --amplitude-deg 1 --f0 0.1 --f1 0.5")
MULTISINE_LINE = ("twinlake excite --mode multisine --joints 1 2 3 4 5 6 7 "
                  "--seconds 40 --amplitude-deg 1 --tones 0.1 0.23 0.41 --seed 0")
VALIDATION_LINE = ("twinlake excite --mode multisine --joints 1 2 3 4 5 6 7 "
                   "--seconds 40 --amplitude-deg 1 --tones 0.13 0.29 0.47 --seed 101")
# "use --q0-rad followed by seven measured joint angles to preview your actual pose"
MEASURED_Q = "0.0123 -0.7811 -0.0042 -2.3517 0.0031 1.5702 0.7869"
STAMPED = re.compile(r"joint-\d{8}T\d{6}-\d{6}Z")


def _check_preview(out_dir, plan: dict) -> dict:
    assert sorted(p.name for p in out_dir.iterdir()) == ["metadata.json", "preview.svg", "reference.csv"]
    meta = json.loads((out_dir / "metadata.json").read_text())
    assert meta["status"] == "preview" and meta["commands_sent"] == 0
    assert {k: meta["plan"][k] for k in plan} == plan
    assert (out_dir / "preview.svg").read_text().startswith("<svg")
    rows = (out_dir / "reference.csv").read_text().splitlines()
    total_s = float(rows[-1].split(",")[0])
    assert rows[0].startswith("t_s,q_ref1,") and len(rows) - 1 == math.ceil(total_s * meta["plan"]["rate"]) + 1
    return meta


def _only_stamped_dir(cwd):
    runs = list((cwd / "recordings").iterdir())
    assert len(runs) == 1 and STAMPED.fullmatch(runs[0].name), runs
    return runs[0]


def test_preview_first(twinlake_script, tmp_path):
    # the documented /tmp/joint-preview, moved into this test's own directory (it must be new)
    out = tmp_path / "joint-preview"
    done = twinlake_script(PREVIEW_LINE.replace("/tmp/joint-preview", str(out)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    meta = _check_preview(out, {"mode": "sine", "joints": [1], "amplitude_deg": 1.0, "f0": 0.1,
                                "seconds": 20.0, "ramp": 5.0, "hold": 2.0, "rate": 60.0})
    assert meta["anchor_source"] != "user"
    # the same output again: refused, nothing overwritten
    again = twinlake_script(PREVIEW_LINE.replace("/tmp/joint-preview", str(out)), cwd=tmp_path)
    assert again.returncode == 1 and "exists" in again.stderr

    measured = twinlake_script(f"twinlake excite --dry-run --q0-rad {MEASURED_Q} --output {tmp_path / 'pose'}",
                               cwd=tmp_path)
    assert measured.returncode == 0, measured.stderr
    meta = _check_preview(tmp_path / "pose", {"mode": "sine", "joints": [1]})
    q0 = [float(x) for x in MEASURED_Q.split()]
    assert meta["anchor_q_rad"] == q0 and meta["anchor_source"] == "user"
    first = np.loadtxt(tmp_path / "pose" / "reference.csv", delimiter=",", skiprows=1, max_rows=1)
    assert np.array_equal(first[1:8], q0)

    # "omit --output for a timestamped directory under recordings/"
    stamped = twinlake_script("twinlake excite --dry-run", cwd=tmp_path)
    assert stamped.returncode == 0, stamped.stderr
    run = _only_stamped_dir(tmp_path)
    assert json.loads(stamped.stdout)["output"] == f"recordings/{run.name}"
    _check_preview(run, {"mode": "sine"})


@pytest.mark.parametrize("line, plan", [
    (CHIRP_LINE, {"mode": "chirp", "joints": [1, 2, 3, 4, 5, 6, 7], "seconds": 40.0, "ramp": 5.0,
                  "amplitude_deg": 1.0, "f0": 0.1, "f1": 0.5}),
    (MULTISINE_LINE, {"mode": "multisine", "joints": [1, 2, 3, 4, 5, 6, 7], "seconds": 40.0,
                      "amplitude_deg": 1.0, "tones": [0.1, 0.23, 0.41], "seed": 0}),
    (VALIDATION_LINE, {"mode": "multisine", "joints": [1, 2, 3, 4, 5, 6, 7], "seconds": 40.0,
                       "amplitude_deg": 1.0, "tones": [0.13, 0.29, 0.47], "seed": 101}),
], ids=["chirp", "multisine", "multisine-validation"])
def test_chirp_and_multisine(twinlake_script, tmp_path, line, plan):
    done = twinlake_script(line, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    meta = _check_preview(_only_stamped_dir(tmp_path), plan)
    moving = [j for j, peak in enumerate(meta["reference_peaks"]["offset_rad"], start=1) if peak > 0]
    assert moving == plan["joints"]


def test_comma_lists_still_work(twinlake_script, tmp_path):
    done = twinlake_script(MULTISINE_LINE.replace("1 2 3 4 5 6 7", "1,2,3,4,5,6,7").replace("0.1 0.23 0.41",
                                                                                           "0.1,0.23,0.41")
                           + f" --output {tmp_path / 'commas'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spaced = twinlake_script(MULTISINE_LINE + f" --output {tmp_path / 'spaces'}", cwd=tmp_path)
    assert spaced.returncode == 0, spaced.stderr
    assert (tmp_path / "commas" / "reference.csv").read_bytes() == (tmp_path / "spaces" / "reference.csv").read_bytes()


class ServedDaemon:
    """`twinlake daemon serve` on ephemeral 127.0.0.1 ports, as a separate process."""

    def __init__(self, script, cwd) -> None:
        self.proc = subprocess.Popen([str(script), "daemon", "serve", "--cmd-port", "0", "--state-port", "0",
                                      "--recording-port", "0"], cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.ports = self._read_ports(timeout_s=120)

    def _read_ports(self, timeout_s: float) -> dict[str, int]:
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout], daemon=True)
        reader.start()  # drains stdout until the process exits
        ports: dict[str, int] = {}
        deadline = time.monotonic() + timeout_s
        while len(ports) < 3:
            try:
                words = lines.get(timeout=max(0.01, deadline - time.monotonic())).split()
            except queue.Empty:
                raise AssertionError(f"daemon did not report its ports: {self.stop()}") from None
            ports[words[0]] = int(words[-1].rsplit(":", 1)[1])
        return {"cmd": ports["cmd"], "state": ports["state"], "recording": ports["record"]}

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


def _cartesian_command() -> bytes:
    msg = schema.Command.new_message()
    msg.config.init("cartesianImpedance")
    return msg.to_bytes()


def _wait_state(client: Fr3Client, predicate, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    st = None
    while time.monotonic() < deadline:
        st = client.state(timeout=0.5)
        if st is not None and predicate(st):
            return st
    raise AssertionError(f"state never satisfied the condition; last {st}")


def test_multisine_executes_on_the_sim_daemon_after_a_refused_cartesian_command(twinlake_script, twinlake_path,
                                                                                tmp_path):
    daemon = ServedDaemon(twinlake_path, tmp_path)
    p = daemon.ports
    client = Fr3Client("127.0.0.1", p["cmd"], p["state"], recording_port=p["recording"])
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    try:
        st = _wait_state(client, lambda s: s.running and s.controller == "joint_impedance")
        push.connect(f"tcp://127.0.0.1:{p['cmd']}")
        push.send(_cartesian_command())
        assert "cartesian_impedance is not available" in _wait_state(client, lambda s: s.last_error).last_error
        client.send_joint_impedance(st.q)  # back to a joint command: the refusal is forgotten
        _wait_state(client, lambda s: s.last_error == "")

        # the documented multisine line with --execute added, shortened to 4 s for the test
        # (later options win), gains given as 7 and 1 values, loose timing guards for a loaded host
        line = (f"{MULTISINE_LINE} --execute --host 127.0.0.1 --robot-id left "
                f"--cmd-port {p['cmd']} --state-port {p['state']} --recording-port {p['recording']} "
                f"--seconds 4 --ramp 1 --hold 0.5 --max-lateness 0.5 --stale-after 1.0 "
                f"--output {tmp_path / 'live'} --kp 600 600 600 600 250 150 50 --kd 40")
        done = twinlake_script(line, cwd=tmp_path, timeout=180)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["status"] == "completed" and summary["commands_sent"] > 0
        out = tmp_path / "live"
        assert sorted(x.name for x in out.iterdir()) == ["commands_and_state.csv", "metadata.json",
                                                          "preview.svg", "reference.csv"]
        meta = json.loads((out / "metadata.json").read_text())
        assert meta["plan"]["tones"] == [0.1, 0.23, 0.41] and meta["plan"]["joints"] == [1, 2, 3, 4, 5, 6, 7]
        gains = meta["commanded_controller_settings"]
        assert gains["K_joint"] == [600, 600, 600, 600, 250, 150, 50] and gains["D_joint"] == [40.0] * 7
        assert _wait_state(client, lambda s: True).last_error == ""
        client.terminate()
        assert daemon.proc.wait(timeout=30) == 0
    finally:
        push.close()
        client.close()
        daemon.stop()
