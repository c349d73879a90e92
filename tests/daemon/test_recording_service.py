"""fr3_stack's recording rules (docs/daemon.md) over real ZMQ sockets on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import errno
import time

import numpy as np
import pytest
import zmq

from twinlake.daemon import csv_v2
from twinlake.daemon.client import Fr3Client, RecordingError, request_recording
from twinlake.daemon.status import STATUS_KEYS


def test_fresh_status_is_all_false(service):
    _, _, port = service
    status = Fr3Client("127.0.0.1", recording_port=port).recording_status()
    assert tuple(status.to_dict()) == STATUS_KEYS
    assert (status.recording_id, status.path, status.active, status.ok, status.finished,
            status.complete, status.written) == ("", "", False, False, False, False, 0)


def test_start_stop_restart(service, tmp_path, read_csv):
    _, _, port = service
    client = Fr3Client("127.0.0.1", recording_port=port)
    started = client.start_recording(str(tmp_path / "a.csv"), recording_id="run-a")
    assert started.active and started.ok and not started.complete and started.recording_id == "run-a"
    time.sleep(0.15)
    stopped = client.stop_recording()
    assert stopped.complete and stopped.finished and not stopped.active and stopped.dropped == 0
    header, rows = read_csv(tmp_path / "a.csv")
    assert header == list(csv_v2.COLUMNS) and len(header) == 80
    assert rows.shape[0] == stopped.written > 50
    assert np.array_equal(rows[:, 0], np.arange(rows.shape[0]))
    assert rows[0, 1] == 0.0 and np.all(np.diff(rows[:, 1]) > 0)
    assert np.all(rows[:, csv_v2.SCHEMA.start] == 2)
    q0_last = rows[-1, csv_v2.Q.start]
    assert np.all(np.diff(rows[:, csv_v2.Q.start]) == 1)  # contiguous producer ticks
    # repeated stop: identical status, file unchanged
    before = (tmp_path / "a.csv").read_bytes()
    assert client.stop_recording("run-a") == stopped
    assert (tmp_path / "a.csv").read_bytes() == before
    # second run: new ID, seq and t_s restart at 0, producer ticks continue
    client.start_recording(str(tmp_path / "b.csv"), recording_id="run-b")
    time.sleep(0.05)
    assert client.stop_recording().complete
    _, rows_b = read_csv(tmp_path / "b.csv")
    assert rows_b[0, 0] == 0 and rows_b[0, 1] == 0.0 and rows_b[0, csv_v2.Q.start] > q0_last


def test_refusals_and_idempotency(service, tmp_path):
    manager, address, port = service
    client = Fr3Client("127.0.0.1", recording_port=port)
    path = str(tmp_path / "r.csv")
    first = client.start_recording(path, recording_id="r1")
    again = client.start_recording(path, recording_id="r1")  # same ID and path: no-op
    assert again.recording_id == "r1" and again.active
    with pytest.raises(RecordingError, match="already active") as busy:
        request_recording(address, "start", "r2", str(tmp_path / "other.csv"))
    assert busy.value.status.active and busy.value.status.recording_id == "r1"
    assert not (tmp_path / "other.csv").exists()
    with pytest.raises(RecordingError, match="mismatch") as stale:
        client.stop_recording("old-id")
    assert stale.value.status.active  # the newer run is protected
    done = client.stop_recording("r1")
    assert done.complete and first.path == done.path
    with pytest.raises(RecordingError, match="already used"):
        request_recording(address, "start", "r1", str(tmp_path / "reuse.csv"))
    assert not (tmp_path / "reuse.csv").exists()
    # idempotent start of an already-completed run returns it, inactive: the client raises
    with pytest.raises(RecordingError, match="did not enter active state") as completed:
        client.start_recording(path, recording_id="r1")
    assert completed.value.status.complete and not completed.value.status.active
    assert not manager.any_failed


def test_eexist_keeps_file_and_enoent_then_recovery(service, tmp_path):
    manager, address, port = service
    client = Fr3Client("127.0.0.1", recording_port=port)
    existing = tmp_path / "exists.csv"
    existing.write_bytes(b"precious\n")
    with pytest.raises(RecordingError) as eexist:
        client.start_recording(str(existing), recording_id="e1")
    st = eexist.value.status
    assert st.error_code == errno.EEXIST and st.error == "recording I/O failure: open"
    assert st.finished and not st.ok and not st.active and not st.complete
    assert existing.read_bytes() == b"precious\n"
    with pytest.raises(RecordingError) as enoent:
        client.start_recording(str(tmp_path / "missing" / "x.csv"), recording_id="e2")
    assert enoent.value.status.error_code == errno.ENOENT
    assert manager.any_failed
    ok = client.start_recording(str(tmp_path / "fine.csv"), recording_id="e3")
    assert ok.active and ok.ok
    assert client.stop_recording().complete


@pytest.mark.parametrize("path, rid, match", [
    ("relative.csv", "x", "absolute"),
    ("/tmp/a\x00b.csv", "x", "absolute"),
    ("/" + "a" * 4100, "x", "absolute"),
    ("/tmp/x.csv", "", "invalid recording ID"),
    ("/tmp/x.csv", "a" * 129, "invalid recording ID"),
    ("/tmp/x.csv", "bad id!", "only letters"),
])
def test_server_validates_id_and_path(service, path, rid, match):
    _, address, _ = service
    with pytest.raises(RecordingError, match=match):
        request_recording(address, "start", rid, path)


@pytest.mark.parametrize("path, rid, timeout", [
    ("relative.csv", "ok", 5.0), ("/tmp/x.csv", "bad id", 5.0), ("/tmp/x.csv", "ok", 0.0),
    ("/tmp/x.csv", "ok", float("nan")),
])
def test_client_validates_locally_without_network(path, rid, timeout):
    client = Fr3Client("127.0.0.1", recording_port=1)  # nothing listens on port 1
    with pytest.raises(ValueError):
        client.start_recording(path, recording_id=rid, timeout=timeout)


def test_client_rejects_bad_ports_and_missing_stop_id():
    for bad in (0, 65536, True, "5557"):
        with pytest.raises(ValueError):
            Fr3Client("127.0.0.1", recording_port=bad)
    with pytest.raises(ValueError, match="provide the recording_id"):
        Fr3Client("127.0.0.1").stop_recording()


def _raw_request(address: str, frames: list[bytes]) -> bytes:
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    sock.send_multipart(frames)
    assert sock.poll(3000), "service did not answer"
    reply = sock.recv()
    sock.close()
    return reply


@pytest.mark.parametrize("frames, match", [
    ([b"garbage"], "size"),
    ([b"\xff" * 16], "invalid recording request"),
    ([b"\x00" * 8], "invalid recording request"),
    ([b"a" * 8, b"b" * 8], "single frame"),
])
def test_malformed_requests_never_kill_the_service(service, frames, match):
    from twinlake.daemon.wire import schema

    _, address, port = service
    data = _raw_request(address, frames)
    with schema.RecordingReply.from_bytes(data) as reply:
        assert not reply.accepted and match in reply.error
    assert Fr3Client("127.0.0.1", recording_port=port).recording_status().recording_id == ""


def test_unknown_action_is_refused(service):
    from twinlake.daemon.wire import schema

    _, address, _ = service
    msg = schema.RecordingRequest.new_message(recordingId="x")
    data = bytearray(msg.to_bytes())
    # the action enum lives in the first 16 bits of the struct's data section (word 2)
    data[16:18] = (7).to_bytes(2, "little")
    with schema.RecordingReply.from_bytes(_raw_request(address, [bytes(data)])) as reply:
        assert not reply.accepted and reply.error == "unknown recording action"
