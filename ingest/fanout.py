"""Ingest fanned out over Ray: the plan of `plan` (the serial ingest's), each job a Ray task.

`fan_out_paths` executes the plan of `plan.plan_inputs`, as `execute.ingest_paths` does, with
each job's `pipeline.ingest_runs` a Ray task (`num_cpus` CPUs each, at most `workers` in
flight; `TaskQueue` is the executor), on a local Ray (`ray.init(num_cpus=workers *
num_cpus)`) or on the cluster at `address`. Every task is submitted before the first outcome
is waited for (except where the plan must know what an input claimed); the outcomes come
back in the serial order, with the serial messages and exit codes; `on_done(finished,
submitted)` is called as each task ends (a progress bar). An input of several runs (a bag of
two arms) is one task that returns one Outcome per run; with `ReadOptions.mapping` each file
is one task of the reader `mapped_log`.

What travels: a task gets the lake's path (or an `s3://` lake's URI), the input's path (and
its `s3://` URI when the input came from a bucket: the task fetches it on its node,
ingest/remote_inputs.py), the reader's name and the read options (a mapping travels as its
path), and returns the Outcomes: the file bytes never go through Ray's object store. So every
node that runs tasks must see local raw files and the mapping at the same paths, and a local
lake too (one shared filesystem); a lake and inputs on object storage need only the AWS
environment on every node. Each run is published by its task
exactly as the serial ingest publishes it (atomic rename of a staged partition); two inputs
of the same run racing to publish resolve to one: the first to finish publishes, the other
is `already_ingested` (same bytes) or `refused` (catalog.publish_partition refuses the
second rename).

A task uses the CPUs Ray gives it: on entry it confines its process to `num_cpus` of the
node's cores (`os.sched_setaffinity` on every thread of the process: Linux's mask is per
thread; the cores are shared out between the tasks of one machine through lock files in the
temp directory), and restores each thread's mask at the end. The serial ingest's parse and
archive threads, and the pools started before the task, then share those cores only.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from pathlib import Path

from ..catalog import Lake, clean_staging, open_lake
from .outcome import Outcome, rejected
from .pipeline import ingest_runs, unforeseen
from .rawstore import DEFAULT_RAW_CODEC
from .registry import ReadOptions, reader_named
from .remote_inputs import source_uri
from .execute import run_plan
from .plan import Job, ResultImporter, plan_inputs

SLOT_DIR = Path(tempfile.gettempdir()) / "twinlake-cpu-slots"
"""Lock files `cpu<N>.lock`, one per core of this machine, held by the task confined to it."""


@contextmanager
def confined_to_cpus(count: int):
    """Confine this process to `count` cores of its current affinity mask (the ones no other
    fan-out task on this machine holds; the first ones when all are held) for the block's
    duration, then restore the mask. No-op when `count` covers the whole mask."""
    before = os.sched_getaffinity(0)
    if count >= len(before):
        yield sorted(before)
        return
    SLOT_DIR.mkdir(exist_ok=True)
    held, cores, masks = [], [], {}
    try:
        for cpu in sorted(before):
            if len(cores) == count:
                break
            fd = os.open(SLOT_DIR / f"cpu{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            held.append(fd)
            cores.append(cpu)
        cores += [c for c in sorted(before) if c not in cores][: count - len(cores)]
        masks = set_thread_masks(cores)
        yield cores
    finally:
        if masks:
            restore_thread_masks(masks)
        for fd in held:
            os.close(fd)  # releases the lock


def _thread_ids() -> list[int]:
    """Ids of this process's threads (Linux: /proc/self/task); [0] (the caller) elsewhere."""
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return [0]


def set_thread_masks(cores) -> dict[int, set[int]]:
    """Confine every thread of this process to `cores` (Linux's affinity is per thread: the
    syscall on pid 0 moves the caller only, and the pools Arrow, numba or Ray started before
    keep their masks). The threads are listed again until a listing shows none not yet seen,
    so a thread started meanwhile by one not yet confined is confined too (later ones inherit
    a confined mask). Returns each thread's previous mask; a thread that ended is skipped."""
    masks: dict[int, set[int]] = {}
    seen: set[int] = set()
    while new := [tid for tid in _thread_ids() if tid not in seen]:
        seen.update(new)
        for tid in new:
            try:
                masks[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cores)
            except (ProcessLookupError, PermissionError):
                masks.pop(tid, None)
    return masks


def restore_thread_masks(masks: dict[int, set[int]]) -> None:
    """Give each thread its mask from `set_thread_masks` back; threads started in between get
    the caller's previous mask."""
    caller = masks.get(_native_tid())
    for tid in _thread_ids():
        mask = masks.get(tid, caller)
        if mask is None:
            continue
        try:
            os.sched_setaffinity(tid, mask)
        except (ProcessLookupError, PermissionError):
            pass


def _native_tid() -> int:
    import threading

    return threading.get_native_id()


