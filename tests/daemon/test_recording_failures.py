"""Timeouts, I/O failures and the `twinlake record` CLI against real sockets."""

from __future__ import annotations

import errno
import json
import resource
import threading
import time

import pytest
import zmq
from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.daemon.client import Fr3Client, RecordingTimeout
from twinlake.daemon.service import encode_reply
from twinlake.daemon.status import STATUS_KEYS, RecordingStatus


class SlowRepPeer:
    """A pure-Python REP peer whose first reply comes `delay_s` late; later replies at once."""

    def __init__(self, delay_s: float, replies: int = 2) -> None:
        self.delay_s, self.replies = delay_s, replies
        self.sock = zmq.Context.instance().socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for i in range(self.replies):
            if not self.sock.poll(10000):
                return
            self.sock.recv()
            if i == 0:
                time.sleep(self.delay_s)
            self.sock.send(encode_reply(True, "", RecordingStatus(recording_id="peer", ok=True)))

    def close(self) -> None:
        self.thread.join(timeout=15)
        self.sock.close()


def test_timeout_then_status_on_fresh_socket(tmp_path):
    peer = SlowRepPeer(delay_s=0.8)
    try:
        client = Fr3Client("127.0.0.1", recording_port=peer.port)
        t0 = time.monotonic()
        with pytest.raises(RecordingTimeout) as timeout:
            client.start_recording(str(tmp_path / "t.csv"), recording_id="slow-1", timeout=0.3)
        assert 0.25 < time.monotonic() - t0 < 0.7
        assert timeout.value.recording_id == "slow-1" == client.recording_id
        assert "unconfirmed" in str(timeout.value)
        time.sleep(0.7)  # the peer finishes its late reply to the abandoned socket
        assert client.recording_status(timeout=3.0).recording_id == "peer"
    finally:
        peer.close()


def test_io_failure_reported_incomplete(service, tmp_path):
    manager, _, port = service
    client = Fr3Client("127.0.0.1", recording_port=port)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, hard))  # CPython ignores SIGXFSZ
    try:
        started = client.start_recording(str(tmp_path / "full.csv"), recording_id="full-1")
        assert started.ok
        deadline = time.monotonic() + 5
        while client.recording_status().ok and time.monotonic() < deadline:
            time.sleep(0.02)
        failed = client.recording_status()
        assert failed.active and not failed.ok and failed.error == "recording I/O failure: row write"
        assert failed.error_code == errno.EFBIG
        stopped = client.stop_recording()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert stopped.finished and not stopped.complete and not stopped.ok and stopped.discarded > 0
    assert (tmp_path / "full.csv").stat().st_size <= 64_000
    assert manager.any_failed


def _cli(*args):
    result = CliRunner().invoke(app, list(args))
    # the in-process service's writer also logs to stderr: the CLI's JSON is the last line
    return result.exit_code, result.stdout, (result.stderr.strip().splitlines() or [""])[-1]


def test_record_cli_exit_codes(service, tmp_path):
    _, _, port = service
    base = ["record", "--host", "127.0.0.1", "--port", str(port)]
    path = str(tmp_path / "cli.csv")
    code, out, _ = _cli(*base, "start", path, "--recording-id", "cli-1")
    assert code == 0 and list(json.loads(out)) == list(STATUS_KEYS) and json.loads(out)["active"]
    code, out, _ = _cli(*base, "status")
    assert code == 0 and json.loads(out)["recording_id"] == "cli-1"
    code, _, err = _cli(*base, "stop", "stale-id")
    assert code == 2 and json.loads(err)["status"]["active"] is True
    time.sleep(0.05)
    code, out, _ = _cli(*base, "stop", "cli-1")
    assert code == 0 and json.loads(out)["complete"] is True
    code, _, err = _cli(*base, "start", path, "--recording-id", "cli-2")
    assert code == 2 and json.loads(err)["status"]["error_code"] == errno.EEXIST
    code, _, err = _cli(*base, "start", "relative.csv")
    assert code == 2 and "absolute" in json.loads(err)["error"]


def test_record_cli_timeout_exits_3():
    peer = SlowRepPeer(delay_s=0.6, replies=1)
    try:
        code, _, err = _cli("record", "--host", "127.0.0.1", "--port", str(peer.port),
                            "--timeout", "0.2", "stop", "abc")
        assert code == 3
        assert json.loads(err) == {**json.loads(err), "recording_id": "abc", "outcome": "unconfirmed"}
    finally:
        peer.close()
