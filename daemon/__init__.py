"""twinlake.daemon: a sim-backed FR3 daemon speaking fr3_stack's wire protocol.

Public face: the recording client (`Fr3Client`, `request_recording`, `RecordingStatus`,
`RecordingError`, `RecordingTimeout`), the recording manager and CSV v2 writer, the wire
codecs, the excitation planner, the real-time daemon and the offline recorder.

The names are imported on first use (PEP 562), so that `twinlake --help` does not pay for
the simulator: `from twinlake.daemon import Fr3Daemon` works as before.
"""

from __future__ import annotations

import importlib
from typing import Any

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
_PUBLIC = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'twinlake.daemon' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"twinlake.daemon.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
