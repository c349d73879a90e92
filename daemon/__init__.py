"""twinlake.daemon: a sim-backed FR3 daemon speaking fr3_stack's wire protocol.

Public face: the recording client (`Fr3Client`, `request_recording`, `RecordingStatus`,
`RecordingError`, `RecordingTimeout`), the recording manager and CSV v2 writer, the wire
codecs, the excitation planner, the real-time daemon and the offline recorder.
"""

from .client import ClientState, Fr3Client, RecordingError, RecordingTimeout, request_recording
from .csv_v2 import COLUMNS, HEADER, format_rows
from .excitation import Plan, preflight, validate_plan
from .noise import NoiseConfig
from .offline import OfflineResult, record_offline
from .recording import RecordingManager, RecordingRefused
from .server import DaemonConfig, Fr3Daemon
from .service import RecordingService
from .status import STATUS_KEYS, RecordingStatus

__all__ = [
    "COLUMNS", "HEADER", "STATUS_KEYS", "ClientState", "DaemonConfig", "Fr3Client", "Fr3Daemon",
    "NoiseConfig", "OfflineResult", "Plan", "RecordingError", "RecordingManager", "RecordingRefused",
    "RecordingService", "RecordingStatus", "RecordingTimeout", "format_rows", "preflight",
    "record_offline", "request_recording", "validate_plan",
]
