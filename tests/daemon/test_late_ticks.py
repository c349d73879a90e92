"""Late but complete ticks: a CSV v2 recording (the offline recorder's, through `twinlake
ingest`) in which ticks came 2-10 ms late, with seq continuous (no frame lost). By default the
interval rules split at each (`period_outlier`, never `time_gap`: seq is the recorder's own
tick count) and `twinlake intervals` says why it finds no long interval; with the documented
option, `--no-split period_outlier`, the whole run is one interval (docs/intervals.md)."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.daemon import csv_v2 as C
from twinlake.daemon.offline import record_offline

LATE_MS = (2.0, 4.0, 6.5, 10.0)
EVERY = 400  # a late tick every 0.4 s: no default interval reaches 2 s


def _recording(tmp_path):
    prev = tmp_path / "prev"
    res = CliRunner().invoke(app, ["excite", "--mode", "multisine", "--joints", "1,2,3,4,5,6,7", "--seconds", "4",
                                   "--ramp", "1", "--hold", "0.5", "--output", str(prev)])
    assert res.exit_code == 0, res.output
    csv = tmp_path / "late.csv"
    record_offline(prev / "reference.csv", csv, seed=5, tail_s=0.3, robot_id="sim")
    return csv


def _inject_late_ticks(csv) -> int:
    """Make every EVERY-th tick come LATE_MS late (t_s and control_period_s), seq and the robot
    clock unchanged; returns how many."""
    with open(csv) as fh:
        header = fh.readline()
    rows = np.loadtxt(csv, delimiter=",", skiprows=1)
    late = np.arange(EVERY, rows.shape[0], EVERY)
    for k, at in enumerate(late):
        period = LATE_MS[k % len(LATE_MS)] * 1e-3
        rows[at, C.CONTROL_PERIOD_S.start] = period
        rows[at:, C.T_S.start] += period - 1e-3
    with open(csv, "wb") as fh:
        fh.write(header.encode() + C.format_rows_bytes(rows))
    assert np.array_equal(rows[:, 0], np.arange(rows.shape[0]))  # seq continuous: nothing lost
    return late.size


def _intervals(lake, *args):
    res = CliRunner().invoke(app, ["intervals", "--lake", str(lake), *args])
    assert res.exit_code == 0, res.output
    return res


def test_late_but_complete_ticks_split_by_default_and_join_with_the_documented_option(tmp_path):
    csv = _recording(tmp_path)
    injected = _inject_late_ticks(csv)
    lake = tmp_path / "lake"
    res = CliRunner().invoke(app, ["ingest", str(csv), "--robot", "sim", "--lake", str(lake)])
    assert res.exit_code == 0, res.output

    rows = json.loads(_intervals(lake, "--json").stdout)
    ends = [r["end_reason"] for r in rows]
    assert ends.count("period_outlier") == injected and set(ends) == {"period_outlier", "run_end"}, ends
    assert max(r["duration_s"] for r in rows) < 2.0
    none = _intervals(lake, "--min-duration-s", "2")
    assert (f"no interval of at least 2 s: {injected + 1} shorter ones, the longest "
            f"{max(r['duration_s'] for r in rows):.3f} s; the rule that split most: period_outlier "
            f"({injected} of {injected} splits)") in none.stdout, none.stdout
    assert "--no-split period_outlier" in none.stdout

    joined = json.loads(_intervals(lake, "--json", "--no-split", "period_outlier", "--min-duration-s", "2").stdout)
    assert len(joined) == 1 and joined[0]["seq_first"] == 0 and joined[0]["seq_last"] == rows[-1]["seq_last"]
    assert joined[0]["duration_s"] >= 2.0 and joined[0]["end_reason"] == "run_end"
