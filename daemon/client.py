"""Python client for an fr3_stack-compatible daemon (ours or a real NUC).

`request_recording` is the one-shot REQ exchange of fr3_stack's `fr3_stack/recording.py` (fresh socket per call, one
monotonic deadline); `Fr3Client` adds the recording methods of fr3_stack's `Robot`
(`start_recording`, `stop_recording`, `recording_status`), joint impedance and idle commands
on a conflated PUSH socket, and `state()` from a conflated SUB socket.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np
import zmq

from .recording import check_recording_id, check_recording_path
from .status import RecordingStatus
from .wire import (
    MAX_MESSAGE_BYTES, TRAVERSAL_LIMIT_WORDS, IdleCommand, JointImpedanceCommand, StateMessage,
    decode_state, encode_idle, encode_joint_impedance, schema,
)

DEFAULT_K_JOINT = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)  # N·m/rad
DEFAULT_D_JOINT = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)  # N·m·s/rad
DEFAULT_FILTER_ALPHA = 0.05


class RecordingError(RuntimeError):
    """The daemon refused a request (or a start did not become active); `.status` has details."""

    def __init__(self, message: str, status: RecordingStatus) -> None:
        super().__init__(message)
        self.status = status


class RecordingTimeout(TimeoutError):
    """No reply in time: the outcome is unconfirmed. `.recording_id` is "" for status."""

    def __init__(self, message: str, recording_id: str = "") -> None:
        super().__init__(message)
        self.recording_id = recording_id


def check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError("timeout must be finite and positive")
    return float(timeout)


def check_port(port, name: str = "recording_port") -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"{name} must be an int in 1..65535, got {port!r}")
    return port


def _unconfirmed(action: str, recording_id: str) -> RecordingTimeout:
    return RecordingTimeout(
        f"recording {action} timed out; outcome unconfirmed: query recording_status() and retry "
        f"with the same recording_id", recording_id)


def request_recording(address: str, action: str, recording_id: str = "", path: str = "",
                      timeout: float = 5.0) -> RecordingStatus:
    """Send one `RecordingRequest` to `address` (e.g. `tcp://host:5557`) and return the status.

    Raises `RecordingError` when the reply says `accepted = false`, `RecordingTimeout` when
    either poll or the exchange runs past `timeout` seconds.
    """
    timeout = check_timeout(timeout)
    deadline = time.monotonic() + timeout
    req = schema.RecordingRequest.new_message(action=action, recordingId=recording_id, path=path)
    sock = zmq.Context.instance().socket(zmq.REQ)
    try:
        for opt, val in ((zmq.LINGER, 0), (zmq.IMMEDIATE, 1), (zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)):
            sock.setsockopt(opt, val)
        sock.connect(address)
        remaining_ms = lambda: max(0, int((deadline - time.monotonic()) * 1000))  # noqa: E731
        if not sock.poll(remaining_ms(), zmq.POLLOUT):
            raise _unconfirmed(action, recording_id)
        try:
            sock.send(req.to_bytes(), zmq.DONTWAIT)
            if not sock.poll(remaining_ms(), zmq.POLLIN):
                raise _unconfirmed(action, recording_id)
            data = sock.recv(zmq.DONTWAIT)
        except zmq.Again:
            raise _unconfirmed(action, recording_id) from None
    finally:
        sock.close(linger=0)
    with schema.RecordingReply.from_bytes(data, traversal_limit_in_words=TRAVERSAL_LIMIT_WORDS) as reply:
        status = RecordingStatus.from_capnp(reply.status)
        if not reply.accepted:
            raise RecordingError(str(reply.error), status)
    return status


@dataclass(frozen=True)
class ClientState:
    """The latest published state plus the client's `time.monotonic()` at arrival [s]."""

    message: StateMessage
    received_at: float

    def __getattr__(self, name):  # convenience: state.q, state.controller, ...
        return getattr(self.message, name)


