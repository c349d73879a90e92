"""Which recorded data a fit sees: `RUN[:INTERVAL]` selectors resolved against the lake's
clean intervals, and the frames of each interval read back for replay.

Selector syntax (`--train`, `--holdout`): `RUN`, `ROBOT/RUN`, `RUN:INTERVAL` or
`ROBOT/RUN:INTERVAL`, where INTERVAL is the `interval_index` of the clean-interval query
(`twinlake intervals`); without it every clean interval of the run of at least
`min_duration_s` is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from twinlake.catalog import Lake, connect


@dataclass(frozen=True)
class IntervalRef:
    """One clean interval of one run: seq range inclusive."""

    robot: str
    run: str
    interval_index: int
    seq_first: int
    seq_last: int
    run_sha256: str | None = None

    @property
    def label(self) -> str:
        return f"{self.robot}/{self.run}:{self.interval_index}"


@dataclass(frozen=True)
class Selector:
    """A parsed `[ROBOT/]RUN[:INTERVAL]`."""

    run: str
    robot: str | None = None
    interval_index: int | None = None


def parse_selector(text: str) -> Selector:
    """Parse `[ROBOT/]RUN[:INTERVAL]`; ValueError with the expected form otherwise."""
    body, _, index = text.strip().partition(":")
    robot, _, run = body.rpartition("/")
    if not run:
        raise ValueError(f"run selector {text!r}: expected [ROBOT/]RUN[:INTERVAL]")
    if index and not index.isdigit():
        raise ValueError(f"run selector {text!r}: INTERVAL must be a whole number, got {index!r}")
    return Selector(run=run, robot=robot or None, interval_index=int(index) if index else None)


def _clean_intervals(con: duckdb.DuckDBPyConnection, robot: str, run: str, min_duration_s: float) -> list[dict]:
    from twinlake.catalog.intervals import clean_intervals

    table = clean_intervals(con, robot=robot, run=run, min_duration_s=min_duration_s)
    if hasattr(table, "to_pylist"):
        return table.to_pylist()
    if hasattr(table, "fetch_arrow_table"):
        return table.fetch_arrow_table().to_pylist()
    return [dict(r) for r in table]


def _robot_of(con: duckdb.DuckDBPyConnection, sel: Selector) -> tuple[str, str | None]:
    rows = con.execute("SELECT robot, raw_sha256 FROM runs WHERE run = ?", [sel.run]).fetchall()
    if sel.robot is not None:
        rows = [r for r in rows if r[0] == sel.robot]
    if not rows:
        where = f"robot {sel.robot!r}, " if sel.robot else ""
        raise ValueError(f"run selector: no run {sel.run!r} ({where}see `twinlake catalog runs`)")
    if len(rows) > 1:
        raise ValueError(f"run selector {sel.run!r}: several robots have it ({sorted(r[0] for r in rows)}); write ROBOT/RUN")
    return rows[0][0], rows[0][1]


def resolve(
    lake: Lake | str | Path, selectors: list[str], *, min_duration_s: float = 0.5
) -> list[IntervalRef]:
    """The clean intervals named by `selectors`, in the given order (duplicates removed)."""
    con = connect(lake)
    try:
        out: list[IntervalRef] = []
        for text in selectors:
            sel = parse_selector(text)
            robot, sha = _robot_of(con, sel)
            rows = _clean_intervals(con, robot, sel.run, min_duration_s)
            if sel.interval_index is not None:
                rows = [r for r in rows if int(r["interval_index"]) == sel.interval_index]
                if not rows:
                    raise ValueError(
                        f"run selector {text!r}: run has no clean interval {sel.interval_index} "
                        f"of at least {min_duration_s} s (see `twinlake intervals`)"
                    )
            if not rows:
                raise ValueError(f"run selector {text!r}: run has no clean interval of at least {min_duration_s} s")
            for r in rows:
                ref = IntervalRef(robot, sel.run, int(r["interval_index"]), int(r["seq_first"]), int(r["seq_last"]), sha)
                if ref not in out:
                    out.append(ref)
        return out
    finally:
        con.close()


def read_frames(lake: Lake | str | Path, refs: list[IntervalRef], max_duration_s: float | None = None) -> list[pa.Table]:
    """The frames (canonical columns, sorted by seq) of each interval; with `max_duration_s`
    only the first that many seconds at 1 kHz (seq_first + round(1000·s))."""
    con = connect(lake)
    try:
        tables = []
        for ref in refs:
            last = ref.seq_last
            if max_duration_s is not None:
                last = min(last, ref.seq_first + int(round(max_duration_s * 1000.0)))
            table = con.sql(
                "SELECT * EXCLUDE (robot, run) FROM frames WHERE robot = $robot AND run = $run "
                "AND seq BETWEEN $first AND $last ORDER BY seq",
                params={"robot": ref.robot, "run": ref.run, "first": ref.seq_first, "last": last},
            ).to_arrow_table()
            if table.num_rows == 0:
                raise ValueError(f"interval {ref.label}: no frames in seq {ref.seq_first}..{last}")
            tables.append(table)
        return tables
    finally:
        con.close()


def replay_inputs(refs: list[IntervalRef], tables: list[pa.Table], *, use_ema: bool = True) -> list:
    """One `twinlake.sim.ReplayInput` per interval (its frames from `read_frames`); an
    interval that cannot be replayed is named in the ValueError."""
    from twinlake.sim import ReplayInput

    inputs = []
    for ref, table in zip(refs, tables):
        try:
            inputs.append(ReplayInput.from_frames(table, use_ema=use_ema))
        except ValueError as exc:
            raise ValueError(f"interval {ref.label}: {exc}") from None
    return inputs
