"""Stored intervals: the file format of a run partition's `intervals.parquet` (its clean
intervals under the default rules, written once at publish and read back instead of planning
the rules' query for every request). What goes in it and when it is served is decided by
catalog/intervals.py (`store_run_intervals`, `stored_run_intervals`), the owner of the rules;
this module only keys, writes and checks the file and knows no rule.

The file holds the result rows and, in its Parquet key-value metadata (`STORE_KEY`), the key
it is valid for:

    {"format": 1, "rules": "<the rules' version: a hash of their SQL and defaults>",
     "robot": ..., "run": ..., "frames.parquet": [size_bytes, mtime_ns],
     "run.parquet": [size_bytes, mtime_ns]}

`read_stored_intervals` returns the rows only while every part of the key holds now: same
rules, same ids (not a renamed partition), same size and modification time of both files
(not a file rewritten in place); else None (also for no file, an unreadable one). The rows
are deterministic; the key (modification times) is not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .lake import INTERVALS_FILE

STORE_FORMAT = 1
STORE_KEY = b"twinlake.intervals"
"""Parquet key-value metadata key of the validity key (JSON, see the module docstring)."""
SOURCES = ("frames.parquet", "run.parquet")
"""The run files the stored rows derive from, in the order `compute` receives them."""


def file_key(directory: str | Path, robot: str, run: str, rules: str) -> dict | None:
    """The validity key of run partition `directory`'s two files as they are now, under the
    rules version `rules`; None if one is missing."""
    key: dict = {"format": STORE_FORMAT, "rules": rules, "robot": robot, "run": run}
    for name in SOURCES:
        try:
            st = os.stat(os.path.join(directory, name))
        except OSError:
            return None
        key[name] = [st.st_size, st.st_mtime_ns]
    return key


def read_stored_intervals(directory: str | Path, robot: str, run: str, rules: str) -> pa.Table | None:
    """The rows stored in run partition `directory` of `robot`/`run`, when its
    intervals.parquet exists and its key matches the files now under rules version `rules`;
    else None."""
    try:
        stored = pq.ParquetFile(os.path.join(directory, INTERVALS_FILE))
        raw = (stored.schema_arrow.metadata or {}).get(STORE_KEY)
        if raw is None or json.loads(raw) != file_key(directory, robot, run, rules):
            return None
        return stored.read().replace_schema_metadata(None)
    except (OSError, ValueError, pa.ArrowException):  # absent, unreadable or not JSON
        return None


def read_committed_intervals(filesystem, directory: str, robot: str, run: str, rules: str,
                             sizes: dict[str, int]) -> pa.Table | None:
    """The rows stored in a committed partition on object storage (`directory`: its path on
    `filesystem`), when its key matches the rules, the ids, and the sizes the commit lists for
    the two files (`sizes`). Modification times are not compared: the objects of a commit sit
    under a prefix of their own that nothing rewrites, and the commit names them, so the
    key's times (of the staged local files) identify nothing there. Else None."""
    try:
        stored = pq.ParquetFile(filesystem.open_input_file(f"{directory}/{INTERVALS_FILE}"))
        raw = (stored.schema_arrow.metadata or {}).get(STORE_KEY)
        if raw is None:
            return None
        key = json.loads(raw)
        want = {"format": STORE_FORMAT, "rules": rules, "robot": robot, "run": run}
        if any(key.get(k) != v for k, v in want.items()) or \
                any((key.get(name) or [None])[0] != sizes.get(name) for name in SOURCES):
            return None
        return stored.read().replace_schema_metadata(None)
    except (OSError, ValueError, pa.ArrowException):
        return None


def write_stored_intervals(directory: str | Path, robot: str, run: str, rules: str,
                           compute: Callable[[str, str], pa.Table | None]) -> Path | None:
    """Write `compute(frames_path, runs_path)` with its key to `directory/intervals.parquet`
    (a staged partition, before its fsync and publish). Any older intervals.parquet there is
    removed first; None (nothing written) when a file is missing or `compute` gives None."""
    target = Path(directory) / INTERVALS_FILE
    target.unlink(missing_ok=True)
    key = file_key(directory, robot, run, rules)
    if key is None:
        return None
    table = compute(*(str(Path(directory) / name) for name in SOURCES))
    if table is None:
        return None
    metadata = {STORE_KEY: json.dumps(key, sort_keys=True).encode()}
    pq.write_table(table.replace_schema_metadata(metadata), target)
    return target


__all__ = ["INTERVALS_FILE", "SOURCES", "STORE_KEY", "file_key", "read_committed_intervals",
           "read_stored_intervals", "write_stored_intervals"]
