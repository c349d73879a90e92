"""Ingest throughput: `twinlake ingest` vs DuckDB's bare CSV → Parquet conversion.

Generates a 10-minute 1 kHz CSV v2 (600 000 rows, 80 columns, `%.12g`, as the fr3_stack
writer prints it), then measures in the same process and the same run:

  duckdb    COPY (FROM read_csv(csv)) TO frames.parquet (FORMAT parquet)
  twinlake  the full ingest pipeline: parse, canonicalise, pandera validation, run stats,
            SHA-256 + zstd copy of the raw file, Parquet write, fsync, atomic publish

twinlake runs once per `--raw-codec` (default: zstd, the CLI default, and none, a plain
kernel-side copy, to show what compressing the archive costs).

Each is run `--repeat` times (alternating, fresh output each time); the best wall time of
each is reported with rows/s and the ratio twinlake/duckdb (throughput; target >= 0.8),
plus the same ratio in process CPU seconds, which a busy shared machine disturbs less.

    python bench/ingest.py [--rows 600000] [--repeat 2] [--keep DIR]
                                          [--raw-codec zstd none]
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


def time_twinlake(csv: Path, lake_dir: Path, rows: int, codec: str) -> tuple[float, float]:
    """(wall s, process CPU s) of the full ingest pipeline."""
    wall, cpu = time.perf_counter(), time.process_time()
    [outcome] = list(ingest_paths(Lake(lake_dir), [csv], ReadOptions(robot="bench"),
                                  raw_codec=codec))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if outcome.status != "published" or outcome.frame_count != rows:
        raise SystemExit(f"twinlake ingest did not publish: {outcome.message}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: temp)")
    parser.add_argument("--raw-codec", nargs="+", default=["zstd", "none"],
                        choices=["zstd", "lz4", "none"],
                        help="codecs of the kept raw copy to measure (default: zstd none)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="twinlake-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    csv = work / "bench_run.csv"
    if not csv.exists() or sum(1 for _ in open(csv, "rb")) - 1 != args.rows:
        t0 = time.perf_counter()
        write_sample(csv, SampleSpec(rows=args.rows, seed=1))
        print(f"generated {csv} ({csv.stat().st_size / 1e6:.0f} MB, {args.rows} rows) "
              f"in {time.perf_counter() - t0:.1f} s")
    duck, twin = [], {codec: [] for codec in args.raw_codec}
    for i in range(args.repeat):
        out = work / f"duck{i}.parquet"
        duck.append(time_duckdb(csv, out))
        out.unlink()
        line = f"round {i + 1}: duckdb {duck[-1][0]:.2f} s (cpu {duck[-1][1]:.2f} s)"
        for codec in args.raw_codec:
            lake_dir = work / f"lake{i}-{codec}"
            twin[codec].append(time_twinlake(csv, lake_dir, args.rows, codec))
            shutil.rmtree(lake_dir)
            line += f", twinlake[{codec}] {twin[codec][-1][0]:.2f} s (cpu {twin[codec][-1][1]:.2f} s)"
        print(line, flush=True)
    d, dc = min(w for w, _ in duck), min(c for _, c in duck)
    print(f"duckdb   COPY read_csv -> parquet        : {args.rows / d:10,.0f} rows/s "
          f"(best {d:.2f} s wall, {dc:.2f} s cpu)")
    for codec, times in twin.items():
        t, tc = min(w for w, _ in times), min(c for _, c in times)
        print(f"twinlake ingest, raw copy {codec:>4}     : {args.rows / t:10,.0f} rows/s "
              f"(best {t:.2f} s wall, {tc:.2f} s cpu)  ratio {d / t:.2f}x wall, "
              f"{dc / tc:.2f}x cpu  (target >= 0.80)")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
