"""Ingest throughput: `twinlake ingest` vs DuckDB's bare CSV → Parquet conversion.

Generates a 10-minute 1 kHz CSV v2 (600 000 rows, 80 columns, `%.12g`, as the fr3_stack
writer prints it), then measures in the same process and the same run:

  duckdb    COPY (FROM read_csv(csv)) TO frames.parquet (FORMAT parquet)
  twinlake  the full ingest pipeline: parse, canonicalise, validation, run stats,
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

`--files K` measures the fan-out instead (`twinlake ingest DIR --workers N`,
ingest/fanout.py): K same-size recordings (`--rows` each, default 100 000 in this mode) in one
directory, ingested in the same run by the serial pipeline (this process; its parse and archive
threads use every core) and by the fan-out with one and with two one-CPU Ray tasks at a time on
a local Ray of 2 CPUs (workers warmed up by a first pass), alternating, `--repeat` rounds, best
of each. It prints files/s of each and the ratios: two workers / one (target >= 1.7) and two
workers / serial (target >= 0.9).

    python bench/ingest.py --files 8 [--rows 100000] [--repeat 2]

`--file recorder` measures a CSV v2 tiled from a `twinlake sim record` recording (the shape
of the files users ingest, bench/ingest_files.py) instead of the synthetic one; `--memory ROWS`
measures instead the peak RSS of one fresh `twinlake ingest` of a ROWS-row CSV v2 and of a
tenth of it (target <= 600 MB for 3 600 000 rows, one hour at 1 kHz); with `--workers N`,
also the peak of each Ray worker ingesting one of N copies of the ROWS-row file at once, as
`twinlake ingest --workers N` runs them (the same target per worker).

    python bench/ingest.py --file recorder --repeat 0 --whole-process 5
    python bench/ingest.py --memory 3600000 [--workers 2]

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_files import peak_rss_mb, recorder_csv, tiled_csv, worker_peaks_mb  # noqa: E402


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


def time_fan_out(folder: Path, work: Path, files: int, workers: int | None, tag: str) -> float:
    """Wall s of ingesting every recording of `folder` into a new lake: serially in this
    process (`workers` None) or as Ray tasks, `workers` at a time, one CPU each."""
    from twinlake.ingest.fanout import fan_out_paths

    lake_dir = work / f"lake-{tag}"
    options = ReadOptions(robot="bench")
    wall = time.perf_counter()
    if workers is None:
        outcomes = list(ingest_paths(Lake(lake_dir), [folder], options))
    else:
        outcomes = list(fan_out_paths(Lake(lake_dir), [folder], options, workers=workers))
    wall = time.perf_counter() - wall
    published = [o for o in outcomes if o.status == "published"]
    if len(published) != files:
        raise SystemExit(f"{tag}: {len(published)} of {files} published: {[o.message for o in outcomes]}")
    shutil.rmtree(lake_dir)
    return wall


def bench_fan_out(args: argparse.Namespace, work: Path) -> None:
    """`--files K`: serial vs fan-out with one and two one-CPU workers, in one run."""
    os.environ.setdefault("RAY_AUTH_MODE", "token")  # before Ray's import, as fit/run.py
    import ray

    rows = args.rows or 100_000
    folder = work / f"fleet-{args.files}x{rows}"
    folder.mkdir(exist_ok=True)
    for i in range(args.files):
        csv = folder / f"run{i:03d}.csv"
        if not csv.exists():
            write_sample(csv, SampleSpec(rows=rows, seed=1 + i))
    size_mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    print(f"{args.files} recordings of {rows} rows ({size_mb:.0f} MB) in {folder}")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    time_fan_out(folder, work, args.files, 2, "warm-up")  # both workers import and compile once
    variants = {"serial": None, "1 worker": 1, "2 workers": 2}
    walls: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(args.repeat):
        for name, workers in variants.items():
            walls[name].append(time_fan_out(folder, work, args.files, workers, f"{i}-{workers}"))
        print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in walls.items()), flush=True)
    ray.shutdown()
    best = {k: min(v) for k, v in walls.items()}
    for name, wall in best.items():
        print(f"{name:>9}: {args.files / wall:6.2f} files/s ({rows * args.files / wall:10,.0f} rows/s, "
              f"best {wall:.2f} s)")
    print(f"2 workers / 1 worker: {best['1 worker'] / best['2 workers']:.2f}x (target >= 1.7); "
          f"2 workers / serial: {best['serial'] / best['2 workers']:.2f}x (target >= 0.9)")


def bench_file(kind: str, rows: int, work: Path) -> Path:
    """The `rows`-row CSV v2 of `--file` (made once per work directory)."""
    csv = work / f"bench_{kind}.csv"
    if csv.exists() and sum(1 for _ in open(csv, "rb")) - 1 == rows:
        return csv
    t0 = time.perf_counter()
    if kind == "recorder":
        tiled_csv(recorder_csv(work), rows, csv)
    else:
        write_sample(csv, SampleSpec(rows=rows, seed=1))
    print(f"generated {csv} ({csv.stat().st_size / 1e6:.0f} MB, {rows} rows) "
          f"in {time.perf_counter() - t0:.1f} s")
    return csv


def bench_memory(rows: int, work: Path, workers: int) -> None:
    """Peak RSS of one fresh `twinlake ingest` of a `rows`-row CSV v2 (tiled from a 100 000-row
    sample) and of a tenth of it (target: <= 600 MB; the two alike: memory does not grow);
    with `workers`, also the peak of each Ray worker when `workers` copies of the `rows`-row
    file are ingested at once as under `--workers` (target: <= 600 MB each)."""
    base = work / "memory_base.csv"
    if not base.exists():
        write_sample(base, SampleSpec(rows=100_000, seed=1))
    for n in (rows // 10, rows):
        csv = tiled_csv(base, n, work / f"memory_{n}.csv")
        peak = peak_rss_mb(csv, work / f"memory-lake-{n}")
        shutil.rmtree(work / f"memory-lake-{n}")
        print(f"HEADLINE memory: one `twinlake ingest` of {n:,} rows "
              f"({csv.stat().st_size / 1e6:.0f} MB) peaked at {peak:.0f} MB RSS "
              f"(target <= 600 MB)", flush=True)
        if workers and n == rows:
            peaks = worker_peaks_mb(csv, work / "memory-lake-workers", workers)
            shutil.rmtree(work / "memory-lake-workers")
            print(f"HEADLINE memory: {workers} copies under --workers {workers}, each Ray "
                  f"worker peaked at {', '.join(f'{p:.0f}' for p in peaks)} MB RSS "
                  f"(target <= 600 MB)", flush=True)
        csv.unlink()
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows per recording (600 000; --files: 100 000)")
    parser.add_argument("--files", type=int, default=0, metavar="K",
                        help="measure the fan-out over K same-size recordings instead")
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
    parser.add_argument("--file", choices=["synthetic", "recorder"], default="synthetic",
                        help="synthetic: samples.write_sample's CSV; recorder: tiled from a "
                             "`twinlake sim record` recording")
    parser.add_argument("--memory", type=int, default=0, metavar="ROWS",
                        help="measure the peak RSS of one ingest of a ROWS-row CSV v2 instead")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="with --memory: also each Ray worker's peak, N copies at once")
    args = parser.parse_args()
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="twinlake-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.files:
        bench_fan_out(args, work)
        print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.memory:
        bench_memory(args.memory, work, args.workers)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        return
    args.rows = args.rows or 600_000
    csv = bench_file(args.file, args.rows, work)
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
