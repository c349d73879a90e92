"""The recording service: a REP socket answering `RecordingRequest`s (fr3_stack `src/recording.cpp`, docs/daemon.md).

One non-real-time thread serves it. Each single-frame request gets exactly one single-frame
`RecordingReply` whose `status` is always filled; malformed input (multipart, bad size,
undecodable bytes, unknown action) is answered with `accepted = false` and never stops it.
"""

from __future__ import annotations

import threading

import zmq

from .recording import RecordingManager, RecordingRefused
from .status import RecordingStatus
from .wire import MAX_MESSAGE_BYTES, TRAVERSAL_LIMIT_WORDS, schema

_ACTIONS = {"status", "start", "stop"}


def encode_reply(accepted: bool, error: str, status: RecordingStatus) -> bytes:
    """Serialise a `RecordingReply`."""
    reply = schema.RecordingReply.new_message()
    reply.accepted = bool(accepted)
    reply.error = error
    status.fill_capnp(reply.init("status"))
    return reply.to_bytes()


def handle_request(manager: RecordingManager, frames: list[bytes]) -> bytes:
    """Answer one request (a list of ZMQ frames) with reply bytes; never raises."""
    if len(frames) != 1:
        return encode_reply(False, "recording request must be a single frame", manager.status())
    body = frames[0]
    if not body or len(body) > MAX_MESSAGE_BYTES or len(body) % 8:
        return encode_reply(False, "invalid recording request size", manager.status())
    try:
        with schema.RecordingRequest.from_bytes(body, traversal_limit_in_words=TRAVERSAL_LIMIT_WORDS) as req:
            try:
                action = str(req.action)
            except Exception:  # an enum value this schema does not know
                action = "unknown"
            recording_id = str(req.recordingId)
            path = str(req.path)
    except Exception as exc:  # KjException, UnicodeDecodeError, unknown enum value...
        return encode_reply(False, f"invalid recording request: {type(exc).__name__}", manager.status())
    if action not in _ACTIONS:
        return encode_reply(False, "unknown recording action", manager.status())
    try:
        if action == "start":
            status = manager.start(recording_id, path)
        elif action == "stop":
            status = manager.stop(recording_id)
        else:
            status = manager.status()
    except RecordingRefused as exc:
        return encode_reply(False, str(exc), exc.status)
    return encode_reply(True, "", status)


class RecordingService:
    """REP server thread on `endpoint` (e.g. `tcp://127.0.0.1:0`); `.port` after `start()`."""

    def __init__(self, manager: RecordingManager, endpoint: str, context: zmq.Context | None = None) -> None:
        self.manager = manager
        self.endpoint = endpoint
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.REP)
        for opt, val in ((zmq.RCVTIMEO, 100), (zmq.SNDTIMEO, 100), (zmq.LINGER, 0),
                         (zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)):
            self._sock.setsockopt(opt, val)
        self._sock.bind(endpoint)
        self.last_endpoint = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.port = int(self.last_endpoint.rsplit(":", 1)[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="recording-service", daemon=True)

    def start(self) -> "RecordingService":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close(linger=0)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                frames = self._sock.recv_multipart()
            except zmq.Again:
                continue
            except zmq.ZMQError:
                continue
            reply = handle_request(self.manager, frames)
            while not self._stop.is_set():
                try:
                    self._sock.send(reply)
                    break
                except zmq.Again:
                    continue
