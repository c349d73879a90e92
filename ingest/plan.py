"""The plan of an ingest: which inputs there are, which reader reads each, and in which order
their outcomes are told. It decides; it never ingests.

`plan_inputs(lake, paths, options, results)` is a generator of requests to whoever executes
the plan (`execute.run_plan`, serial or on Ray):

- `Job(index, path, reader)`: ingest this input (jobs are numbered 0, 1, ... in plan order);
- `Claims(index)`: the plan must know which files job `index` claimed before it goes on; the
  executor sends back that set of paths (the only request that waits for a job);
- `Report(index)`, `Told(outcomes)`, `Tail(...)`: the report, in order — job `index`'s
  Outcomes (one per run the input holds, a bag of two arms being two), outcomes the plan
  decided itself, a directory's tail (`tail_outcomes` turns it into Outcomes once the jobs it
  names are done).

The rules:

- A path that does not exist is an `error`. With `ReadOptions.mapping` every path is a file
  read by the reader `mapped_log` without detection (a directory is an `error`: name the log
  files; so is a mapping file that does not exist).
- A path a reader recognises is one input (a rosbag2 directory, an excitation run, an
  episode); when it is a directory, its entries that input did not claim are planned as a
  directory's, quietly (no skipped notes: they belong to a unit already ingested).
- A directory no reader recognises: its entries in name order (names starting with '.'
  ignored), each recognised one an input, unless an earlier input claimed it; then the
  result files under it (`results`: fits, validations; not runs); then a `skipped` note for
  each entry nothing recognised or claimed, or, when nothing in it was recognised, one
  `unrecognised` outcome listing every entry and why each reader declined it.
- A file no reader recognises is `rejected` (quarantined with its companions).

Claimed siblings: a reader may claim files beside its input as its own (`.meta.json`, a
FrankaTwin sidecar, `<stem>_targets.csv`); every built-in one names them after its input's
stem (the name up to its first '.'). So before a recognised entry becomes a job, the earlier
jobs of its directory whose stem begins its name are asked for their claims, and it is passed
over when one of them claimed it; an entry no reader recognises waits for nothing (it is
dropped from the notes at the end if a job claimed it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..catalog import Lake
from .outcome import Outcome, rejected
from .registry import IngestError, ReadOptions, detect

ResultImporter = Callable[[Path], Iterable[dict[str, Any]]]
"""Imports the result files under a directory (`lambda folder: import_results(lake, [folder],
robot)` of `twinlake.fit.records.frankatwin_import`); yields one dict per file it handled: `path`,
`ok`, `message`, and `kind`, `existed`, `partition`. An entry it says nothing about is noted
as skipped."""

MAPPED_READER = "mapped_log"
"""The reader of every file argument when `ReadOptions.mapping` is given."""


@dataclass(frozen=True)
class Job:
    """Ingest `path` with the reader named `reader`; `index` numbers the jobs in plan order."""

    index: int
    path: Path
    reader: str


@dataclass(frozen=True)
class Claims:
    """The plan waits for job `index` and needs the files it claimed (sent back as a set)."""

    index: int


@dataclass(frozen=True)
class Report:
    """Job `index`'s Outcomes, told here."""

    index: int


@dataclass(frozen=True)
class Told:
    """Outcomes the plan decided itself (a missing path, an unrecognised file), told here."""

    outcomes: list[Outcome]


@dataclass(frozen=True)
class Tail:
    """A directory's tail, told once `jobs` are done (`tail_outcomes`): the result files
    `results` imports, then a skipped note per `unrecognised` entry no job claimed (none when
    `quiet`), or one `unrecognised` outcome when nothing in the directory was recognised."""

    folder: Path
    jobs: tuple[int, ...]
    unrecognised: tuple[tuple[Path, tuple[tuple[str, str], ...]], ...]
    consumed: frozenset[Path]
    quiet: bool
    results: ResultImporter | None = field(default=None, compare=False)


Request = Job | Claims | Report | Told | Tail
Plan = Generator[Request, "set[Path] | None", None]


