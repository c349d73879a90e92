"""twinlake.daemon: a sim-backed FR3 daemon speaking fr3_stack's wire protocol.

Public face: the recording client (`Fr3Client`, `request_recording`, `RecordingStatus`,
`RecordingError`, `RecordingTimeout`), the recording manager and CSV v2 writer, the wire
codecs, the excitation planner, the real-time daemon and the offline recorder.
"""

from .client import ClientState, Fr3Client, RecordingError, RecordingTimeout, request_recording
from .csv_v2 import COLUMNS, HEADER, format_rows
from .recording import RecordingManager, RecordingRefused
from .service import RecordingService
from .status import STATUS_KEYS, RecordingStatus

__all__ = [
    "COLUMNS", "HEADER", "STATUS_KEYS", "ClientState", "Fr3Client", "RecordingError",
    "RecordingManager", "RecordingRefused", "RecordingService", "RecordingStatus",
    "RecordingTimeout", "format_rows", "request_recording",
]
