"""Times that repeat or step back, and late ticks of a recorder that counts its ticks, through
the real ingest paths (a mapped CSV log, a rosbag2 bag by rosbags' writer, a CSV v2 by the
offline recorder) and `twinlake intervals` (docs/intervals.md, "Time rules")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))  # the bag writers
from bag_writers import JOINT_STATE, T0_NS, Topic, joint_states, motion, store, write_ros2  # noqa: E402

from twinlake.cli import app  # noqa: E402

MS = 1_000_000
FR3 = [f"fr3_joint{j}" for j in range(1, 8)]
MAPPING = """\
[time]
column = "time_ms"
unit = "ms"

[columns]
q = "q[{i}]"
dq = "dq[{i}]"
tau_measured = "tau_J[{i}]"
"""


def _ingest(lake: Path, *args: str) -> list[dict]:
    res = CliRunner().invoke(app, ["ingest", *args, "--lake", str(lake), "--json"])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def _intervals(lake: Path, *args: str) -> list[dict]:
    res = CliRunner().invoke(app, ["intervals", "--lake", str(lake), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _run_row(lake: Path, robot: str, run: str) -> dict:
    return pq.read_table(lake / "runs" / f"robot={robot}" / f"run={run}" / "run.parquet").to_pylist()[0]


def _mapped_log(path: Path, t_ms: np.ndarray) -> Path:
    m = motion(t_ms.size, 0.001)
    cols = {"time_ms": t_ms}
    for name, key in (("q", "q"), ("dq", "dq"), ("tau_J", "tau")):
        for j in range(7):
            cols[f"{name}[{j}]"] = m[key][:, j]
    header = ",".join(cols)
    rows = np.column_stack(list(cols.values()))
    np.savetxt(path, rows, delimiter=",", header=header, comments="", fmt="%.9g")
    return path


def test_repeated_and_backward_times_in_a_mapped_log_are_no_lost_ticks(tmp_path):
    t = np.arange(400, dtype=np.float64)  # ms
    t[100] = t[99]  # a repeated time
    t[200] = t[199] - 0.6  # a row stepping back
    log = _mapped_log(tmp_path / "pc.csv", t)
    (tmp_path / "map.toml").write_text(MAPPING)
    _ingest(tmp_path / "lake", str(log), "--mapping", str(tmp_path / "map.toml"), "--robot", "pc")
    row = _run_row(tmp_path / "lake", "pc", "pc")
    assert row["dropped"] == 0 and "seq_gaps" not in row["flags"], row["flags"]
    assert any("repeats the previous row's time at 1 row (first row 100)" in r and "steps back at 1 row "
               "(first row 200)" in r for r in row["reasons"]), row["reasons"]
    rows = _intervals(tmp_path / "lake")
    assert [(r["seq_first"], r["end_reason"]) for r in rows] == [
        (0, "time_repeat"), (100, "clock_reversal"), (200, "run_end")]
    assert all(r["ticks_lost_after"] is None for r in rows)


def test_a_bag_whose_header_stamps_never_advance_says_so(tmp_path):
    ts = store(2)
    n = 50
    same = joint_states(ts, [T0_NS] * n, FR3, motion(n, 0.001))  # every header stamp identical
    messages = [(T0_NS + i * MS, msg) for i, (_, msg) in enumerate(same)]  # received 1 ms apart
    bag = write_ros2(tmp_path / "still", ts, [Topic("/joint_states", JOINT_STATE, messages)])
    _ingest(tmp_path / "lake", str(bag), "--robot", "b")
    rows = _intervals(tmp_path / "lake")
    assert len(rows) == n and all(r["frame_count"] == 1 for r in rows)
    assert {r["end_reason"] for r in rows[:-1]} == {"time_repeat"}  # never "clock_reversal": no step back
    reasons = _run_row(tmp_path / "lake", "b", "still")["reasons"]
    assert any(f"repeats the previous row's time at {n - 1} rows" in r for r in reasons), reasons
