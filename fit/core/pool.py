"""Evaluating a generation: a fan-out of fixed-size chunks of the population to Ray actors.

Each actor holds a `FitProblem` built once from the `ProblemData` put in Ray's object store
(one copy per node, read zero-copy), so per generation only the (P, N) parameter vectors travel (N = `LAYOUT.size`: FrankaTwin's 29
and whatever payload, link and friction groups the layout adds).
The population is cut into chunks of `chunk` rows (`auto_chunk`: one per worker, 4..64
rows; `chunk=None`: `auto_chunk` of each batch's own size, so a small batch, e.g. the 6 trial
steps of a Levenberg–Marquardt iteration, still spreads over all workers) handed to whichever
actor is free. Each candidate's replay is independent of the others
in its batch (the population engine is bit-identical to the one-candidate reference), so
results never depend on the chunking, the number of workers or on which of them died. An actor that dies (RayActorError) is replaced by a new one on the same data and its
chunk re-run; `replacements` counts this.

An actor may hold further data sets beside the main one (`extra={name: ProblemData}`, e.g. the
cheap-fidelity windows of the local search, fit/replay/local_search.py); `pool.view(name)` evaluates on
one of them with the same actors, so a fit starts its actors once.

`LocalPool` does the same chunking in-process without Ray (used for holdout scoring and
`--workers 0`).
"""

from __future__ import annotations

import logging
import os
from collections import deque

import numpy as np

from ..errors import FitError, SettingError
from .objective import FitProblem, ProblemData

DEFAULT_CHUNK = 16
MAX_CHUNK = 64  # beyond this the engine's per-tick numpy overhead is already amortised


