"""Executing an ingest's plan (ingest/plan.py): the jobs run by an executor, the report told in
the plan's order. The serial ingest is `ingest_paths`; the Ray fan-out (ingest/fanout.py)
executes the same plan with each job a Ray task.

`run_plan(plan, executor, eager)`: every `Job` is submitted to the executor as the plan makes
it, every `Claims` answered from the job's Outcomes (the files they name), and the report
entries told in order: at once (`eager`, the serial ingest, whose jobs are done when
submitted) or after the whole plan (the fan-out: every job submitted before the first wait,
except where the plan must know a job's claims). The plan never calls the executor and the
executor never reads the plan: they meet only here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ..catalog import Lake, clean_staging
from .outcome import Outcome
from .pipeline import ingest_runs
from .plan import Claims, Job, Plan, Report, ResultImporter, Tail, Told, plan_inputs, tail_outcomes
from .rawstore import DEFAULT_RAW_CODEC, discard_ahead
from .registry import ReadOptions, reader_named


class Executor(Protocol):
    """Runs the plan's jobs: `submit(job)`; `outcomes(index)` the Outcomes of job `index`
    (waiting for it if need be); `planned()` once every job is submitted."""

    def submit(self, job: Job) -> None: ...

    def outcomes(self, index: int) -> list[Outcome]: ...

    def planned(self) -> None: ...


def run_plan(plan: Plan, executor: Executor, *, eager: bool) -> Iterator[Outcome]:
    """The Outcomes of executing `plan`, in its report order."""
    def claimed(index: int) -> set[Path]:
        return {Path(p) for o in executor.outcomes(index) for p in o.files}

    report: list[Report | Told | Tail] = []
    reply: set[Path] | None = None
    while True:
        try:
            request = plan.send(reply)
        except StopIteration:
            break
        reply = None
        if isinstance(request, Job):
            executor.submit(request)
        elif isinstance(request, Claims):
            reply = claimed(request.index)
        elif eager:
            yield from _told(request, executor, claimed)
        else:
            report.append(request)
    executor.planned()
    for entry in report:
        yield from _told(entry, executor, claimed)


def _told(entry: Report | Told | Tail, executor: Executor, claimed) -> list[Outcome]:
    if isinstance(entry, Report):
        return executor.outcomes(entry.index)
    if isinstance(entry, Told):
        return entry.outcomes
    return tail_outcomes(entry, claimed)


class SerialExecutor:
    """Each job ingested here when it is submitted (`pipeline.ingest_runs`)."""

    def __init__(self, lake: Lake, options: ReadOptions, replace: bool, raw_codec: str) -> None:
        self._lake, self._options, self._replace, self._codec = lake, options, replace, raw_codec
        self._done: dict[int, list[Outcome]] = {}

    def submit(self, job: Job) -> None:
        self._done[job.index] = ingest_runs(self._lake, job.path, reader_named(job.reader), self._options,
                                            replace=self._replace, raw_codec=self._codec)

    def outcomes(self, index: int) -> list[Outcome]:
        return self._done[index]

    def planned(self) -> None:
        pass


def ingest_paths(lake: Lake, paths: list[Path], options: ReadOptions = ReadOptions(), *,
                 replace: bool = False, raw_codec: str = DEFAULT_RAW_CODEC,
                 results: ResultImporter | None = None) -> Iterator[Outcome]:
    """Ingest every path (file or directory) here, one input after another; yields one Outcome
    per input (per run of an input holding several), in the plan's order (ingest/plan.py).
    `raw_codec` compresses the kept originals (rawstore.RAW_CODECS); `results` imports the
    result files of each directory (None: they are noted as skipped, not runs)."""
    clean_staging(lake)
    executor = SerialExecutor(lake, options, replace, raw_codec)
    try:
        yield from run_plan(plan_inputs(lake, paths, options, results), executor, eager=True)
    finally:
        discard_ahead()  # an archive started ahead for an input the plan did not ingest


__all__ = ["Executor", "SerialExecutor", "ingest_paths", "run_plan"]
