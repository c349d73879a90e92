"""`twinlake ingest DIR --workers N`: the inputs as Ray tasks (a local Ray), the same outcomes,
messages, order and exit status as the serial ingest, the same runs in the lake; two inputs
of one run racing to publish resolve to one; a task keeps to the CPUs Ray gives it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import formats_fixtures as ff
import pytest
from typer.testing import CliRunner

from ingest_helpers import runs_of
from twinlake.catalog import Lake
from twinlake.cli import app
from twinlake.ingest.fanout import confined_to_cpus
from twinlake.ingest.samples import SampleSpec, complete_status, write_sample


def _fleet_day(root: Path) -> Path:
    """Recordings of several formats, companions, a broken file, an unknown file, a unit
    directory, FrankaTwin result files and two copies of one recording (one run)."""
    data = root / "day"
    data.mkdir()
    for i in range(3):
        path = data / f"run{i:03d}.csv"
        write_sample(path, SampleSpec(rows=300, seed=i), status=complete_status(path, 300))
    for name in ("copy_a.csv", "copy_b.csv"):  # the same bytes, the same recording id: one run
        path = data / name
        write_sample(path, SampleSpec(rows=200, seed=9), status=complete_status(path, 200),
                     meta={"run_id": "shared-run"})
    broken = data / "run_broken.csv"
    write_sample(broken, SampleSpec(rows=100, seed=4))
    broken.write_bytes(broken.read_bytes()[:-25])  # truncated mid-row: rejected
    (data / "notes.txt").write_text("not a recording\n")
    ff.write_ring(data, "ring_run", n=300, gaps=[(1100, 1102)])
    ff.write_excitation(data / "joint-run", nuc_log="/recordings/run000.csv")
    ff.write_json(data / "sysid_best_params.json", ff.best_params_body())
    return data


def _ingest(runner: CliRunner, data: Path, lake: Path, *extra: str):
    res = runner.invoke(app, ["ingest", str(data), "--lake", str(lake), "--robot", "fr3", "--json", *extra])
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    return res, lines


def _portable(o: dict, lake: Path) -> dict:
    """An outcome without what names its own lake (partition path, quarantine stamp)."""
    return o | {"partition": o["partition"] and str(Path(o["partition"]).relative_to(lake)),
                "quarantine": o["quarantine"] and Path(o["quarantine"]).parent.name}


def test_fan_out_gives_the_serial_outcomes_in_order_and_the_same_runs(tmp_path):
    data = _fleet_day(tmp_path)
    runner = CliRunner()
    serial_lake, fanned_lake = tmp_path / "serial", tmp_path / "fanned"
    serial, serial_lines = _ingest(runner, data, serial_lake)
    fanned, fanned_lines = _ingest(runner, data, fanned_lake, "--workers", "2")
    assert serial.exit_code == fanned.exit_code == 1  # the broken file
    assert len(fanned_lines) == len(serial_lines) == 9
    copies = [str(data / "copy_a.csv"), str(data / "copy_b.csv")]
    same = [(_portable(a, serial_lake), _portable(b, fanned_lake))
            for a, b in zip(serial_lines, fanned_lines) if a["path"] not in copies]
    assert [a for a, _ in same] == [b for _, b in same]
    assert {o["status"] for o in serial_lines} >= {"published", "rejected"}
    # the two copies of one run: one publishes, the other finds it there (whichever finished first)
    raced = sorted(o["status"] for o in fanned_lines if o["path"] in copies)
    assert raced == ["already_ingested", "published"]
    assert [o["path"] for o in fanned_lines] == [o["path"] for o in serial_lines]
    assert "skipped" in serial.stderr and "notes.txt: skipped" in fanned.stderr
    keep = ("robot", "run", "raw_sha256", "frame_count", "verdict", "flags")
    assert [{k: r[k] for k in keep} for r in runs_of(Lake(fanned_lake))] == \
        [{k: r[k] for k in keep} for r in runs_of(Lake(serial_lake))]
    assert not any((fanned_lake / "_staging").iterdir())
    again, again_lines = _ingest(runner, data, fanned_lake, "--workers", "2")  # a no-op that says so
    assert again.exit_code == 1 and {o["status"] for o in again_lines} == {"already_ingested", "rejected"}


def test_every_recording_is_submitted_before_the_first_ends(tmp_path):
    """Companion files (`.status.json`, `.meta.json`) do not hold the walk up: the recordings
    of a directory run at once, not one after another."""
    from twinlake.ingest.fanout import fan_out_paths
    from twinlake.ingest.registry import ReadOptions

    data = tmp_path / "day"
    data.mkdir()
    for i in range(3):
        path = data / f"run{i:03d}.csv"
        write_sample(path, SampleSpec(rows=200, seed=i), status=complete_status(path, 200), meta={"robot_id": "fr3"})
    progress: list[tuple[int, int]] = []
    outcomes = list(fan_out_paths(Lake(tmp_path / "lake"), [data], ReadOptions(), workers=2,
                                  on_done=lambda done, submitted: progress.append((done, submitted))))
    assert [o.status for o in outcomes] == ["published"] * 3
    assert progress[0] == (0, 3) and progress[-1] == (3, 3)
    assert all(submitted == 3 for _, submitted in progress)


def test_a_task_is_confined_to_its_cpus_and_gets_its_mask_back():
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("one core: nothing to confine")
    other = (f"import os; from twinlake.ingest.fanout import confined_to_cpus\n"
             f"os.sched_setaffinity(0, {sorted(before)})  # a Ray worker's own mask, not this one's\n"
             "with confined_to_cpus(1) as cores: print(cores[0], sorted(os.sched_getaffinity(0)))")
    with confined_to_cpus(1) as first:
        assert os.sched_getaffinity(0) == set(first) and len(first) == 1
        # a second task on this machine (another process) takes another core
        out = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, check=True)
        core, mask = out.stdout.split(" ", 1)
        assert int(core) != first[0] and json.loads(mask) == [int(core)]
    assert os.sched_getaffinity(0) == before


def _allowed_cpus(tid: int) -> set[int]:
    """The kernel's view of thread `tid`'s mask (/proc/self/task/TID/status), not Python's."""
    line = next(x for x in Path(f"/proc/self/task/{tid}/status").read_text().splitlines()
                if x.startswith("Cpus_allowed_list:"))
    out: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def test_confinement_reaches_threads_started_before_it():
    """Linux's affinity is per thread: a pool started before the task (Arrow's, numba's, Ray's
    own) must be confined too, and get its mask back after."""
    before = os.sched_getaffinity(0)
    if len(before) < 2 or not Path("/proc/self/task").is_dir():
        pytest.skip("needs two cores and /proc")
    started, stop = threading.Event(), threading.Event()
    tids: list[int] = []

    def pool_thread():
        tids.append(threading.get_native_id())
        started.set()
        stop.wait(30)

    worker = threading.Thread(target=pool_thread, daemon=True)
    worker.start()
    started.wait(10)
    try:
        with confined_to_cpus(1) as cores:
            assert _allowed_cpus(tids[0]) == set(cores) == _allowed_cpus(threading.get_native_id())
        assert _allowed_cpus(tids[0]) == before == _allowed_cpus(threading.get_native_id())
    finally:
        stop.set()
        worker.join(10)


def test_address_alone_and_a_dashboard_url_are_usage_errors(tmp_path):
    runner = CliRunner()
    data = tmp_path / "d"
    data.mkdir()
    res = runner.invoke(app, ["ingest", str(data), "--lake", str(tmp_path / "l"), "--address", "auto"])
    assert res.exit_code == 2 and "give --workers N too" in res.stderr
    res = runner.invoke(app, ["ingest", str(data), "--lake", str(tmp_path / "l"), "--workers", "2",
                              "--address", "http://127.0.0.1:8265"])
    assert res.exit_code == 2 and "ray job submit --address http://127.0.0.1:8265" in res.stderr
    assert "pip install -c constraints.txt -e '.[cluster]'" in res.stderr
    shutil.rmtree(data)
