"""twinlake.ingest: source readers → canonical Arrow tables → pandera validation → publish.

Public API: `ingest_paths` (the pipeline), the plug-in point (`register`, `readers`,
`SourceReader`, `Detection`, `IngestUnit`, `RawFile`, `ReadOptions`, `IngestError`).
"""

from twinlake.ingest.registry import (
    FORMAT_PREFIXES,
    Detection,
    IngestError,
    IngestUnit,
    RawFile,
    ReadOptions,
    SourceReader,
    detect,
    readers,
    register,
)

__all__ = [
    "FORMAT_PREFIXES",
    "Detection",
    "IngestError",
    "IngestUnit",
    "RawFile",
    "ReadOptions",
    "SourceReader",
    "detect",
    "readers",
    "register",
]
