"""The one walk of an ingest's inputs, for the serial ingest (`pipeline.ingest_paths`) and the
fan-out over Ray (`fanout.fan_out_paths`): which inputs there are, which reader reads each,
and in which order their outcomes are told.

`walk_inputs(lake, paths, options, runner, results)` yields steps: each a callable that gives
the Outcomes of one part of the ingest, in the order they are reported. A recognised input
is handed to the `runner` (`submit(path, reader_name) -> handle`, `outcomes(handle) ->
[Outcome]`: one per run the input holds, a bag of two arms being two), which ingests it at
once (the serial ingest) or as a Ray task (the fan-out); the walk asks for an input's
outcomes only where it needs to know what the input claimed.

The rules:

- A path that does not exist is an `error`. With `ReadOptions.mapping` every path is a file
  read by the reader `mapped_log` without detection (a directory is an `error`: name the log
  files; so is a mapping file that does not exist).
- A path a reader recognises is one input (a rosbag2 directory, an excitation run, an
  episode); when it is a directory, its entries that input did not claim are walked as a
  directory's, quietly (no skipped notes: they belong to a unit already ingested).
- A directory no reader recognises: its entries in name order (names starting with '.'
  ignored), each recognised one an input, unless an earlier input claimed it; then the
  result files under it (`results`: fits, validations; not runs); then a `skipped` note for
  each entry nothing recognised or claimed, or, when nothing in it was recognised, one
  `unrecognised` outcome listing every entry and why each reader declined it.
- A file no reader recognises is `rejected` (quarantined with its companions).

Claimed siblings: a reader may claim files beside its input as its own (`.meta.json`, a
FrankaTwin sidecar, `<stem>_targets.csv`); every built-in one names them after its input's
stem (the name up to its first '.'). So before a recognised entry is handed on, the earlier
inputs of its directory whose stem begins its name are waited for, and it is passed over when
one of them claimed it; an entry no reader recognises waits for nothing (it is dropped from
the notes at the end if an input claimed it). In the serial ingest nothing waits: each input
is done when it is handed on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from ..catalog import Lake
from .outcome import Outcome, rejected
from .registry import IngestError, ReadOptions, detect

ResultImporter = Callable[[Path], Iterable[dict[str, Any]]]
"""Imports the result files under a directory (`lambda folder: import_results(lake, [folder],
robot)` of `twinlake.fit.records.frankatwin_import`); yields one dict per file it handled: `path`,
`ok`, `message`, and `kind`, `existed`, `partition`. An entry it says nothing about is noted
as skipped."""

Step = Callable[[], list[Outcome]]
"""One part of the ingest's report: the Outcomes of an input, of a directory's tail, or one
the walk decided itself (a missing path)."""

MAPPED_READER = "mapped_log"
"""The reader of every file argument when `ReadOptions.mapping` is given."""


class InputRunner(Protocol):
    """Ingests the inputs the walk hands it: `submit` one (its path and reader's name; the
    runner holds the lake and options) and get a handle; `outcomes(handle)`: its Outcomes
    (waiting for them if need be)."""

    def submit(self, path: Path, reader_name: str) -> int: ...

    def outcomes(self, handle: int) -> list[Outcome]: ...


def walk_inputs(lake: Lake, paths: list[Path], options: ReadOptions, runner: InputRunner,
                results: ResultImporter | None = None) -> Iterator[Step]:
    """The steps of ingesting `paths` (files or directories), in report order."""
    for path in map(Path, paths):
        if not path.exists():
            yield _told(Outcome(str(path), "error", f"{path}: no such file or directory"))
        elif options.mapping is not None:
            yield _mapped(path, options.mapping, runner)
        else:
            yield from _walk_path(lake, path, runner, results)


def _walk_path(lake: Lake, path: Path, runner: InputRunner,
               results: ResultImporter | None) -> Iterator[Step]:
    reader, tried = detect(path)
    if reader is not None:
        handle = runner.submit(path, reader.name)
        yield partial(runner.outcomes, handle)
        if path.is_dir():  # a directory unit (excitation run, episode) may hold recordings
            consumed = {Path(p) for o in runner.outcomes(handle) for p in o.files}
            yield from _walk_dir(path, runner, results, consumed, quiet=True)
    elif path.is_dir():
        yield from _walk_dir(path, runner, results)
    else:
        err = IngestError(path, f"not a recognised recording ({_why(tried) or 'no readers'})",
                          kind="unrecognised")
        yield _told(rejected(lake, path, err, None))


def _mapped(path: Path, mapping: Path, runner: InputRunner) -> Step:
    """One file read through the user's mapping (no detection: the mapping says what it is)."""
    if path.is_dir():
        return _told(Outcome(str(path), "error", f"{path}: --mapping reads files, not a "
                             "directory: name the log files"))
    if not Path(mapping).is_file():
        return _told(Outcome(str(path), "error", f"{mapping}: no such mapping file"))
    return partial(runner.outcomes, runner.submit(path, MAPPED_READER))


