"""End to end as a new user would: an fr3_stack CSV v2 recording (written here from fr3_stack's
CSV v2 column list) goes through the real `twinlake.ingest` pipeline, then `twinlake intervals
--min-duration-s 5` and the documented join through `twinlake sql`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from interval_synth import drop_ticks, joint_recording
from typer.testing import CliRunner

from twinlake.catalog import Lake
from twinlake.cli import app


def _csv_v2_header() -> list[str]:
    j = range(7)  # CSV v2 suffixes 0..6 are J1..J7
    cols = ["seq", "t_s"]
    for prefix in ("q", "dq", "tau_J", "tau_cmd"):
        cols += [f"{prefix}{i}" for i in j]
    cols += [f"ee_{s}" for s in ("px", "py", "pz", "qx", "qy", "qz", "qw")]
    cols += [f"tgt_{s}" for s in ("px", "py", "pz", "qx", "qy", "qz", "qw")]
    cols += ["controller", "schema_version", "joint_target_valid"]
    for prefix in ("q_target", "q_target_filtered", "K_joint", "D_joint"):
        cols += [f"{prefix}{i}" for i in j]
    cols += ["filter_alpha", "joint_use_friction", "joint_reset_count", "robot_time_s",
             "control_period_s"]
    assert len(cols) == 80
    return cols


def write_csv_v2(rec, path: Path) -> None:
    """The 80 columns in spec order, unquoted, `\n` line ends (Arrow's CSV writer: shortest
    round-trip doubles instead of `%.12g`, which the reader parses alike)."""
    header = _csv_v2_header()
    arrays = []
    for name in header:
        canon = name
        if name[-1].isdigit() and not name.startswith("ee_"):
            canon = name[:-1] + str(int(name[-1]) + 1)  # suffix 0..6 -> canonical 1..7
        arrays.append(pa.array(rec.cols[canon]))
    table = pa.Table.from_arrays(arrays, names=header)
    with open(path, "wb") as fh:
        fh.write((",".join(header) + "\n").encode())
        pacsv.write_csv(table, fh, pacsv.WriteOptions(include_header=False, quoting_style="none"))


@pytest.fixture
def ingested_lake(tmp_path: Path) -> Path:
    from twinlake.ingest import ReadOptions
    from twinlake.ingest import ingest_paths

    rec = joint_recording(7_000)  # 7 s at 1 kHz
    home = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)  # inside the FR3 joint limits
    for j in range(1, 8):
        for prefix in ("q", "q_target", "q_target_filtered"):
            rec.cols[f"{prefix}{j}"] = rec.cols[f"{prefix}{j}"] * 0.5 + home[j - 1]
    rec.cols["K_joint2"][6_200:] = 650.0  # gain change at 6.2 s
    drop_ticks(rec, 500, 10)  # ring drop at 0.5 s
    csv = tmp_path / "hold.csv"
    write_csv_v2(rec, csv)
    root = tmp_path / "lake"
    outcomes = list(ingest_paths(Lake(root), [csv], ReadOptions(robot="fr3-lab", run="hold")))
    assert [o.status for o in outcomes] != [] and (root / "runs/robot=fr3-lab/run=hold").is_dir(), outcomes
    return root


def _app():
    return app  # the root app: `sql`, `catalog`, `intervals` and the rest


def test_fresh_lake_min_duration_and_join(ingested_lake):
    runner = CliRunner()
    res = runner.invoke(_app(), ["intervals", "--lake", str(ingested_lake), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["seq_first"], r["seq_last"], r["start_reason"], r["end_reason"]) for r in rows] == [
        (0, 499, "run_start", "seq_gap"),
        (510, 6199, "seq_gap", "gain_change"),
        (6200, 6999, "gain_change", "run_end"),
    ]
    res = runner.invoke(_app(), ["intervals", "--lake", str(ingested_lake), "--min-duration-s", "5"])
    assert res.exit_code == 0, res.output
    assert "6199" in res.stdout and "seq_gap" in res.stdout and "(1 interval in 1 run" in res.stdout
    join = ("SELECT i.interval_index, count(*) AS n FROM frames f JOIN intervals i USING (robot, run) "
            "WHERE f.seq BETWEEN i.seq_first AND i.seq_last GROUP BY ALL ORDER BY 1")
    res = runner.invoke(_app(), ["sql", join, "--format", "json", "--lake", str(ingested_lake)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [{"interval_index": 0, "n": 500},
                                      {"interval_index": 1, "n": 5690},
                                      {"interval_index": 2, "n": 800}]
