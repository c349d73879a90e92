"""twinlake.ingest: source readers → canonical Arrow tables → pandera validation → publish.

Public API: `ingest_paths` (the serial ingest: plan.py plans, execute.py runs, pipeline.py ingests each input), the plug-in point (`register`, `readers`,
`SourceReader`, `Detection`, `IngestUnit`, `RawFile`, `ReadOptions`, `IngestError`).
"""

from ..contracts.lazy import lazy_exports
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

# the pipeline imports pandera: load it on use
__getattr__, __dir__, _ = lazy_exports(__name__, globals(), {"pipeline": ("Outcome", "ingest_one"),
                                                                "execute": ("ingest_paths",)})

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
