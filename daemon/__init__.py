"""twinlake.daemon: a sim-backed FR3 daemon speaking fr3_stack's wire protocol.

Public face: the recording client (`Fr3Client`, `request_recording`, `RecordingStatus`,
`RecordingError`, `RecordingTimeout`), the recording manager and CSV v2 writer, the wire
codecs, the excitation planner, the real-time daemon and the offline recorder.

The names are imported on first use (PEP 562, contracts/lazy.py), so that a user of the
client alone (`twinlake record`) does not pay for the simulator: `from twinlake.daemon import
Fr3Daemon` works as before.
"""

from __future__ import annotations

from ..contracts.lazy import lazy_exports

_MODULES = {
    "client": ("ClientState", "Fr3Client", "RecordingError", "RecordingTimeout", "request_recording"),
    "csv_v2": ("COLUMNS", "HEADER", "format_rows"),
    "excitation": ("Plan", "preflight", "validate_plan"),
    "noise": ("NoiseConfig",),
    "offline": ("OfflineResult", "record_offline"),
    "recording": ("RecordingManager", "RecordingRefused"),
    "server": ("DaemonConfig", "Fr3Daemon"),
    "service": ("RecordingService",),
    "status": ("STATUS_KEYS", "RecordingStatus"),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), _MODULES)
