"""A stream's decoded columns kept in files while the bag is read, read back by row range.

Which time a run uses (header stamps or receive times), its origin and its seq source are
known only once every message of its primary stream is seen, so the bag is read once, each
batch's columns appended here, and the run is then built a chunk of messages at a time
from these files (`arm_run`): an ingest holds the streams' stamps, seqs and receive times
(24 bytes a message) and a chunk, not the bag's decoded values. The files are raw
little-endian arrays, one per column, in a temporary directory (`tempfile`, so `TMPDIR`)
removed when the reading is done or abandoned.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

SEP = "\x1f"  # joins an arm key and a column name in a flattened key (neither holds it)


@dataclass
class _Column:
    path: Path
    dtype: np.dtype
    shape: tuple[int, ...]  # of one row
    fh: BinaryIO | None

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))


class Spill:
    """The columns of one stream, appended a batch at a time (a dict of arrays with `n` rows
    each, nested at most one level: a JointState stream's arm key → columns) and read back
    as the same dict for rows [lo, hi)."""

    def __init__(self, directory: Path, name: str) -> None:
        self._dir, self._name = directory, name
        self._columns: dict[str, _Column] = {}
        self._nested = False
        self.rows_written = 0

    def append(self, columns: dict[str, Any]) -> None:
        flat = _flatten(columns)
        if not self._columns:
            self._nested = any(isinstance(v, dict) for v in columns.values())
            for k, (key, value) in enumerate(flat.items()):
                path = self._dir / f"{self._name}-{k}.bin"
                self._columns[key] = _Column(path, value.dtype, value.shape[1:], path.open("wb"))
        n = None
        for key, value in flat.items():
            column = self._columns[key]
            if value.dtype != column.dtype or value.shape[1:] != column.shape:
                raise ValueError(f"spilled column {key!r} changed from {column.dtype}"
                                 f"{column.shape} to {value.dtype}{value.shape[1:]}")
            n = value.shape[0] if n is None else n
            column.fh.write(np.ascontiguousarray(value).tobytes())
        self.rows_written += n or 0

    def finish(self) -> None:
        """Close the files (every batch appended): they can be read."""
        for column in self._columns.values():
            if column.fh is not None:
                column.fh.close()
                column.fh = None

    def rows(self, lo: int, hi: int) -> dict[str, Any]:
        """The appended columns' rows [lo, hi), as the dict that was appended."""
        flat = {}
        for key, c in self._columns.items():
            count = max(hi - lo, 0)
            values = np.fromfile(c.path, dtype=c.dtype, count=count * c.row_bytes // c.dtype.itemsize,
                                 offset=lo * c.row_bytes)
            flat[key] = values.reshape((count, *c.shape))
        return _unflatten(flat) if self._nested else flat


class SpillDir:
    """The temporary directory of one bag reading's spills; `cleanup` removes it (also done
    when the object is collected), `release` once the last of its `users` readers is done."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="twinlake-bag-")
        self.path = Path(self._tmp.name)
        self.users = 1

    def spill(self, name: str) -> Spill:
        return Spill(self.path, name)

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            self.cleanup()

    def cleanup(self) -> None:
        self._tmp.cleanup()


def _flatten(columns: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for key, value in columns.items():
        if isinstance(value, dict):
            out |= {f"{key}{SEP}{k}": np.asarray(v) for k, v in value.items()}
        else:
            out[key] = np.asarray(value)
    return out


def _unflatten(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        outer, inner = key.split(SEP, 1)
        out.setdefault(outer, {})[inner] = value
    return out
