"""`twinlake ingest` publishes each run with its stored intervals (`intervals.parquet`,
catalog/intervals.py): the rows the rules' query gives for the ingested files, stale
rows, seq gaps and a reset included; `--replace` publishes the new run's own, and the same
bytes again leave the run as it was."""

from __future__ import annotations

from twinlake.catalog import connect
from twinlake.catalog.intervals import DEFAULT_RULES, _query, run_query_params, stored_run_intervals
from twinlake.catalog.lake import INTERVALS_FILE


def _make_stale(path, row: int) -> None:
    """Data row `row` repeats the row before in q, dq and tau_J (CSV v2 fields 2..22): what a
    logger that re-sends its last sample writes; ingest flags it `stale`."""
    lines = path.read_bytes().split(b"\n")
    before, this = lines[row].split(b","), lines[row + 1].split(b",")
    lines[row + 1] = b",".join(this[:2] + before[2:23] + this[23:])
    path.write_bytes(b"\n".join(lines))


def _served_and_queried(lake, run: str):
    con = connect(lake.root)
    served = stored_run_intervals(con, "r", run, DEFAULT_RULES)
    return served, _query(con, "r", run, run_query_params("r", run, DEFAULT_RULES))


def test_ingest_stores_the_querys_intervals_and_replace_follows(ingest, make_csv, lake):
    first = make_csv("run.csv", rows=600, gap_at=(200,), idle_rows=50)
    _make_stale(first, 400)
    assert ingest(first, "--robot", "r").exit_code == 0
    served, queried = _served_and_queried(lake, "run")
    assert served is not None and served.equals(queried)
    reasons = [(r["start_reason"], r["end_reason"]) for r in served.to_pylist()]
    assert reasons == [("run_start", "mode_change"), ("mode_change", "seq_gap"),
                       ("seq_gap", "stale"), ("stale", "run_end")]
    stored_file = lake.run_dir("r", "run") / INTERVALS_FILE
    stamp = stored_file.stat().st_mtime_ns

    assert ingest(first, "--robot", "r").exit_code == 0  # the same bytes: nothing rewritten
    assert stored_file.stat().st_mtime_ns == stamp

    second = make_csv("run.csv", rows=500, gap_at=(100, 300))
    assert ingest(second, "--robot", "r", "--replace").exit_code == 0
    served, queried = _served_and_queried(lake, "run")
    assert served is not None and served.equals(queried)
    assert [r["frame_count"] for r in served.to_pylist()] == [101, 200, 199]