def ingest_task(lake_root: str, path: str, reader_name: str, options: ReadOptions, replace: bool,
                raw_codec: str, num_cpus: int, source: str | None = None) -> list[Outcome]:
    """One input's `ingest_runs` (one Outcome per run), on `num_cpus` cores of the node (the
    body of a Ray task). `source`: the input's `s3://` URI when it came from a bucket, fetched
    to this node's own input mirror first (ingest/remote_inputs.py)."""
    reader = reader_named(reader_name)
    if source is not None:
        from .remote_inputs import fetch_entry

        path = str(fetch_entry(source))
    with confined_to_cpus(num_cpus):  # lake_root: a directory, or an s3:// lake's URI
        return ingest_runs(open_lake(lake_root), Path(path), reader, options, replace=replace,
                           raw_codec=raw_codec)


class TaskQueue:
    """The plan's executor on Ray: tasks of `ingest_task`, at most `workers` in flight;
    `outcomes(index)` waits for one (running the others meanwhile), `on_done(finished,
    submitted)` after each ends and once every job is submitted (`planned`)."""

    def __init__(self, lake: Lake, options: ReadOptions, replace: bool, raw_codec: str, workers: int,
                 num_cpus: int, on_done: Callable[[int, int], None] | None) -> None:
        import ray

        self._ray, self._lake = ray, lake
        self._remote = ray.remote(num_cpus=num_cpus, max_retries=0)(ingest_task)
        self._args = (lake.location.uri if lake.remote else str(lake.root), options, replace, raw_codec, num_cpus)
        self._workers, self._on_done = workers, on_done
        self._waiting: deque[int] = deque()
        self._inputs: dict[int, tuple[Path, str]] = {}
        self._running: dict = {}  # ObjectRef -> job index
        self._done: dict[int, list[Outcome]] = {}

    def submit(self, job: Job) -> None:
        self._inputs[job.index] = (job.path, job.reader)
        self._waiting.append(job.index)
        self._start()

    def _start(self) -> None:
        while self._waiting and len(self._running) < self._workers:
            handle = self._waiting.popleft()
            path, name = self._inputs[handle]
            root, options, replace, codec, cpus = self._args
            self._running[self._remote.remote(root, str(path), name, options, replace, codec, cpus,
                                              source_uri(path))] = handle

    def planned(self) -> None:
        """Every job is submitted: say so (`on_done(finished, submitted)`)."""
        self.report()

    def report(self) -> None:
        """`on_done(finished, submitted)` now."""
        if self._on_done is not None:
            self._on_done(len(self._done), len(self._inputs))

    def _result(self, ref: Any, handle: int) -> list[Outcome]:
        try:
            return self._ray.get(ref)
        except Exception as exc:  # RayTaskError, WorkerCrashedError, ...
            path, name = self._inputs[handle]
            return _task_failed(self._lake, path, name, exc)

    def outcomes(self, handle: int) -> list[Outcome]:
        while handle not in self._done:
            [ref], _ = self._ray.wait(list(self._running), num_returns=1)
            finished = self._running.pop(ref)
            self._done[finished] = self._result(ref, finished)
            self._start()
            self.report()
        return self._done[handle]


def _task_failed(lake: Lake, path: Path, reader_name: str, exc: BaseException) -> list[Outcome]:
    """The one-line outcome of a task that failed outside `ingest_runs`' own handling (its
    worker died, Ray could not run it): the input quarantined, the others go on."""
    cause = getattr(exc, "cause", None) or exc
    return [rejected(lake, path, unforeseen(path, cause), reader_name)]


def fan_out_paths(lake: Lake, paths: list[Path], options: ReadOptions = ReadOptions(), *, workers: int,
                  address: str | None = None, num_cpus: int = 1, replace: bool = False,
                  raw_codec: str = DEFAULT_RAW_CODEC, results: ResultImporter | None = None,
                  on_done: Callable[[int, int], None] | None = None) -> Iterator[Outcome]:
    """`execute.ingest_paths` with every recognised input a Ray task of `num_cpus` CPUs, at
    most `workers` at once; the same Outcomes in the same order. A local Ray (started here,
    shut down at the end) unless `address` names a cluster."""
    if workers < 1 or num_cpus < 1:
        raise ValueError(f"--workers {workers}: expected at least 1 Ray task at a time of at least 1 CPU")
    clean_staging(lake)
    started_ray = _ensure_ray(address, workers * num_cpus)
    try:
        queue = TaskQueue(lake, options, replace, raw_codec, workers, num_cpus, on_done)
        yield from run_plan(plan_inputs(lake, paths, options, results), queue, eager=False)
    finally:
        if started_ray:
            import ray

            ray.shutdown()


def _ensure_ray(address: str | None, num_cpus: int) -> bool:
    """Join `address`, or start a local Ray of `num_cpus` CPUs; True when started here."""
    if address is None and "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")  # as fit/run.py: Ray's default, chosen, no warning
    import ray

    if ray.is_initialized():
        return False
    kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    ray.init(address=address, **kwargs) if address else ray.init(num_cpus=num_cpus, **kwargs)
    return True
