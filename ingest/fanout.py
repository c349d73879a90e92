"""Ingest fanned out over Ray: the serial pipeline's walk, each recognised input a Ray task.

`fan_out_paths` walks the paths exactly as `pipeline.ingest_paths` does (the same entries,
the same directory rules, the same result-file import and skipped notes) but runs each
recognised input's `ingest_one` as a Ray task (`num_cpus` CPUs each, at most `workers` in
flight), on a local Ray (`ray.init(num_cpus=workers * num_cpus)`) or on the cluster at
`address`. Its outcomes come back in the serial order, with the serial messages and exit
codes; `on_done(finished, submitted)` is called as each task ends (a progress bar).

What travels: a task gets the lake's path, the input's path, the reader's name and the read
options, and returns the `Outcome`: the file bytes never go through Ray's object store. So
every node that runs tasks must see the raw files and the lake at the same paths (one shared
filesystem). Each file is published by its task exactly as the serial ingest publishes it
(atomic rename of a staged partition); two inputs of the same run racing to publish resolve
to one: the first to finish publishes, the other is `already_ingested` (same bytes) or
`refused` (catalog.publish_partition refuses the second rename).

A task uses the CPUs Ray gives it: on entry it confines its process to `num_cpus` of the
node's cores (`os.sched_setaffinity` on every thread of the process: Linux's mask is per
thread; the cores are shared out between the tasks of one machine through lock files in the
temp directory), and restores each thread's mask at the end. The serial ingest's parse and
archive threads, and the pools started before the task, then share those cores only.

Companions: a reader may claim sibling files as its own (`.meta.json`, a FrankaTwin sidecar,
`<stem>_targets.csv`); every built-in one names them after its primary's stem. So before a
recognised entry is started, the earlier inputs whose stem (the name up to its first '.')
begins its name are waited for, and it is skipped, as the serial ingest skips it, when one of
them claimed it. An entry no reader recognises (a `.status.json`) waits for nothing: it is
noted as skipped at the end unless an input claimed it.
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
from pathlib import Path

from ..catalog import Lake, clean_staging
from .pipeline import Outcome, ResultImporter, _import_results, _nothing_recognised, _reject, ingest_one
from .rawstore import DEFAULT_RAW_CODEC
from .registry import IngestError, ReadOptions, detect, readers

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
    keep their masks). Returns each thread's previous mask; threads started later inherit
    the caller's. A thread that ended meanwhile is skipped."""
    masks = {}
    for tid in _thread_ids():
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
                raw_codec: str, num_cpus: int) -> Outcome:
    """One input's `ingest_one`, on `num_cpus` cores of the node (the body of a Ray task)."""
    reader = {r.name: r for r in readers()}[reader_name]
    with confined_to_cpus(num_cpus):
        return ingest_one(Lake(Path(lake_root)), Path(path), reader, options, replace=replace, raw_codec=raw_codec)


class TaskQueue:
    """Ray tasks of `ingest_task`, at most `workers` in flight; `outcome(handle)` waits for one
    (running the others meanwhile), `on_done(finished, submitted)` after each ends."""

    def __init__(self, lake: Lake, options: ReadOptions, replace: bool, raw_codec: str, workers: int,
                 num_cpus: int, on_done: Callable[[int, int], None] | None) -> None:
        import ray

        self._ray = ray
        self._remote = ray.remote(num_cpus=num_cpus, max_retries=0)(ingest_task)
        self._args = (str(lake.root), options, replace, raw_codec, num_cpus)
        self._workers, self._on_done = workers, on_done
        self._waiting: deque[int] = deque()
        self._inputs: list[tuple[Path, str]] = []
        self._running: dict = {}  # ObjectRef -> handle
        self._done: dict[int, Outcome] = {}

    def submit(self, path: Path, reader_name: str) -> int:
        self._inputs.append((path, reader_name))
        self._waiting.append(len(self._inputs) - 1)
        self._start()
        return len(self._inputs) - 1

    def _start(self) -> None:
        while self._waiting and len(self._running) < self._workers:
            handle = self._waiting.popleft()
            path, name = self._inputs[handle]
            root, options, replace, codec, cpus = self._args
            self._running[self._remote.remote(root, str(path), name, options, replace, codec, cpus)] = handle

    def report(self) -> None:
        """`on_done(finished, submitted)` now (e.g. once every input is submitted)."""
        if self._on_done is not None:
            self._on_done(len(self._done), len(self._inputs))

    def outcome(self, handle: int) -> Outcome:
        while handle not in self._done:
            [ref], _ = self._ray.wait(list(self._running), num_returns=1)
            finished = self._running.pop(ref)
            self._done[finished] = self._ray.get(ref)
            self._start()
            self.report()
        return self._done[handle]


