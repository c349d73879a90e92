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
"""

from __future__ import annotations

import json
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
