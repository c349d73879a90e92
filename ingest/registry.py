"""The ingest plug-in point: a registry of source readers and the unit they produce.

A source format is one module that defines a `SourceReader` and calls `register(reader)` at
import time, listed in `FORMAT_MODULES`; every reader is tried in a known order: the listed
modules' in the list's order, then any other module's. `detect` and `reader_named` import the
listed modules one at a time, as far as they need (a CSV v2 found by the first does not pay for
the bag reader's rosbags, ~50 ms of a command's start-up); `readers()` imports them all. The
pipeline (`twinlake.ingest.pipeline`) does detect → read → validate → publish (or quarantine)
for all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

FORMAT_MODULES: tuple[str, ...] = (
    "twinlake.ingest.fr3_stack.recording_csv",  # fr3_stack recording CSV v2 / v1
    "twinlake.ingest.frankatwin.readers",  # FrankaTwin logs: 50 Hz, ring 1 kHz, target, sim CSV, sidecar alone
    "twinlake.ingest.frankatwin.results",  # FrankaTwin result files: recognised, never runs (a hint)
    "twinlake.ingest.fr3_stack.excitation",  # fr3_stack joint-excitation run directory
    "twinlake.ingest.episodes.episode",  # TestRandomization episode directory
    "twinlake.ingest.mapped.reader",  # a log of the user's own layout: only with --mapping
    "twinlake.ingest.bags.reader",  # ROS 1 / ROS 2 bags (rosbags)
)
"""The format modules, in detection order (the first reader whose `detect` matches wins).
Adding a source format is one module and one line here."""


class IngestError(ValueError):
    """Structurally broken input. `str()` is one line naming the file, line and field."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None,
                 field: str | None = None, kind: str = "invalid") -> None:
        self.path, self.line, self.field, self.kind = Path(path), line, field, kind
        self.message = message
        where = f"{Path(path).name}" + (f":{line}" if line is not None else "")
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": str(self.path), "line": self.line,
                "field": self.field, "message": self.message, "error": str(self)}


@dataclass(frozen=True)
class Detection:
    """Result of `SourceReader.detect`: `matched`, and `reason` (why, or why not)."""

    matched: bool
    reason: str
    version: int | None = None

    @classmethod
    def no(cls, reason: str) -> "Detection":
        return cls(False, reason)


@dataclass(frozen=True)
class RawFile:
    """An original input file kept byte for byte under the partition's `raw/`."""

    path: Path
    role: str  # "recording", "status", "metadata", "targets", ...


@dataclass(frozen=True)
class ReadOptions:
    """What the user asked for: ids override companion metadata; `allow_partial` keeps the
    complete rows of a truncated file; `mapping`: a mapping TOML, with which every file
    argument is read by the `mapped_log` reader (docs/formats.md). A reader whose input holds
    several runs (a bag of two arms) has `run_selections(path, options) -> list[ReadOptions]`,
    one per run, each with `select` set; the pipeline reads and publishes each alone."""

    robot: str | None = None
    run: str | None = None
    allow_partial: bool = False
    mapping: Path | None = None
    # bags (ingest/bags): a Float64MultiArray target topic, gains when the bag has none,
    # namespace → robot id, and the run (arm) a reader's `run_selections` chose
    target_topic: str | None = None
    kp: tuple[float, ...] | None = None
    kd: tuple[float, ...] | None = None
    robot_map: tuple[tuple[str, str], ...] = ()
    select: str | None = None


@dataclass
class IngestUnit:
    """One run, read from a source, in canonical form, ready to validate and publish.

    - `robot`, `run`: partition ids (`robot` None: the pipeline asks the user to name it).
    - `frames`: canonical columns (catalog.FRAME_SCHEMA, extra source columns allowed).
    - `targets`: optional separately recorded targets (`targets.parquet`).
    - `run_fields`: values for catalog.RUN_SCHEMA columns the reader knows (source_format,
      source_version, recording_id, complete, robot_id, metadata_json, ...); the pipeline
      computes the frame statistics, hashes and verdict.
    - `raw_files`: originals to keep; the first is the primary file (its hash identifies
      the run's bytes for "already ingested").
    - `extra_tables`: more tables written as `<name>.parquet` in the partition;
      `extra_chunks` the same a chunk at a time (every chunk with the table's whole schema;
      `frame_stream.write_chunks`).
    - `reasons`, `flags`: validation notes the reader already found (e.g. truncated).
    - `first_line`: the file line holding frames row 0 (2 for a CSV with one header line),
      so validation errors can name the line; None when rows do not map to lines.
    - `more_frames`: a reader of large files gives `frames` a chunk at a time: the first
      chunk in `frames`, the rest from this iterator (same columns, each with `seq`); the
      pipeline then holds one chunk at a time (`frame_stream`).
    """

    robot: str | None
    run: str
    frames: pa.Table
    raw_files: list[RawFile]
    targets: pa.Table | None = None
    run_fields: dict[str, Any] = field(default_factory=dict)
    extra_tables: dict[str, pa.Table] = field(default_factory=dict)
    extra_chunks: dict[str, Iterator[pa.Table]] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    first_line: int | None = None  # file line of frames row 0 (for error messages)
    more_frames: Iterator[pa.Table] | None = None  # frames after `frames`, in row order


@runtime_checkable
class SourceReader(Protocol):
    """A source format. `detect` decides from content (headers, companion files), never
    from a file name alone, and must be cheap; `read` raises `IngestError` on broken input."""

    name: str

    def detect(self, path: Path) -> Detection: ...

    def read(self, path: Path, options: ReadOptions) -> IngestUnit: ...


_READERS: dict[str, SourceReader] = {}


def register(reader: SourceReader) -> SourceReader:
    """Add a reader to the registry (idempotent by name); returns it."""
    if not isinstance(reader, SourceReader):
        raise TypeError(f"{reader!r} does not implement SourceReader (name, detect, read)")
    _READERS[reader.name] = reader
    return reader


def readers() -> list[SourceReader]:
    """All registered readers, after importing `FORMAT_MODULES`: those of the listed modules
    in the list's order (then each module's registration order), whatever was imported first;
    readers registered by other modules after them, in registration order."""
    return list(_in_order())


def _in_order() -> Iterator[SourceReader]:
    """`readers()`' order, importing each listed module only when the readers before it are used up."""
    rank = {name: i for i, name in enumerate(FORMAT_MODULES)}
    for i, module in enumerate(FORMAT_MODULES):
        importlib.import_module(module)
        yield from [r for r in list(_READERS.values()) if rank.get(type(r).__module__) == i]
    yield from [r for r in list(_READERS.values()) if type(r).__module__ not in rank]


def reader_named(name: str) -> SourceReader:
    """The registered reader called `name` (its module imported if it was not yet); KeyError
    when none is."""
    for reader in _in_order():
        if reader.name == name:
            return reader
    raise KeyError(f"no ingest reader named {name!r}")


def detect(path: Path) -> tuple[SourceReader | None, list[tuple[str, str]]]:
    """The first reader whose `detect` matches `path`, and every `(name, reason)` tried."""
    tried: list[tuple[str, str]] = []
    for reader in _in_order():
        try:
            found = reader.detect(path)
        except OSError as exc:
            found = Detection.no(f"cannot read: {exc.strerror or exc}")
        tried.append((reader.name, found.reason))
        if found.matched:
            return reader, tried
    return None, tried
