"""Input files and the memory measurement of bench/ingest.py.

- `tiled_csv(base, rows, out)`: a CSV v2 of `rows` rows tiled from the rows of `base` (a CSV
  v2), its clocks continued: `seq` advances past the tile before, `t_s` and `robot_time_s` by
  the tile's span, every other cell as in `base` (one text edit per line, no re-formatting).
- `recorder_csv(work)`: a `twinlake sim record` recording (a 20 s multisine excitation on all
  seven joints, the bundled demo robot, the recorder's own `%.12g` CSV writer): the shape of
  the files users ingest (cells of 12 significant digits, the recorder's constant columns).
- `peak_rss_mb(csv, lake)`: the peak resident set of one fresh `python -m twinlake ingest`
  process (`getrusage(RUSAGE_CHILDREN).ru_maxrss`, in a child of its own so no other child
  counts).
- `worker_peaks_mb(csv, lake, workers)`: the peak resident set of each Ray worker of
  `twinlake ingest --workers N` ingesting N copies (hard links) of `csv` at once: on a local
  Ray of N CPUs (in a child process of its own), N tasks of the fan-out's own task body
  (`ingest.fanout.ingest_task`), each returning its worker's `getrusage(RUSAGE_SELF)
  .ru_maxrss` (the worker's whole life: Ray's start-up, imports and the one ingest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CLOCKS = ("seq", "t_s", "robot_time_s")


def tiled_csv(base: Path, rows: int, out: Path) -> Path:
    """`out`, `rows` data rows tiled from `base`'s (header kept)."""
    header, *lines = base.read_bytes().rstrip(b"\n").split(b"\n")
    names = header.decode().split(",")
    where = [names.index(c) for c in _CLOCKS]
    cells = [line.split(b",") for line in lines]
    seq0, t0, rt0 = (float(cells[0][i]) for i in where)
    step_seq = int(cells[-1][where[0]]) - int(seq0) + 1
    step_t = float(cells[-1][where[1]]) - t0 + (float(cells[1][where[1]]) - t0)
    with open(out, "wb") as fh:
        fh.write(header + b"\n")
        done, tile = 0, 0
        while done < rows:
            part = cells[: rows - done]
            dseq, dt = tile * step_seq, tile * step_t
            for row in part:
                if tile:
                    row = list(row)
                    row[where[0]] = b"%d" % (int(row[where[0]]) + dseq)
                    row[where[1]] = b"%.12g" % (float(row[where[1]]) + dt)
                    row[where[2]] = b"%.12g" % (float(row[where[2]]) + dt)
                fh.write(b",".join(row) + b"\n")
            done += len(part)
            tile += 1
    return out


def recorder_csv(work: Path) -> Path:
    """A `twinlake sim record` recording in `work` (made once, ~20 000 rows)."""
    out = work / "recorder" / "rec.csv"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    preview = out.parent / "preview"
    cli = [sys.executable, "-m", "twinlake"]
    subprocess.run(cli + ["excite", "--mode", "multisine", "--joints", "1,2,3,4,5,6,7",
                          "--seconds", "20", "--ramp", "0.5", "--hold", "0.5", "--rate", "100",
                          "--tones", "0.3,0.7", "--amplitude-deg", "2", "--max-velocity", "2",
                          "--max-acceleration", "50", "--max-jerk", "1000", "--output",
                          str(preview)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(cli + ["sim", "record", "--reference", str(preview / "reference.csv"),
                          "--out", str(out), "--tail", "0.5"], check=True, stdout=subprocess.DEVNULL)
    return out


_MEASURE = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "twinlake", "ingest", *sys.argv[1:]], check=True,
               stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def peak_rss_mb(csv: Path, lake: Path, *extra: str) -> float:
    """Peak resident MB of one `twinlake ingest CSV --lake LAKE --robot bench` process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(csv), "--lake", str(lake),
                          "--robot", "bench", *extra], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


_WORKERS = """
import json, os, resource, sys
from pathlib import Path
os.environ.setdefault("RAY_AUTH_MODE", "token")
from twinlake.lean_start import use_process_environment
use_process_environment("ingest")  # as `twinlake ingest` does: its local Ray's workers inherit it
import ray
from twinlake.ingest.fanout import ingest_task
from twinlake.ingest.registry import ReadOptions, detect

def measured(*args):
    statuses = [o.status for o in ingest_task(*args)]
    return statuses, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, os.getpid()

csvs, lake = [Path(p) for p in sys.argv[2:]], sys.argv[1]
reader, _ = detect(csvs[0])
for attempt in range(4):  # Ray gives its node 30 s to start: a loaded machine may need more
    try:
        ray.init(num_cpus=len(csvs), include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING")
        break
    except Exception as exc:
        if "timed out during startup" not in str(exc) or attempt == 3:
            raise
        ray.shutdown()
task = ray.remote(num_cpus=1, max_retries=0)(measured)
refs = [task.remote(lake, str(c), reader.name, ReadOptions(robot="bench"), False, "zstd", 1) for c in csvs]
print(json.dumps(ray.get(refs)))
ray.shutdown()
"""


def worker_peaks_mb(csv: Path, lake: Path, workers: int) -> list[float]:
    """Peak resident MB of each of `workers` Ray workers ingesting a copy of `csv` at once."""
    folder = lake.parent / f"{lake.name}-inputs"
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for i in range(workers):
        copy = folder / f"copy{i}{csv.suffix}"
        copy.unlink(missing_ok=True)
        os.link(csv, copy)
        copies.append(str(copy))
    try:
        out = subprocess.run([sys.executable, "-c", _WORKERS, str(lake), *copies], check=True,
                             capture_output=True, text=True)
    finally:
        for copy in copies:
            Path(copy).unlink()
        folder.rmdir()
    results = json.loads(out.stdout.strip().splitlines()[-1])
    bad = [r for r in results if r[0] != ["published"]]
    if bad or len({r[2] for r in results}) != workers:
        raise SystemExit(f"fan-out memory run: expected {workers} workers each publishing: {results}")
    return [r[1] for r in results]
