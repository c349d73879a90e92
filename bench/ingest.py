"""Ingest throughput: `twinlake ingest` vs DuckDB's bare CSV → Parquet conversion.

Generates a 10-minute 1 kHz CSV v2 (600 000 rows, 80 columns, `%.12g`, as the fr3_stack
writer prints it), then measures in the same process and the same run:

  duckdb    COPY (FROM read_csv(csv)) TO frames.parquet (FORMAT parquet)
  twinlake  the full ingest pipeline: parse, canonicalise, pandera validation, run stats,
            SHA-256 + zstd copy of the raw file, Parquet write, fsync, atomic publish

Each is run `--repeat` times (alternating, fresh output each time); the best wall time of
each is reported with rows/s and the ratio twinlake/duckdb (throughput; target >= 0.8),
plus the same ratio in process CPU seconds, which a busy shared machine disturbs less.

    /work/venv/bin/python bench/ingest.py [--rows 600000] [--repeat 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import duckdb

from twinlake.catalog import Lake
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


def time_twinlake(csv: Path, lake_dir: Path, rows: int) -> tuple[float, float]:
    """(wall s, process CPU s) of the full ingest pipeline."""
    wall, cpu = time.perf_counter(), time.process_time()
    [outcome] = list(ingest_paths(Lake(lake_dir), [csv], ReadOptions(robot="bench")))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if outcome.status != "published" or outcome.frame_count != rows:
        raise SystemExit(f"twinlake ingest did not publish: {outcome.message}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: temp)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="twinlake-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    csv = work / "bench_run.csv"
    if not csv.exists() or sum(1 for _ in open(csv, "rb")) - 1 != args.rows:
        t0 = time.perf_counter()
        write_sample(csv, SampleSpec(rows=args.rows, seed=1))
        print(f"generated {csv} ({csv.stat().st_size / 1e6:.0f} MB, {args.rows} rows) "
              f"in {time.perf_counter() - t0:.1f} s")
    duck, twin = [], []
    for i in range(args.repeat):
        out = work / f"duck{i}.parquet"
        duck.append(time_duckdb(csv, out))
        out.unlink()
        lake_dir = work / f"lake{i}"
        twin.append(time_twinlake(csv, lake_dir, args.rows))
        shutil.rmtree(lake_dir)
        print(f"round {i + 1}: duckdb {duck[-1][0]:.2f} s (cpu {duck[-1][1]:.2f} s), "
              f"twinlake {twin[-1][0]:.2f} s (cpu {twin[-1][1]:.2f} s)")
    d, t = min(w for w, _ in duck), min(w for w, _ in twin)
    dc, tc = min(c for _, c in duck), min(c for _, c in twin)
    print(f"duckdb   COPY read_csv -> parquet              : {args.rows / d:10,.0f} rows/s "
          f"(best {d:.2f} s wall, {dc:.2f} s cpu)")
    print(f"twinlake ingest (validated, hashed, published): {args.rows / t:10,.0f} rows/s "
          f"(best {t:.2f} s wall, {tc:.2f} s cpu)")
    print(f"ratio twinlake/duckdb throughput: {d / t:.2f}x wall (target >= 0.80); "
          f"{dc / tc:.2f}x in CPU seconds (less sensitive to a busy machine)")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
