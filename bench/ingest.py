"""Ingest throughput: `twinlake ingest` vs DuckDB's bare CSV → Parquet conversion.

Generates a 10-minute 1 kHz CSV v2 (600 000 rows, 80 columns, `%.12g`, as the fr3_stack
writer prints it), then measures in the same process and the same run:

  duckdb    COPY (FROM read_csv(csv)) TO frames.parquet (FORMAT parquet)
  twinlake  the full ingest pipeline: parse, canonicalise, pandera validation, run stats,
            SHA-256 + zstd copy of the raw file, Parquet write, fsync, atomic publish

twinlake runs once per `--raw-codec` (default: zstd, the CLI default, and none, a plain
kernel-side copy, to show what compressing the archive costs), and once per
`--archive-threads` value (workers compressing the archive's frames; default: the
pipeline's own `rawstore.ARCHIVE_THREADS`; 1 shows the archive compressed on one thread).

Each is run `--repeat` times (alternating, fresh output each time); the best wall time of
each is reported with rows/s and the ratio twinlake/duckdb (throughput; target >= 0.8),
plus the same ratio in process CPU seconds, which a busy shared machine disturbs less.
Both run inside this warm process, so neither pays its start-up.

`--whole-process N` also times N pairs of whole commands, start-up included, alternating:
`python -m twinlake ingest CSV` (a fresh process: imports, loading the compiled CSV
reader) against `python -c` running the same DuckDB COPY; it prints the median wall time
of each and the median of the pairs' ratios (the HEADLINE line; target >= 0.8), and beside
them the same command with pandas, hypothesis, scipy.linalg and duckdb imported first (what
a fresh ingest imported before twinlake/lean_start.py). `--repeat 0` measures only that.

    python bench/ingest.py [--rows 600000] [--repeat 2] [--keep DIR]
                           [--raw-codec zstd none] [--archive-threads 2 1]
                           [--whole-process 0]

The 1-minute load average is printed before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from twinlake.catalog import Lake
from twinlake.ingest import rawstore
from twinlake.ingest.pipeline import ingest_paths
from twinlake.ingest.registry import ReadOptions
from twinlake.ingest.samples import SampleSpec, write_sample


def time_duckdb(csv: Path, out: Path) -> tuple[float, float]:
    """(wall s, process CPU s) of DuckDB's bare conversion."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    wall, cpu = time.perf_counter(), time.process_time()
    con.execute("COPY (FROM read_csv(?)) TO ? (FORMAT parquet)", [str(csv), str(out)])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    con.close()
    return wall, cpu


def time_twinlake(csv: Path, lake_dir: Path, rows: int, codec: str,
                  archive_threads: int) -> tuple[float, float]:
    """(wall s, process CPU s) of the full ingest pipeline."""
    rawstore.ARCHIVE_THREADS = archive_threads
    wall, cpu = time.perf_counter(), time.process_time()
    [outcome] = list(ingest_paths(Lake(lake_dir), [csv], ReadOptions(robot="bench"),
                                  raw_codec=codec))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if outcome.status != "published" or outcome.frame_count != rows:
        raise SystemExit(f"twinlake ingest did not publish: {outcome.message}")
    return wall, cpu


_DUCKDB_COPY = ("import sys, duckdb; con = duckdb.connect(); "
                "con.execute('SET enable_progress_bar = false'); "
                "con.execute('COPY (FROM read_csv(?)) TO ? (FORMAT parquet)', sys.argv[1:3])")


def time_whole_processes(csv: Path, work: Path, pairs: int) -> None:
    """Median wall s of `pairs` fresh `python -m twinlake ingest` and DuckDB COPY processes,
    run in turn, and the median of the pairs' throughput ratios."""
    ours, theirs, eager = [], [], []
    for i in range(pairs):
        lake_dir = work / f"cli-lake{i}"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "twinlake", "ingest", str(csv), "--lake",
                        str(lake_dir), "--robot", "bench"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours.append(time.perf_counter() - t0)
        shutil.rmtree(lake_dir)
        t0 = time.perf_counter()  # the same command with what twinlake/lean_start.py skips imported first
        subprocess.run([sys.executable, "-c", _EAGER_INGEST, str(csv), str(lake_dir)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        eager.append(time.perf_counter() - t0)
        shutil.rmtree(lake_dir)
        out = work / f"cli-duck{i}.parquet"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _DUCKDB_COPY, str(csv), str(out)], check=True)
        theirs.append(time.perf_counter() - t0)
        out.unlink()
        print(f"whole process {i + 1}: twinlake ingest {ours[-1]:.2f} s, eager imports {eager[-1]:.2f} s, "
              f"duckdb {theirs[-1]:.2f} s", flush=True)
    ratio = statistics.median(d / t for d, t in zip(theirs, ours))
    before = statistics.median(d / t for d, t in zip(theirs, eager))
    print(f"HEADLINE whole process, start-up included: twinlake ingest median "
          f"{statistics.median(ours):.2f} s, duckdb median {statistics.median(theirs):.2f} s"
          f", ratio (median of {pairs} pairs) {ratio:.2f}x (target >= 0.80); with pandas, hypothesis, "
          f"scipy.linalg and duckdb imported first (as before): median {statistics.median(eager):.2f} s, "
          f"{before:.2f}x")