def _stem(entry: Path) -> str:
    return entry.name.split(".", 1)[0]


def _walk(lake: Lake, paths: list[Path], queue: TaskQueue, results: ResultImporter | None) -> Iterator:
    """The serial pipeline's walk; yields Outcomes, task handles (int) and callables that
    give the Outcomes of a directory's tail once its entries are done."""
    for path in map(Path, paths):
        if not path.exists():
            yield Outcome(str(path), "error", f"{path}: no such file or directory")
            continue
        reader, tried = detect(path)
        if reader is not None:
            handle = queue.submit(path, reader.name)
            yield handle
            if path.is_dir():  # a directory unit may hold recordings of its own
                consumed = {Path(p) for p in queue.outcome(handle).files}
                yield from _walk_dir(path, queue, results, consumed, quiet=True)
        elif path.is_dir():
            yield from _walk_dir(path, queue, results)
        else:
            why = "; ".join(f"{name}: {reason}" for name, reason in tried) or "no readers"
            yield _reject(lake, path, IngestError(path, f"not a recognised recording ({why})",
                                                  kind="unrecognised"), None)


def _walk_dir(folder: Path, queue: TaskQueue, results: ResultImporter | None,
              consumed: set[Path] | None = None, quiet: bool = False) -> Iterator:
    """`pipeline._ingest_dir` with each recognised entry a task."""
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
                consumed.update(Path(p) for p in queue.outcome(handle).files)
        if entry in consumed:
            continue
        handle = queue.submit(entry, reader.name)
        started.append((entry, handle))
        yield handle

    def tail() -> list[Outcome]:
        """Result files, then the skipped notes (or one `unrecognised`): after the entries."""
        for _, handle in started:
            consumed.update(Path(p) for p in queue.outcome(handle).files)
        out = list(_import_results(folder, results))
        imported = {Path(o.path) for o in out}
        left = [(e, tried) for e, tried in unrecognised if e not in consumed and e not in imported]
        if quiet:
            return out
        if not started and not imported:
            return out + [_nothing_recognised(folder, left)]
        return out + [Outcome(str(e), "skipped", f"{e.name}: skipped, not recognised "
                              f"({'; '.join(f'{n}: {r}' for n, r in tried)})") for e, tried in left]

    yield tail


def fan_out_paths(lake: Lake, paths: list[Path], options: ReadOptions = ReadOptions(), *, workers: int,
                  address: str | None = None, num_cpus: int = 1, replace: bool = False,
                  raw_codec: str = DEFAULT_RAW_CODEC, results: ResultImporter | None = None,
                  on_done: Callable[[int, int], None] | None = None) -> Iterator[Outcome]:
    """`pipeline.ingest_paths` with every recognised input a Ray task of `num_cpus` CPUs, at
    most `workers` at once; the same Outcomes in the same order. A local Ray (started here,
    shut down at the end) unless `address` names a cluster."""
    if workers < 1 or num_cpus < 1:
        raise ValueError(f"--workers {workers}: expected at least 1 Ray task at a time of at least 1 CPU")
    clean_staging(lake)
    started_ray = _ensure_ray(address, workers * num_cpus)
    try:
        queue = TaskQueue(lake, options, replace, raw_codec, workers, num_cpus, on_done)
        items = list(_walk(lake, paths, queue, results))  # every task is submitted before the first wait
        queue.report()
        for item in items:
            if isinstance(item, Outcome):
                yield item
            elif isinstance(item, int):
                yield queue.outcome(item)
            else:
                yield from item()
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