class Fr3Client:
    """Client of one daemon. Recording needs no `connect()`; `close()` never stops a recording."""

    def __init__(self, host: str, cmd_port: int = 5555, state_port: int = 5556, *,
                 recording_port: int = 5557, command_send_timeout_ms: int | None = None) -> None:
        self.host = host
        self.cmd_port = check_port(cmd_port, "cmd_port")
        self.state_port = check_port(state_port, "state_port")
        self.recording_port = check_port(recording_port)
        self.recording_address = f"tcp://{host}:{self.recording_port}"
        self.command_send_timeout_ms = command_send_timeout_ms
        self.recording_id: str | None = None
        self.k_joint = np.array(DEFAULT_K_JOINT)
        self.d_joint = np.array(DEFAULT_D_JOINT)
        self.filter_alpha = DEFAULT_FILTER_ALPHA
        self.use_friction = False
        self._lock = threading.Lock()
        self._cmd_sock: zmq.Socket | None = None
        self._state_sock: zmq.Socket | None = None
        self._last_state: ClientState | None = None

    # ---- recording ------------------------------------------------------------------------
    def start_recording(self, path, *, recording_id: str | None = None, timeout: float = 5.0) -> RecordingStatus:
        """Start a daemon recording at absolute `path` (on the daemon's machine)."""
        check_timeout(timeout)
        path = os.fspath(path)
        check_recording_path(path)
        recording_id = uuid.uuid4().hex if recording_id is None else recording_id
        check_recording_id(recording_id)
        with self._lock:
            previous, self.recording_id = self.recording_id, recording_id
            try:
                status = request_recording(self.recording_address, "start", recording_id, path, timeout)
            except RecordingError as exc:
                if exc.status.recording_id != recording_id:
                    self.recording_id = previous
                raise
        if not status.active or not status.ok:
            raise RecordingError(status.error or "recording did not enter active state", status)
        return status

    def stop_recording(self, recording_id: str | None = None, *, timeout: float = 5.0) -> RecordingStatus:
        """Stop a recording; returns the final status without raising on an incomplete run."""
        check_timeout(timeout)
        recording_id = self.recording_id if recording_id is None else recording_id
        try:
            check_recording_id(recording_id)
        except ValueError:
            raise ValueError("provide the recording_id to stop; this client has not started a recording") from None
        with self._lock:
            return request_recording(self.recording_address, "stop", recording_id, "", timeout)

    def recording_status(self, *, timeout: float = 5.0) -> RecordingStatus:
        with self._lock:
            return request_recording(self.recording_address, "status", "", "", timeout)

    # ---- motion ---------------------------------------------------------------------------
    def connect(self) -> "Fr3Client":
        """Open the command PUSH and state SUB sockets (both conflated)."""
        ctx = zmq.Context.instance()
        if self._cmd_sock is None:
            sock = ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.CONFLATE, 1)
            sock.setsockopt(zmq.SNDHWM, 1)
            sock.setsockopt(zmq.LINGER, 0)
            if self.command_send_timeout_ms is not None:
                sock.setsockopt(zmq.SNDTIMEO, int(self.command_send_timeout_ms))
                sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.connect(f"tcp://{self.host}:{self.cmd_port}")
            self._cmd_sock = sock
        if self._state_sock is None:
            sock = ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.CONFLATE, 1)
            sock.setsockopt(zmq.RCVHWM, 1)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(f"tcp://{self.host}:{self.state_port}")
            self._state_sock = sock
        return self

    def send_joint_impedance(self, q_target, *, K_joint=None, D_joint=None, filter_alpha=None,
                             use_friction=None) -> None:
        """Send a joint impedance target [rad]; gain keywords update the sticky cache."""
        if K_joint is not None:
            self.k_joint = np.asarray(K_joint, dtype=np.float64)
        if D_joint is not None:
            self.d_joint = np.asarray(D_joint, dtype=np.float64)
        if filter_alpha is not None:
            self.filter_alpha = float(filter_alpha)
        if use_friction is not None:
            self.use_friction = bool(use_friction)
        cmd = JointImpedanceCommand(np.asarray(q_target, dtype=np.float64), self.k_joint,
                                    self.d_joint, self.filter_alpha, self.use_friction)
        self.connect()._cmd_sock.send(encode_joint_impedance(cmd))

    def send_idle(self, *, termination: bool = False) -> None:
        """Switch the daemon to idle (gravity compensation); `termination` stops it."""
        self.connect()._cmd_sock.send(encode_idle(IdleCommand(), termination=termination))

    def terminate(self) -> None:
        self.send_idle(termination=True)

    def state(self, timeout: float = 1.0) -> ClientState | None:
        """The newest state message, waiting up to `timeout` s if none arrived yet."""
        sock = self.connect()._state_sock
        if sock.poll(0 if self._last_state is not None else int(timeout * 1000), zmq.POLLIN):
            data = sock.recv()
            self._last_state = ClientState(decode_state(data), time.monotonic())
        return self._last_state

    def close(self) -> None:
        """Close motion sockets; an active recording keeps running."""
        for sock in (self._cmd_sock, self._state_sock):
            if sock is not None:
                sock.close(linger=0)
        self._cmd_sock = self._state_sock = None
