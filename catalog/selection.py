"""Which recorded data: `[ROBOT/]RUN[:INTERVAL]` resolved against the lake's runs and clean
intervals, and the frames of a run or of one clean interval read back.

This is the one home of these rules; the fit (`twinlake.fit.core.intervals`), the replay and the
bundle export use it. Every function reads through a catalog connection (`connect`); the
intervals and frames of one run are queried over that run's files alone (`run_scope`), so
their cost does not grow with the lake.

- `parse_selector(text)`: `RUN`, `ROBOT/RUN`, `RUN:INTERVAL`, `ROBOT/RUN:INTERVAL`.
- `resolve_run(con, run, robot)`: the run's `runs` row; RUN alone must name one robot's run.
- `run_intervals(con, robot, run, min_duration_s)`: its clean intervals (`clean_intervals`).
- `pick_interval(rows, index, ...)`: the interval `index`, or the longest (most frames, ties to
  the lowest index) when `index` is None.
- `run_frames(con, robot, run, seq_first, seq_last)`: frames sorted by seq.
- `resolve_intervals(con, selectors, min_duration_s)`: selectors → `IntervalRef`s (a selector
  without INTERVAL means every clean interval of the run of at least `min_duration_s`).
- `interval_frames(lake, run, interval)`: all of it at once → `IntervalFrames`.

Bad input raises `SelectionError` (a ValueError) saying what was asked and what exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from .intervals import clean_intervals
from .lake import Lake
from .read_only import Connection
from .sql import connect, run_scope

SEQ_MIN, SEQ_MAX = -(2**63), 2**63 - 1
_FRAMES = ("SELECT * EXCLUDE (robot, run) FROM frames WHERE robot = $robot AND run = $run "
           "AND seq BETWEEN $first AND $last ORDER BY seq")
_RUN_ROWS = "SELECT * FROM runs WHERE run = $run ORDER BY robot"
_RUN_NAMES = "SELECT DISTINCT run FROM runs ORDER BY run LIMIT 7"
RUNS_HINT = "see `twinlake catalog runs`"
INTERVALS_HINT = "see `twinlake intervals`"


class SelectionError(ValueError):
    """A run or interval that is not in the lake, or a selector that is ambiguous or malformed."""


@dataclass(frozen=True)
class RunSelector:
    """A parsed `[ROBOT/]RUN[:INTERVAL]`."""

    run: str
    robot: str | None = None
    interval_index: int | None = None


@dataclass(frozen=True)
class IntervalRef:
    """One clean interval of one run: seq range inclusive, and the run's raw SHA-256."""

    robot: str
    run: str
    interval_index: int
    seq_first: int
    seq_last: int
    run_sha256: str | None = None

    @property
    def label(self) -> str:
        return f"{self.robot}/{self.run}:{self.interval_index}"


@dataclass
class IntervalFrames:
    """The frames of one clean interval and what the catalog knows about its run:
    `interval` is its clean-interval row (`INTERVAL_COLUMNS`), `frames` its frames (canonical
    columns and the sources' extras, sorted by seq), `run_row` the run's `runs` row."""

    robot: str
    run: str
    interval: dict[str, Any]
    frames: pa.Table
    run_row: dict[str, Any]


def parse_selector(text: str) -> RunSelector:
    """Parse `[ROBOT/]RUN[:INTERVAL]`; SelectionError with the expected form otherwise."""
    body, _, index = text.strip().partition(":")
    robot, _, run = body.rpartition("/")
    if not run:
        raise SelectionError(f"run selector {text!r}: expected [ROBOT/]RUN[:INTERVAL]")
    if index and not index.isdigit():
        raise SelectionError(f"run selector {text!r}: INTERVAL must be a whole number, got {index!r}")
    return RunSelector(run=run, robot=robot or None, interval_index=int(index) if index else None)


def resolve_run(con: Connection, run: str, robot: str | None = None) -> dict[str, Any]:
    """The `runs` row (a dict with `robot`, `run`, `raw_sha256`, ...) of `run`, which may be
    written `ROBOT/RUN`. SelectionError when no such run exists (naming some that do) or,
    without a robot, when several robots have a run of that name."""
    if "/" in run:
        named, _, run = run.rpartition("/")
        if robot is not None and robot != named:
            raise SelectionError(f"run {named + '/' + run!r}: names robot {named!r}, but robot "
                                 f"{robot!r} was asked for")
        robot = named
    rows = con.sql(_RUN_ROWS, params={"run": run}).to_arrow_table().to_pylist()
    if robot is not None:
        rows = [r for r in rows if r["robot"] == robot]
    if not rows:
        known = [r[0] for r in con.sql(_RUN_NAMES).fetchall()]
        hint = f"runs: {', '.join(known[:6])}{', ...' if len(known) > 6 else ''}; " if known else ""
        whose = f" for robot {robot!r}" if robot is not None else ""
        raise SelectionError(f"no run {run!r}{whose} in the lake ({hint}{RUNS_HINT})")
    if len(rows) > 1:
        robots = [r["robot"] for r in rows]
        raise SelectionError(f"run {run!r}: several robots have it ({robots}); write ROBOT/RUN")
    return rows[0]


