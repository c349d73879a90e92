"""The decimal CSV reader's C kernels (`decimal_kernel.c`), compiled once per machine and
loaded with ctypes.

A fresh process that parses with numba's kernels pays numba's import and the load of its
cached kernels (~0.5 s of CPU) before the first byte; the same kernels in C cost a `dlopen`
(about a millisecond), and ctypes releases the GIL around each call, so the reader's spans
still parse on parallel threads. `load()` returns them, building the shared library first
when this machine has none for this source yet: the system C compiler (`$CC`, else `cc`)
writes it to a temporary file in the cache directory, which is then renamed into place
(a concurrent process sees the whole library or none). The library's name holds the
SHA-256 of the source and the flags, so an edited kernel is a new library.

`load()` returns None, and the reader uses numba's kernels (`decimal_numba`, the same results
bit for bit), when there is no compiler, the build or the load fails, or
`TWINLAKE_NATIVE_KERNEL=0`. Where it goes: `$TWINLAKE_CACHE_DIR`, else
`$XDG_CACHE_HOME/twinlake`, else `~/.cache/twinlake`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("decimal_kernel.c")
CFLAGS = ("-std=c99", "-O2", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off")
"""No fast-math and no fused multiply-add: each value is one IEEE operation, as in numba."""
SWITCH = "TWINLAKE_NATIVE_KERNEL"
BUILD_TIMEOUT_S = 120


def cache_dir() -> Path:
    """Where the built library is kept (module docstring)."""
    if os.environ.get("TWINLAKE_CACHE_DIR"):
        return Path(os.environ["TWINLAKE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "twinlake"


def library_path() -> Path:
    """The library of this source and these flags on this machine's architecture."""
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(CFLAGS).encode()
                         + platform.machine().encode()).hexdigest()[:16]
    return cache_dir() / f"decimal_kernel-{key}.so"


def build(path: Path) -> bool:
    """Compile SOURCE into `path` (atomically); False when no compiler or the build fails."""
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        done = subprocess.run([compiler, *CFLAGS, "-o", str(tmp), str(SOURCE), "-lm"],
                              capture_output=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            return False
        os.replace(tmp, path)
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        tmp.unlink(missing_ok=True)


def is_built() -> bool:
    """True when this machine has the library of this source already (and it is not
    switched off): using it costs a dlopen."""
    try:
        return os.environ.get(SWITCH) != "0" and library_path().is_file()
    except (OSError, RuntimeError):  # no source shipped, no home directory
        return False


class NativeKernel:
    """The two kernels of a loaded library, with the numba kernels' call signatures."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self._count = lib.tl_count_newlines
        self._count.argtypes, self._count.restype = [ptr, i64, i64], i64
        self._parse = lib.tl_parse_rows
        self._parse.argtypes = [ptr, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64, i64, ptr]
        self._parse.restype = i64

    def count_newlines(self, data: np.ndarray, start: int, stop: int) -> int:
        """Number of `\\n` bytes in data[start:stop]."""
        return self._count(data.ctypes.data, start, stop)

    def parse_rows(self, data: np.ndarray, start: int, rows: int, first_row: int,
                   is_int: np.ndarray, floats: np.ndarray, ints: np.ndarray,
                   pow10: np.ndarray) -> int:
        """Rows first_row .. first_row + rows of `floats` [k-th float column, row] and `ints`
        (C-ordered, one row per column) from the first `rows` lines of data[start:]; the
        number of rows parsed (== rows when every cell is in the grammar)."""
        flags = np.ascontiguousarray(is_int, dtype=np.uint8)
        powers = np.ascontiguousarray(pow10, np.float64)  # alive until the call returns
        assert floats.flags.c_contiguous and ints.flags.c_contiguous and powers.size == 23
        assert floats.shape[1] == ints.shape[1] and floats.dtype == np.float64 \
            and ints.dtype == np.int64 and first_row + rows <= floats.shape[1]
        parsed = self._parse(data.ctypes.data, start, rows, first_row, flags.ctypes.data,
                             flags.size, floats.ctypes.data, floats.shape[0],
                             ints.ctypes.data, ints.shape[0], floats.shape[1],
                             powers.ctypes.data)
        if parsed < 0:
            raise MemoryError("decimal_kernel: no memory for a block of rows")
        return parsed


@lru_cache(maxsize=1)
def load() -> NativeKernel | None:
    """The C kernels, built first if needed; None when unavailable (module docstring)."""
    if os.environ.get(SWITCH) == "0":
        return None
    try:
        path = library_path()
        if not path.is_file() and not build(path):
            return None
        return NativeKernel(ctypes.CDLL(str(path)))
    except (OSError, RuntimeError, AttributeError):  # no source, no home, a broken library
        return None
