"""The serial ingest and the fan-out execute one plan of the inputs (ingest/plan.py): mapped
logs of the user's own layout (`--mapping`) and a bag holding two arms (`--robot-map`) give
the same outcomes, messages, exit status and runs with `--workers 2` as one after another."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the `plant` package
from bag_writers import JOINT_STATE, T0_NS, Topic, joint_states, motion, store, write_ros2  # noqa: E402
from ingest_helpers import runs_of  # noqa: E402
from test_bags_formats import FR3, MS  # noqa: E402
from test_mapped_logs import LIBFRANKA_MAPPING, READY  # noqa: E402

from twinlake.catalog import Lake  # noqa: E402
from twinlake.cli import app  # noqa: E402

KEEP = ("robot", "run", "raw_sha256", "frame_count", "verdict", "flags")


def _mapped_logs(folder: Path) -> list[Path]:
    """Three libfranka-style CSV logs of different lengths and one without its tau_J columns."""
    folder.mkdir()
    rng = np.random.default_rng(3)
    paths = []
    for i, rows in enumerate((400, 550, 700, 300)):
        t_ms = np.arange(rows, dtype=float)
        cols = {"duration": t_ms}
        for j in range(7):
            cols[f"q[{j}]"] = READY[j] + 0.1 * np.sin(0.004 * t_ms + j) + rng.normal(0, 1e-5, rows)
            cols[f"dq[{j}]"] = 0.0004 * np.cos(0.004 * t_ms + j)
            if i != 3:  # the last log lacks the mapped torque columns: refused naming them
                cols[f"tau_J[{j}]"] = rng.normal(0, 0.1, rows)
            cols[f"tau_ext_hat_filtered[{j}]"] = np.zeros(rows)
            cols[f"q_d[{j}]"] = cols[f"q[{j}]"]
            cols[f"dq_d[{j}]"] = cols[f"dq[{j}]"]
        path = folder / f"log{i}.csv"
        header = ",".join(cols)
        np.savetxt(path, np.column_stack(list(cols.values())), delimiter=",", header=header, comments="",
                   fmt="%.9g")
        paths.append(path)
    return paths


def _ingest(lake: Path, inputs: list[Path], *extra: str):
    res = CliRunner().invoke(app, ["ingest", *map(str, inputs), "--lake", str(lake), "--robot", "panda",
                                   "--json", *extra])
    return res.exit_code, [json.loads(line) for line in res.stdout.splitlines()]


def _portable(o: dict, lake: Path) -> dict:
    """An outcome without what names its own lake (partition path, quarantine stamp)."""
    return o | {"partition": o["partition"] and str(Path(o["partition"]).relative_to(lake)),
                "quarantine": o["quarantine"] and Path(o["quarantine"]).parent.name}


def _same(tmp_path: Path, inputs: list[Path], *extra: str) -> list[dict]:
    serial_lake, fanned_lake = tmp_path / "serial", tmp_path / "fanned"
    serial_code, serial = _ingest(serial_lake, inputs, *extra)
    fanned_code, fanned = _ingest(fanned_lake, inputs, *extra, "--workers", "2")
    assert serial_code == fanned_code
    assert [_portable(o, serial_lake) for o in serial] == [_portable(o, fanned_lake) for o in fanned]
    assert [{k: r[k] for k in KEEP} for r in runs_of(Lake(fanned_lake))] == \
        [{k: r[k] for k in KEEP} for r in runs_of(Lake(serial_lake))]
    return serial


def test_mapped_logs_fan_out_as_they_ingest_one_after_another(tmp_path):
    logs = _mapped_logs(tmp_path / "logs")
    mapping = tmp_path / "libfranka.toml"
    mapping.write_text(LIBFRANKA_MAPPING)
    outcomes = _same(tmp_path, logs, "--mapping", str(mapping))
    assert [o["status"] for o in outcomes] == ["published"] * 3 + ["rejected"]
    assert "tau_J[0]" in outcomes[3]["message"], outcomes[3]


def test_a_two_arm_bag_fans_out_as_two_runs(tmp_path):
    ts = store(2)
    n = 300
    times = [T0_NS + i * MS for i in range(n)]
    bag = write_ros2(tmp_path / "bimanual", ts, [
        Topic("/left/joint_states", JOINT_STATE, joint_states(ts, times, [f"left/{j}" for j in FR3],
                                                              motion(n, 0.001, seed=1))),
        Topic("/right/joint_states", JOINT_STATE, joint_states(ts, times, FR3, motion(n, 0.001, seed=2)))],
        mcap=True)
    outcomes = _same(tmp_path, [bag], "--robot-map", "left=fr3-left", "right=fr3-right")
    assert [(o["status"], o["robot"], o["run"]) for o in outcomes] == [
        ("published", "fr3-left", "bimanual-left"), ("published", "fr3-right", "bimanual-right")]