def _walk_dir(folder: Path, runner: InputRunner, results: ResultImporter | None,
              consumed: set[Path] | None = None, quiet: bool = False) -> Iterator[Step]:
    """Every recognised entry of `folder` not in `consumed` (one step each), then one step
    for the tail: its result files through `results`, then the skipped notes (or one
    `unrecognised`). `quiet`: no notes (the entries belong to a unit already ingested)."""
    consumed = set(consumed or ())
    unrecognised: list[tuple[Path, list[tuple[str, str]]]] = []
    started: list[tuple[Path, int]] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry in consumed:
            continue
        reader, tried = detect(entry)
        if reader is None:  # kept for the tail, which drops those claimed after all
            unrecognised.append((entry, tried))
            continue
        for earlier, handle in started:  # may an earlier input claim this one? wait for it
            if entry.name.startswith(_stem(earlier)):
                consumed.update(Path(p) for o in runner.outcomes(handle) for p in o.files)
        if entry in consumed:
            continue
        handle = runner.submit(entry, reader.name)
        started.append((entry, handle))
        yield partial(runner.outcomes, handle)

    def tail() -> list[Outcome]:
        for _, handle in started:
            consumed.update(Path(p) for o in runner.outcomes(handle) for p in o.files)
        told = list(_import_results(folder, results))
        imported = {Path(o.path) for o in told}
        left = [(e, tried) for e, tried in unrecognised if e not in consumed and e not in imported]
        if quiet:
            return told
        if not started and not imported:
            return told + [_nothing_recognised(folder, left)]
        return told + [Outcome(str(e), "skipped", f"{e.name}: skipped, not recognised "
                               f"({_why(tried)})") for e, tried in left]

    yield tail


def _stem(entry: Path) -> str:
    return entry.name.split(".", 1)[0]


def _why(tried: list[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {reason}" for name, reason in tried)


def _told(outcome: Outcome) -> Step:
    return lambda: [outcome]


def _nothing_recognised(folder: Path, seen: list[tuple[Path, list[tuple[str, str]]]]) -> Outcome:
    """The outcome of a directory argument in which no reader matched anything: every entry
    seen, with why each reader declined it (exit 1, nothing quarantined)."""
    if not seen:
        return Outcome(str(folder), "unrecognised", f"{folder}: nothing to ingest: the "
                       "directory is empty (names starting with '.' are ignored)")
    lines = [f"{folder}: nothing recognised: no reader matched any of its {len(seen)} "
             f"entr{'y' if len(seen) == 1 else 'ies'}:"]
    for entry, tried in seen:
        lines.append(f"  {entry.name}{'/' if entry.is_dir() else ''}: {_why(tried)}")
    return Outcome(str(folder), "unrecognised", "\n".join(lines),
                   files=[str(e) for e, _ in seen])


def _import_results(folder: Path, results: ResultImporter | None) -> Iterator[Outcome]:
    """The result files under the directory, imported by `results` (fits, then
    validations), one Outcome per file it answered for."""
    for item in results(folder) if results is not None else ():
        status = (("already_ingested" if item.get("existed") else "published") if item["ok"]
                  else "rejected")
        yield Outcome(item["path"], status, item["message"], format=item.get("kind"),
                      partition=item.get("partition"), files=[item["path"]])
