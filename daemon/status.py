"""`RecordingStatus`: the 11-key status of the current or most recent recording (fr3_stack `fr3_stack/recording.py`; docs/daemon.md).

There are no named states; a run's state is the combination of `active`, `ok`, `finished` and
`complete`. `written`, `discarded` and `dropped` count rows (frames), `error_code` is an errno.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

STATUS_KEYS = (
    "recording_id", "path", "active", "ok", "finished", "complete",
    "written", "discarded", "dropped", "error", "error_code",
)


@dataclass(frozen=True)
class RecordingStatus:
    """Recording status, field order as fr3_stack's client (`json.dumps(asdict(s))` keys)."""

    recording_id: str = ""
    path: str = ""
    active: bool = False
    ok: bool = False
    finished: bool = False
    complete: bool = False
    written: int = 0
    discarded: int = 0
    dropped: int = 0
    error: str = ""
    error_code: int = 0

    def to_dict(self) -> dict:
        """The 11 keys in order, JSON-ready."""
        return asdict(self)

    def fill_capnp(self, builder) -> None:
        """Copy into a `RecordingStatus` capnp builder."""
        builder.recordingId = self.recording_id
        builder.path = self.path
        builder.active = self.active
        builder.ok = self.ok
        builder.finished = self.finished
        builder.complete = self.complete
        builder.written = int(self.written)
        builder.discarded = int(self.discarded)
        builder.dropped = int(self.dropped)
        builder.error = self.error
        builder.errorCode = int(self.error_code)

    @classmethod
    def from_capnp(cls, reader) -> "RecordingStatus":
        """Build from a capnp `RecordingStatus` reader (recordingId → recording_id, ...)."""
        return cls(
            recording_id=str(reader.recordingId),
            path=str(reader.path),
            active=bool(reader.active),
            ok=bool(reader.ok),
            finished=bool(reader.finished),
            complete=bool(reader.complete),
            written=int(reader.written),
            discarded=int(reader.discarded),
            dropped=int(reader.dropped),
            error=str(reader.error),
            error_code=int(reader.errorCode),
        )