def auto_chunk(population: int, workers: int) -> int:
    """Rows per chunk: one chunk per worker, between 4 and MAX_CHUNK rows. Bigger batches
    amortise the engine's per-tick overhead (64 rows run ~1.5× faster per core than 16);
    results never depend on the chunking (each candidate's replay is independent)."""
    return int(min(MAX_CHUNK, max(4, -(-population // max(workers, 1)))))


def chunk_slices(population: int, chunk: int) -> list[slice]:
    """Fixed row slices of `chunk` rows (the last may be shorter)."""
    return [slice(i, min(i + chunk, population)) for i in range(0, population, chunk)]


class PoolView:
    """A pool's actors (or in-process problems) evaluating on one of its extra data sets:
    the same `evaluate`, `residuals`, `chunk`, `workers` and `replacements`; `close` is a
    no-op (the pool owns the actors)."""

    def __init__(self, pool, name: str) -> None:
        self._pool, self._name = pool, name

    def __getattr__(self, attr: str):
        return getattr(self._pool, attr)

    def __setattr__(self, attr: str, value) -> None:
        if attr.startswith("_"):
            object.__setattr__(self, attr, value)
        else:
            setattr(self._pool, attr, value)

    def evaluate(self, params: np.ndarray) -> np.ndarray:
        return self._pool._map("evaluate", params, self._name)

    def residuals(self, params: np.ndarray, noise=None) -> np.ndarray:
        return self._pool._map("residuals", params, self._name, noise)

    def close(self) -> None:
        pass


class LocalPool:
    """In-process evaluation with the same chunking as RayPool (`chunk=None`: DEFAULT_CHUNK)."""

    def __init__(self, data: ProblemData, chunk: int | None = DEFAULT_CHUNK, nthread: int = 1,
                 extra: dict[str, ProblemData] | None = None) -> None:
        self.problem = FitProblem(data, nthread=nthread)
        self.problems = {None: self.problem, **{k: FitProblem(d, nthread=nthread) for k, d in (extra or {}).items()}}
        self.chunk = DEFAULT_CHUNK if chunk is None else int(chunk)
        self.replacements = 0
        self.workers = 0

    def evaluate(self, params: np.ndarray) -> np.ndarray:
        """(P, B) per-interval losses of a (P, N) population."""
        return self._map("evaluate", params)

    def residuals(self, params: np.ndarray, noise=None) -> np.ndarray:
        """(P, M) residuals (FitProblem.residuals) of a (P, N) population; `noise` a
        twinlake.sim ControllerNoise with one seed per row, or None."""
        return self._map("residuals", params, None, noise)

    def _map(self, method: str, params: np.ndarray, name: str | None = None, noise=None) -> np.ndarray:
        problem = self.problems[name]
        if method == "evaluate":
            return np.concatenate([problem.interval_losses(params[s]) for s in chunk_slices(len(params), self.chunk)])
        return np.concatenate([problem.residuals(params[s], None if noise is None else noise.rows(s))
                               for s in chunk_slices(len(params), self.chunk)], axis=0)

    def view(self, name: str) -> PoolView:
        """This pool evaluating on its extra data set `name`."""
        if name not in self.problems:
            raise FitError(f"pool view {name!r}: no such data set (have {[k for k in self.problems if k]})")
        return PoolView(self, name)

    def close(self) -> None:
        pass


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """`ray.init()` a local cluster (or join `address`) unless Ray is already initialised."""
    import ray

    if ray.is_initialized():
        return
    kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
                  configure_logging=True)
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)


def _actor_class():
    import ray

    @ray.remote(num_cpus=1, max_restarts=0)
    class EvalActor:
        """Holds one FitProblem (model + interval data) per data set (the main one, key None,
        and the named extras); evaluates chunks of candidates on one of them."""

        def __init__(self, data: ProblemData, nthread: int, names: tuple = (), *extra: ProblemData) -> None:
            self.problems = {None: FitProblem(data, nthread=nthread)}
            self.problems.update({k: FitProblem(d, nthread=nthread) for k, d in zip(names, extra)})

        def pid(self) -> int:
            return os.getpid()

        def evaluate(self, params: np.ndarray, name: str | None = None) -> np.ndarray:
            return self.problems[name].interval_losses(params)

        def residuals(self, params: np.ndarray, name: str | None = None, noise=None) -> np.ndarray:
            return self.problems[name].residuals(params, noise)

    return EvalActor


class RayPool:
    """`workers` Ray actors evaluating fixed chunks of each generation (`chunk=None`: one
    chunk per worker of each batch, `auto_chunk`)."""

    def __init__(self, data: ProblemData, workers: int, *, chunk: int | None = DEFAULT_CHUNK,
                 nthread: int = 1, address: str | None = None,
                 extra: dict[str, ProblemData] | None = None) -> None:
        import ray

        if workers < 1:
            raise SettingError("workers", str(workers), "expected at least 1 Ray worker")
        ensure_ray(address)
        self._ray = ray
        self._cls = _actor_class()
        self.nthread = int(nthread)
        self.chunk = None if chunk is None else int(chunk)
        self.workers = int(workers)
        self.replacements = 0
        self._data_ref = ray.put(data)
        self._extra = tuple((extra or {}).keys())
        self._extra_refs = [ray.put(d) for d in (extra or {}).values()]
        self.actors = [self._new_actor() for _ in range(self.workers)]

    def _new_actor(self):
        return self._cls.remote(self._data_ref, self.nthread, self._extra, *self._extra_refs)

    def pids(self) -> list[int]:
        """Process ids of the current actors (for tests and diagnostics)."""
        return self._ray.get([a.pid.remote() for a in self.actors])

    def evaluate(self, params: np.ndarray) -> np.ndarray:
        """(P, B) per-interval losses of a (P, N) population; dead actors are replaced and
        their chunk re-run."""
        return self._map("evaluate", params)

    def residuals(self, params: np.ndarray, noise=None) -> np.ndarray:
        """(P, M) residuals of a (P, N) population (same fan-out as `evaluate`); `noise` as
        LocalPool.residuals (sliced with the rows, so results never depend on the chunking)."""
        return self._map("residuals", params, None, noise)

    def view(self, name: str) -> PoolView:
        """The same actors evaluating on their extra data set `name`."""
        if name not in self._extra:
            raise FitError(f"pool view {name!r}: the actors hold no such data set (have {list(self._extra)})")
        return PoolView(self, name)

    def _map(self, method: str, params: np.ndarray, name: str | None = None, noise=None) -> np.ndarray:
        ray = self._ray
        params = np.ascontiguousarray(params, dtype=np.float64)
        chunk = self.chunk or auto_chunk(len(params), self.workers)
        slices = chunk_slices(len(params), chunk)
        results: list[np.ndarray | None] = [None] * len(slices)
        todo = deque(range(len(slices)))
        idle = deque(range(len(self.actors)))
        running: dict = {}
        while todo or running:
            while todo and idle:
                k, a = todo.popleft(), idle.popleft()
                extra = () if noise is None else (noise.rows(slices[k]),)
                running[getattr(self.actors[a], method).remote(params[slices[k]], name, *extra)] = (k, a)
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                k, a = running.pop(ref)
                try:
                    results[k] = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError):
                    self.replacements += 1
                    self._replace(a)
                    todo.appendleft(k)
                idle.append(a)
        return np.concatenate(results, axis=0)

    def _replace(self, a: int) -> None:
        try:
            self._ray.kill(self.actors[a])
        except Exception:  # already gone
            pass
        self.actors[a] = self._new_actor()

    def close(self) -> None:
        for actor in self.actors:
            try:
                self._ray.kill(actor)
            except Exception:
                pass
        self.actors = []