_EAGER_INGEST = """
import sys
import duckdb, hypothesis, pandas, scipy.linalg  # what a fresh `twinlake ingest` imported before lean_start
sys.argv = ["twinlake", "ingest", sys.argv[1], "--lake", sys.argv[2], "--robot", "bench"]
from twinlake.cli import main
main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: temp)")
    parser.add_argument("--raw-codec", nargs="+", default=["zstd", "none"],
                        choices=["zstd", "lz4", "none"],
                        help="codecs of the kept raw copy to measure (default: zstd none)")
    parser.add_argument("--archive-threads", nargs="+", type=int,
                        default=[rawstore.ARCHIVE_THREADS],
                        help="workers compressing the archive (default: "
                             f"{rawstore.ARCHIVE_THREADS}, the pipeline's)")
    parser.add_argument("--whole-process", type=int, default=0, metavar="N",
                        help="also time N pairs of whole processes, start-up included")
    args = parser.parse_args()
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="twinlake-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    csv = work / "bench_run.csv"
    if not csv.exists() or sum(1 for _ in open(csv, "rb")) - 1 != args.rows:
        t0 = time.perf_counter()
        write_sample(csv, SampleSpec(rows=args.rows, seed=1))
        print(f"generated {csv} ({csv.stat().st_size / 1e6:.0f} MB, {args.rows} rows) "
              f"in {time.perf_counter() - t0:.1f} s")
    variants = [(c, t) for c in args.raw_codec for t in args.archive_threads
                if c != "none" or t == args.archive_threads[0]]  # none compresses nothing
    duck, twin = [], {v: [] for v in variants}
    if args.repeat == 0:  # the whole-process headline alone
        time_whole_processes(csv, work, max(args.whole_process, 1))
        print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        return
    for i in range(args.repeat):
        out = work / f"duck{i}.parquet"
        duck.append(time_duckdb(csv, out))
        out.unlink()
        line = f"round {i + 1}: duckdb {duck[-1][0]:.2f} s (cpu {duck[-1][1]:.2f} s)"
        for codec, threads in variants:
            lake_dir = work / f"lake{i}-{codec}-{threads}"
            times = twin[codec, threads]
            times.append(time_twinlake(csv, lake_dir, args.rows, codec, threads))
            shutil.rmtree(lake_dir)
            line += f", twinlake[{_label(codec, threads, args)}] {times[-1][0]:.2f} s " \
                    f"(cpu {times[-1][1]:.2f} s)"
        print(line, flush=True)
    d, dc = min(w for w, _ in duck), min(c for _, c in duck)
    print(f"duckdb   COPY read_csv -> parquet        : {args.rows / d:10,.0f} rows/s "
          f"(best {d:.2f} s wall, {dc:.2f} s cpu)")
    for (codec, threads), times in twin.items():
        t, tc = min(w for w, _ in times), min(c for _, c in times)
        print(f"twinlake ingest, raw copy {_label(codec, threads, args):>8} : "
              f"{args.rows / t:10,.0f} rows/s "
              f"(best {t:.2f} s wall, {tc:.2f} s cpu)  ratio {d / t:.2f}x wall, "
              f"{dc / tc:.2f}x cpu  (target >= 0.80)")
    if args.whole_process:
        time_whole_processes(csv, work, args.whole_process)
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


def _label(codec: str, threads: int, args: argparse.Namespace) -> str:
    """`zstd`, or `zstd/2` when several archive thread counts are measured."""
    several = len(args.archive_threads) > 1 and codec != "none"
    return f"{codec}/{threads}" if several else codec


if __name__ == "__main__":
    main()
