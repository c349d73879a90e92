"""A fresh command process's start-up: the optional modules a command's path never uses,
reported absent while it runs, so it does not pay their import.

Some libraries import an optional dependency as soon as it is installed, whether the caller
needs it or not: pandera imports pandas (its pandas API) and hypothesis (its data
synthesis) even for its polars backend; pyarrow imports pandas on its first `pa.array` call
(to recognise pandas objects); numba's first compiled call probes scipy's BLAS
(numba/np/linalg.py `ensure_blas`), importing scipy.linalg. All of them handle the module
being absent. `absent()` reports them absent (ModuleNotFoundError, as for a package that is not
installed) for the duration of a `with` block, and only when nothing imported them yet:

- `pandas`, `hypothesis`: any import of them (nothing in twinlake's product code uses them);
- `scipy.linalg`: only numba's BLAS probe (the fit's scipy imports work as usual).

For a command's own process only (`twinlake ingest`): the libraries remember the absence for
the rest of the process (pyarrow then does not recognise pandas objects, numba compiles no
BLAS-backed function), which a library call inside a user's program must not impose.

`main` (the `twinlake` command, `python -m twinlake`) also sets `PROCESS_ENVIRONMENT` (and its
command's `COMMAND_ENVIRONMENT`) before anything imports pyarrow or numpy, which read it once, at
import; a local Ray the command starts gives it to its workers. A command of
`EXIT_WITHOUT_TEARDOWN` ends its process without the interpreter's teardown once it has
returned (`exit_now`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.abc import MetaPathFinder

PROCESS_ENVIRONMENT = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
"""Environment a command process sets for itself unless the user set it already. Arrow's
default pool (mimalloc) asks for transparent huge pages, which a kernel with `defrag = madvise`
serves with direct compaction and a zeroed 2 MiB page per fault: an ingest, which touches each
chunk's buffers once, paid 0.3-0.6 s of system time of ~3 s and ~80 MB of peak RSS for it on
the 600 000-row bench file (bench/RESULTS.md, "Ingest: the allocators, overlap and start-up").
The system allocator has no such cost."""
COMMAND_ENVIRONMENT = {"ingest": {"OPENBLAS_NUM_THREADS": "1"}}
"""Environment of one command's process, beside `PROCESS_ENVIRONMENT` (the user's setting wins).
numpy's OpenBLAS starts one thread per core at import; an ingest makes no BLAS call, yet those
threads spun for ~0.1 CPU s of a 600 000-row ingest's ~4.2 (perf: `blas_thread_server`), on a
two-core machine time taken from the parse. A fit keeps OpenBLAS's default."""
UNUSED = ("pandas", "hypothesis")
EXIT_WITHOUT_TEARDOWN = ("ingest",)
"""Commands whose process ends by `os._exit` once the command has returned (`exit_now`): by then
an ingest has fsynced and published every run, joined its threads and printed its outcomes, and
the interpreter's teardown (freeing pyarrow's, numpy's and DuckDB's modules, a last garbage
collection) only costs time: ~0.1 s of a fresh 600 000-row ingest's ~2.4 s (bench/RESULTS.md,
"Ingest: the command's start-up and exit"). Not after a command that started Ray: Ray's
exit handler stops the local cluster it started."""
BLAS_PROBE = "ensure_blas"  # numba/np/linalg.py: imports scipy.linalg.cython_blas


class _Absent(MetaPathFinder):
    def __init__(self, names: set[str], hide_blas: bool) -> None:
        self.names, self.hide_blas = names, hide_blas

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names or (
                self.hide_blas and fullname.startswith("scipy.linalg") and _from_blas_probe()):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _from_blas_probe() -> bool:
    frame = sys._getframe(2)
    for _ in range(40):
        if frame is None:
            return False
        if frame.f_code.co_name == BLAS_PROBE and "numba" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


@contextmanager
def absent() -> Iterator[None]:
    """Within the block, `UNUSED` modules not imported yet and numba's scipy BLAS probe see
    ModuleNotFoundError (module docstring)."""
    names = {n for n in UNUSED if n not in sys.modules}
    finder = _Absent(names, hide_blas="scipy.linalg" not in sys.modules)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def use_process_environment(command: str | None = None) -> None:
    """`PROCESS_ENVIRONMENT` and `command`'s `COMMAND_ENVIRONMENT` into this process's
    environment, where the user set nothing; before pyarrow and numpy are imported (children
    started later, a local Ray's workers, inherit it)."""
    for name, value in {**PROCESS_ENVIRONMENT, **COMMAND_ENVIRONMENT.get(command or "", {})}.items():
        os.environ.setdefault(name, value)


def main() -> None:
    """The `twinlake` command: `use_process_environment` first, then the app (twinlake/cli.py);
    a command of `EXIT_WITHOUT_TEARDOWN` then ends by `exit_now`."""
    command = sys.argv[1] if len(sys.argv) > 1 else None
    use_process_environment(command)
    from .cli import main as run_app

    if command not in EXIT_WITHOUT_TEARDOWN:
        run_app()
        return
    try:
        run_app()
    except SystemExit as done:
        exit_now(done.code)
    exit_now(0)


def exit_now(code: int | str | None) -> None:
    """End the process with `code` as `SystemExit(code)` would (None: 0; a text: printed to
    stderr, 1), after flushing stdout and stderr and logging's handlers, but without the
    interpreter's teardown (`EXIT_WITHOUT_TEARDOWN`). If Ray was imported, the ordinary exit
    instead (Ray's exit handler stops the local cluster the command started)."""
    if "ray" in sys.modules:
        raise SystemExit(code)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    status = 0 if code is None else code if isinstance(code, int) else 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away: the exit code still says it all
            pass
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    os._exit(status)
