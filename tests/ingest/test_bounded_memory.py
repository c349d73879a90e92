"""An ingest's memory does not grow with the file: the peak resident set of a fresh
`twinlake ingest` process (`getrusage(RUSAGE_CHILDREN).ru_maxrss`) of 4N rows is within 50 MB
of N rows' (it grew ~2 KB a row when the whole file was held, ~1 KB a message for a bag),
for a CSV v2, a mapped CSV and a bag. The child runs the real
command with smaller chunks and row groups than the defaults, so N can be small: what is
measured is whether anything is held per row, not the chunk's size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bag_writers import JOINT_STATE, write_state_bag
from twinlake.ingest.samples import SampleSpec, write_sample

N = 12_000
CHILD = """
import sys
from twinlake.ingest import decimal_csv, frame_stream
from twinlake.ingest.fr3_stack import recording_csv
from twinlake.ingest.mapped import reader as mapped
from twinlake.ingest.bags import arm_run, decoding
decimal_csv.kernels()  # the compiled reader, as on any machine that built it once
recording_csv.CHUNK_BYTES = mapped.CHUNK_BYTES = 1 << 20
arm_run.CHUNK_MESSAGES, decoding.BATCH_MESSAGES = 4096, 1024
frame_stream.ROW_GROUP_ROWS = 4096
sys.argv = ["twinlake", "ingest", *sys.argv[1:]]
from twinlake.cli import main
main()
"""
PARENT = """
import json, resource, subprocess, sys
peaks = []
for csv, lake in zip(sys.argv[1::2], sys.argv[2::2]):
    subprocess.run([sys.executable, "-c", CHILD, csv, "--lake", lake, "--robot", "m", *EXTRA],
                   check=True, capture_output=True)
    peaks.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
print(json.dumps(peaks))
"""


MAPPING = '[time]\ncolumn = "t_s"\nunit = "s"\n\n[columns]\nq = "q{i}"\ndq = "dq{i}"\ntau_measured = "tau_J{i}"\n'


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> tuple[Path, Path]:
    """(N rows, 4N rows) of one recording: the small one is the big one's first N rows."""
    d = tmp_path_factory.mktemp("memory")
    big = write_sample(d / "big.csv", SampleSpec(rows=4 * N, seed=3))
    lines = big.read_bytes().split(b"\n", N + 1)
    small = d / "small.csv"
    small.write_bytes(b"\n".join(lines[: N + 1]) + b"\n")
    return small, big


@pytest.mark.parametrize("mapped", [False, True], ids=["csv_v2", "mapped_csv"])
def test_peak_memory_of_an_ingest_does_not_grow_with_the_rows(tmp_path: Path, recordings, mapped: bool):
    small, big = recordings
    extra = []
    if mapped:  # the same file as a log of the user's own layout
        (tmp_path / "map.toml").write_text(MAPPING)
        extra = ["--mapping", str(tmp_path / "map.toml")]
    peak_n, peak_4n = _peaks(tmp_path, small, big, extra)
    assert (tmp_path / "l2" / "runs" / "robot=m" / "run=big" / "frames.parquet").is_file()
    assert peak_4n - peak_n < 50, f"peak {peak_n:.0f} MB for {N} rows, {peak_4n:.0f} MB for {4 * N}"


BAG_N = 15_000


def test_peak_memory_of_a_bag_ingest_does_not_grow_with_the_messages(tmp_path: Path):
    """N and 4N JointStates on each of two topics of one arm (the run's frames and its
    `streams` table) in an MCAP bag by rosbags' writer. Holding the decoded values whole, or
    only the streams table whole, the peak grew by more than 50 MB here (bench/RESULTS.md)."""
    small = write_state_bag(tmp_path / "small", BAG_N, JOINT_STATE, copies=2)
    big = write_state_bag(tmp_path / "big", 4 * BAG_N, JOINT_STATE, copies=2)
    peak_n, peak_4n = _peaks(tmp_path, small, big, [])
    run = tmp_path / "l2" / "runs" / "robot=m" / "run=big"
    assert pq.read_metadata(run / "frames.parquet").num_rows == 4 * BAG_N
    assert pq.read_metadata(run / "streams.parquet").num_rows == 4 * BAG_N
    assert peak_4n - peak_n < 50, f"peak {peak_n:.0f} MB for {BAG_N} messages, {peak_4n:.0f} MB for {4 * BAG_N}"


def _peaks(tmp_path: Path, small: Path, big: Path, extra: list[str]) -> tuple[float, float]:
    """The peak RSS [MB] of `twinlake ingest` of `small`, then of `big` (the second reading
    is the larger of both peaks), each in a fresh child."""
    code = f"CHILD = {CHILD!r}\nEXTRA = {extra!r}\n{PARENT}"
    # Arrow's default allocator (mimalloc) keeps freed pages for reuse, a retained amount that
    # varied by ~45 MB from run to run here: the system allocator gives them back, so what is
    # measured is what the ingest holds
    env = os.environ | {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    out = subprocess.run([sys.executable, "-c", code, str(small), str(tmp_path / "l1"),
                          str(big), str(tmp_path / "l2")], check=True, capture_output=True,
                         text=True, timeout=300, env=env)
    return tuple(json.loads(out.stdout))
