"""What happened to one input of an ingest (`Outcome`, its exit code), and the outcome of an
input refused as a whole (`rejected`: quarantined with its companions, never published).

Shared by the per-input pipeline (`pipeline`), the plan of the inputs (`plan`), its
executors (`execute`, `fanout`), which all report in these terms.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..catalog import Lake, quarantine
from .companions import companion_candidates
from .registry import IngestError

EXIT_OK, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2
_EXIT = {"published": EXIT_OK, "replaced": EXIT_OK, "already_ingested": EXIT_OK,
         "skipped": EXIT_OK, "rejected": EXIT_REJECTED, "unrecognised": EXIT_REJECTED,
         "refused": EXIT_USAGE, "error": EXIT_USAGE}


@dataclass
class Outcome:
    """What happened to one input. `status`: published | replaced | already_ingested |
    skipped (a directory entry no reader matched, beside recognised ones) | rejected
    (quarantined) | unrecognised (a directory in which no reader matched anything) |
    refused (exists, different bytes) | error (usage)."""

    path: str
    status: str
    message: str
    format: str | None = None
    robot: str | None = None
    run: str | None = None
    frame_count: int | None = None
    verdict: str | None = None
    flags: list[str] = field(default_factory=list)
    partition: str | None = None
    quarantine: str | None = None
    files: list[str] = field(default_factory=list)  # inputs this outcome used

    @property
    def exit_code(self) -> int:
        return _EXIT[self.status]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rejected(lake: Lake, path: Path, err: IngestError, fmt: str | None,
             also: list[Path] = ()) -> Outcome:
    """Quarantine the input (with its companions and `also`: a mapping file) and say why."""
    reason = err.as_dict() | {"format": fmt}
    files = [path] + companion_candidates(path) if path.is_file() else [path]
    files += [f for f in also if f.is_file() and f not in files]
    qdir = quarantine(lake, files, reason)
    one_line = " ".join(str(err).splitlines())  # a library's words may span lines
    return Outcome(str(path), "rejected", f"{one_line} (quarantined)", format=fmt,
                   quarantine=str(qdir))