def run_intervals(con: Connection, robot: str, run: str, min_duration_s: float = 0.0) -> list[dict[str, Any]]:
    """The clean intervals of one run (`clean_intervals` rows, by seq), at least
    `min_duration_s` [s] long."""
    return clean_intervals(con, robot=robot, run=run, min_duration_s=min_duration_s).to_pylist()


def pick_interval(rows: list[dict[str, Any]], index: int | None, robot: str, run: str,
                  min_duration_s: float = 0.0) -> dict[str, Any]:
    """The row of clean interval `index` among `rows` (from `run_intervals`), or with `index`
    None the longest one (most frames; ties to the lowest index). SelectionError naming the
    run's intervals when there is none to pick."""
    at_least = f" of at least {min_duration_s:g} s" if min_duration_s > 0 else ""
    if not rows:
        raise SelectionError(f"{robot}/{run}: run has no clean interval{at_least} ({INTERVALS_HINT})")
    if index is None:
        return max(rows, key=lambda r: (r["frame_count"], -r["interval_index"]))
    hits = [r for r in rows if int(r["interval_index"]) == index]
    if not hits:
        have = ", ".join(str(int(r["interval_index"])) for r in rows)
        raise SelectionError(f"{robot}/{run}: run has no clean interval {index}{at_least} "
                             f"(its clean intervals{at_least}: {have}; {INTERVALS_HINT})")
    return hits[0]


def run_frames(con: Connection, robot: str, run: str, seq_first: int | None = None,
               seq_last: int | None = None) -> pa.Table:
    """The frames of one run (canonical columns and the sources' extras, without the
    partition columns), sorted by seq; with `seq_first` / `seq_last` only that inclusive
    seq range. An empty table when nothing is there (the caller says why that is wrong).
    Only the run's own files are bound and read (`run_scope`): canonical columns the run's
    file lacks come back as nulls; extra columns of other runs do not appear."""
    params = {"robot": robot, "run": run,
              "first": SEQ_MIN if seq_first is None else int(seq_first),
              "last": SEQ_MAX if seq_last is None else int(seq_last)}
    with run_scope(con, robot, run):  # bind and read this run's files only
        return con.sql(_FRAMES, params=params).to_arrow_table()


def resolve_intervals(con: Connection, selectors: Iterable[str], *, min_duration_s: float = 0.0) -> list[IntervalRef]:
    """The clean intervals named by `selectors`, in the given order (duplicates removed): a
    selector with INTERVAL names that interval, one without every clean interval of the run;
    either way only intervals of at least `min_duration_s` [s]."""
    out: list[IntervalRef] = []
    for text in selectors:
        sel = parse_selector(text)
        try:
            row = resolve_run(con, sel.run, sel.robot)
            rows = run_intervals(con, row["robot"], sel.run, min_duration_s)
            if sel.interval_index is not None or not rows:
                rows = [pick_interval(rows, sel.interval_index, row["robot"], sel.run, min_duration_s)]
        except SelectionError as exc:
            raise SelectionError(f"run selector {text!r}: {exc}") from None
        for r in rows:
            ref = IntervalRef(row["robot"], sel.run, int(r["interval_index"]), int(r["seq_first"]),
                              int(r["seq_last"]), row.get("raw_sha256"))
            if ref not in out:
                out.append(ref)
    return out


def interval_frames(lake: Lake | str | Path, run: str, interval: int | None = None, *,
                    robot: str | None = None, min_duration_s: float = 0.0) -> IntervalFrames:
    """Resolve `[ROBOT/]RUN`, pick clean interval `interval` (None: the longest, ties to the
    lowest index) of at least `min_duration_s` [s], read its frames, on one read-only
    catalog connection. SelectionError when the run or the interval is not there."""
    con = connect(lake)
    try:
        row = resolve_run(con, run, robot)
        name, who = row["run"], row["robot"]
        chosen = pick_interval(run_intervals(con, who, name, min_duration_s), interval, who, name,
                               min_duration_s)
        frames = run_frames(con, who, name, chosen["seq_first"], chosen["seq_last"])
    finally:
        con.close()
    return IntervalFrames(who, name, chosen, frames, row)


__all__ = ["IntervalFrames", "IntervalRef", "RunSelector", "SelectionError", "interval_frames",
           "parse_selector", "pick_interval", "resolve_intervals", "resolve_run", "run_frames",
           "run_intervals"]