class _Numbering:
    def __init__(self) -> None:
        self.count = 0

    def job(self, path: Path, reader: str) -> Job:
        self.count += 1
        return Job(self.count - 1, path, reader)


def plan_inputs(lake: Lake, paths: list[Path], options: ReadOptions,
                results: ResultImporter | None = None) -> Plan:
    """The requests of ingesting `paths` (files or directories), in report order."""
    jobs = _Numbering()
    for path in map(Path, paths):
        if not path.exists():
            yield Told([Outcome(str(path), "error", f"{path}: no such file or directory")])
        elif options.mapping is not None:
            yield from _mapped(path, options.mapping, jobs)
        else:
            yield from _plan_path(lake, path, jobs, results)


def _plan_path(lake: Lake, path: Path, jobs: _Numbering, results: ResultImporter | None) -> Plan:
    reader, tried = detect(path)
    if reader is not None:
        job = jobs.job(path, reader.name)
        yield job
        yield Report(job.index)
        if path.is_dir():  # a directory unit (excitation run, episode) may hold recordings
            consumed = yield Claims(job.index)
            yield from _plan_dir(path, jobs, results, consumed, quiet=True)
    elif path.is_dir():
        yield from _plan_dir(path, jobs, results)
    else:
        err = IngestError(path, f"not a recognised recording ({_why(tried) or 'no readers'})",
                          kind="unrecognised")
        yield Told([rejected(lake, path, err, None)])


def _mapped(path: Path, mapping: Path, jobs: _Numbering) -> Plan:
    """One file read through the user's mapping (no detection: the mapping says what it is)."""
    if path.is_dir():
        yield Told([Outcome(str(path), "error", f"{path}: --mapping reads files, not a "
                            "directory: name the log files")])
    elif not Path(mapping).is_file():
        yield Told([Outcome(str(path), "error", f"{mapping}: no such mapping file")])
    else:
        job = jobs.job(path, MAPPED_READER)
        yield job
        yield Report(job.index)


def _plan_dir(folder: Path, jobs: _Numbering, results: ResultImporter | None,
              consumed: set[Path] | None = None, quiet: bool = False) -> Plan:
    """Every recognised entry of `folder` not in `consumed` (a job each), then its tail."""
    consumed = set(consumed or ())
    unrecognised: list[tuple[Path, tuple[tuple[str, str], ...]]] = []
    started: list[Job] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry in consumed:
            continue
        reader, tried = detect(entry)
        if reader is None:  # kept for the tail, which drops those claimed after all
            unrecognised.append((entry, tuple(tried)))
            continue
        for earlier in started:  # may an earlier input claim this one? wait for it
            if entry.name.startswith(_stem(earlier.path)):
                consumed |= yield Claims(earlier.index)
        if entry in consumed:
            continue
        job = jobs.job(entry, reader.name)
        started.append(job)
        yield job
        yield Report(job.index)
    yield Tail(folder, tuple(j.index for j in started), tuple(unrecognised), frozenset(consumed),
               quiet, results)


def tail_outcomes(tail: Tail, claimed: Callable[[int], set[Path]]) -> list[Outcome]:
    """The Outcomes of a directory's tail; `claimed(index)`: the files job `index` claimed
    (its jobs are done when this is called)."""
    consumed = set(tail.consumed)
    for index in tail.jobs:
        consumed |= claimed(index)
    told = list(_import_results(tail.folder, tail.results))
    imported = {Path(o.path) for o in told}
    left = [(e, tried) for e, tried in tail.unrecognised if e not in consumed and e not in imported]
    if tail.quiet:
        return told
    if not tail.jobs and not imported:
        return told + [_nothing_recognised(tail.folder, left)]
    return told + [Outcome(str(e), "skipped", f"{e.name}: skipped, not recognised ({_why(tried)})")
                   for e, tried in left]


def _stem(entry: Path) -> str:
    return entry.name.split(".", 1)[0]


def _why(tried: Iterable[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {reason}" for name, reason in tried)


def _nothing_recognised(folder: Path, seen: list[tuple[Path, tuple[tuple[str, str], ...]]]) -> Outcome:
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
