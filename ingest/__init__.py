"""twinlake.ingest: source readers → canonical Arrow tables → pandera validation → publish.

Public API: `ingest_paths` (the pipeline), the plug-in point (`register`, `readers`,
`SourceReader`, `Detection`, `IngestUnit`, `RawFile`, `ReadOptions`, `IngestError`).
"""

from .registry import (
    FORMAT_MODULES,
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

_LAZY = {"ingest_paths", "ingest_one", "Outcome"}  # the pipeline imports pandera: load on use


def __getattr__(name: str):
    if name in _LAZY:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'twinlake.ingest' has no attribute {name!r}")


__all__ = [
    "Outcome",
    "ingest_one",
    "ingest_paths",
    "FORMAT_MODULES",
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
