"""The recording manager: one active 1 kHz recording per daemon (fr3_stack `src/recording.cpp`, docs/daemon.md).

`RecordingManager.start/stop/status` implement fr3_stack's rules (ID and path checks, idempotent
same-ID start and stop, refusal of reused or stale IDs, exclusive file creation); `capture` is
the real-time producer the control loop calls once per tick. Refusals raise `RecordingRefused`
carrying the manager's current status.
"""

from __future__ import annotations

import re
import threading
import time

import numpy as np

from .csv_v2 import SEQ, T_S
from .ring import DEFAULT_SLOTS, FrameRing
from .status import RecordingStatus
from .writer import RingLogWriter

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
MAX_ID_CHARS = 128
MAX_PATH_BYTES = 4096
PATH_ERROR = "recording path must be an absolute NUC path without NUL, at most 4096 bytes"


def check_recording_id(recording_id: str) -> None:
    """Raise ValueError unless the ID has 1–128 characters from [A-Za-z0-9_-]."""
    if not isinstance(recording_id, str) or not 1 <= len(recording_id) <= MAX_ID_CHARS:
        raise ValueError("invalid recording ID")
    if not ID_PATTERN.fullmatch(recording_id):
        raise ValueError("recording ID must contain only letters, digits, - or _")


def check_recording_path(path: str) -> None:
    """Raise ValueError unless the path is absolute, NUL-free and at most 4096 UTF-8 bytes."""
    if (not isinstance(path, str) or not path.startswith("/") or "\x00" in path
            or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES):
        raise ValueError(PATH_ERROR)


class RecordingRefused(Exception):
    """A refused request: `str(exc)` is the reply error, `.status` the current status."""

    def __init__(self, message: str, status: RecordingStatus) -> None:
        super().__init__(message)
        self.status = status


class RecordingManager:
    """Owns the permanent ring, the current writer and the used-ID registry."""

    def __init__(self, ring_slots: int = DEFAULT_SLOTS) -> None:
        self.ring = FrameRing(ring_slots)
        self._lock = threading.Lock()  # serialises start/stop/status (service thread side)
        self._writer: RingLogWriter | None = None
        self._id = ""
        self._path = ""
        self._used_ids: set[str] = set()
        self._enabled = False
        self._busy = False
        self._seq = 0
        self._t0: float | None = None
        self.any_failed = False  # a recording failed or was incomplete (daemon exit 2)
        self._create_error = ""  # text of an exception thrown while creating the writer
        self._create_errno = 0

    # ---- real-time producer ---------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self._enabled

    def capture(self, frame: np.ndarray, t_host_s: float) -> None:
        """Record one tick: set `seq` and `t_s` (host time relative to the run's first frame)
        in `frame` (80 values, modified in place) and push it; a full ring counts a drop."""
        self._busy = True
        try:
            if not self._enabled:
                return
            if self._t0 is None:
                self._t0 = t_host_s
            frame[SEQ] = self._seq
            frame[T_S] = t_host_s - self._t0
            self._seq += 1
            self.ring.push(frame)
        finally:
            self._busy = False

    # ---- service side ---------------------------------------------------------------------
    def status(self) -> RecordingStatus:
        """Status of the current or most recent run (all-false and empty before the first)."""
        with self._lock:
            return self._status_locked()

    def _status_locked(self) -> RecordingStatus:
        w = self._writer
        if w is None:
            if self._id:  # the writer could not even be created
                return RecordingStatus(self._id, self._path, finished=True, error=self._create_error,
                                       error_code=self._create_errno)
            return RecordingStatus()
        return RecordingStatus(
            recording_id=self._id, path=self._path, active=self._enabled, ok=w.ok,
            finished=w.finished, complete=w.complete, written=w.written,
            discarded=w.discarded, dropped=self.ring.dropped, error=w.error,
            error_code=w.error_code,
        )

    def start(self, recording_id: str, path: str) -> RecordingStatus:
        """Start a run (fr3_stack's recording-manager rules, in order; docs/daemon.md); refusals raise `RecordingRefused`."""
        with self._lock:
            try:
                check_recording_id(recording_id)
                check_recording_path(path)
            except ValueError as exc:
                raise RecordingRefused(str(exc), self._status_locked()) from None
            if recording_id == self._id and path == self._path and self._writer is not None:
                return self._status_locked()
            if recording_id in self._used_ids:
                raise RecordingRefused("recording ID already used; do not restart an old request",
                                       self._status_locked())
            if self._enabled:
                raise RecordingRefused("a recording is already active", self._status_locked())
            return self._start_locked(recording_id, path)

    def _start_locked(self, recording_id: str, path: str) -> RecordingStatus:
        self._used_ids.add(recording_id)
        self._id, self._path = recording_id, path
        self._writer = None
        self._create_error, self._create_errno = "", 0
        self.ring.reset()
        self._seq, self._t0 = 0, None
        try:
            writer = RingLogWriter(path, self.ring)
            writer.start()
        except Exception as exc:  # creating the writer itself threw
            self._create_error, self._create_errno = str(exc), 0
            self.any_failed = True
            return self._status_locked()
        self._writer = writer
        while not writer.ok and not writer.failed and not writer.finished:
            time.sleep(0.001)
        if writer.ok:
            self._enabled = True
        else:
            writer.stop()
            self.any_failed = True
        return self._status_locked()

    def stop(self, recording_id: str) -> RecordingStatus:
        """Stop the current run (idempotent); a different ID raises `RecordingRefused`."""
        with self._lock:
            if recording_id != self._id or not self._id:
                raise RecordingRefused("recording ID mismatch; current recording was not stopped",
                                       self._status_locked())
            if self._enabled:
                self._enabled = False
                while self._busy:  # an in-flight push finishes before the writer drains
                    time.sleep(0.001)
                self._writer.stop()
                if not self._writer.complete:
                    self.any_failed = True
            return self._status_locked()

    def shutdown(self) -> RecordingStatus:
        """Finalise any active run (daemon shutdown) and return the last status."""
        if self._enabled:
            return self.stop(self._id)
        return self.status()
