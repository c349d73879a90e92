"""Benchmark: a lake on object storage beside a local lake, and the commit log as it grows.

Starts a local S3-compatible server (moto's standalone server, `python -m moto.server`, from
the `test` extra) on 127.0.0.1 and points the AWS environment variables at it, so the lake is
reached over HTTP exactly as AWS would be (the numbers are those of a server on the same
machine: no network latency, moto's own per-request cost). In the same run:

  ingest     one recording of `--minutes` at 1 kHz (CSV v2 with its status companion),
             ingested in this process (`ingest_paths`) into a fresh local lake and into a
             fresh `s3://` prefix, alternating, `--repeat` times; best wall time of each and
             the ratio s3 / local
  intervals  one run's clean intervals: `connect` + `clean_intervals(con, robot, run)` (the
             local lake reads its stored intervals.parquet; the bucket queries by the rules
             over Arrow datasets), and on an open connection; best of `--repeat`
  log        for each `--runs` size, a bucket lake of that many runs (log entries PUT straight,
             each naming one uploaded 6 000-tick run's files; the checkpoint every 100
             versions as writers leave it), then: a fresh snapshot (the latest checkpoint +
             the entries after it) against the peer fold of every entry (what a log without
             checkpoints reads), `connect`, one run's frames (`WHERE run = ...`), one commit
  local log  the cost a local lake's publish now pays for its log entry: `--local-runs` tiny
             partitions published, the time inside `append_local_commit` against the whole
             publish, over the first and the last tenth
  catalog    for each `--catalog-runs` size N, a bucket lake of N runs synthesised cheaply: one
             small ingested run's files uploaded once, every run a partition naming them, and
             the log as a reader meets it after N publishes (the checkpoint at N that the
             writer of version N leaves: one PUT instead of N; entries 1..N are never read by
             a reader); then the real read paths: the snapshot, `connect` (Arrow datasets of
             every run's files), one run's frames, one more commit, and a fit's session
             (`catalog/session.py`: the local copy, here with the files cached, as on a host's
             second command) with `connect` over it, the peer: the local lake of the same N runs

    python bench/object_lake.py [--minutes 1] [--repeat 3] [--runs 100,1000,10000] [--local-runs 1000]
    python bench/object_lake.py --only-catalog --catalog-runs 1000,3000,10000

The 1-minute load average is printed before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROBOT = "bench"


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    os.environ.update({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "bench",
                       "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_EC2_METADATA_DISABLED": "true"})
    return proc, f"http://127.0.0.1:{port}"


def new_bucket() -> str:
    import boto3

    name = f"bench-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def bench_ingest(args, work: Path) -> None:
    from twinlake.catalog import connect, open_lake
    from twinlake.catalog.intervals import clean_intervals
    from twinlake.ingest import ingest_paths
    from twinlake.ingest.registry import ReadOptions
    from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

    rows = int(args.minutes * 60_000)
    csv = work / "rec.csv"
    write_sample(csv, SampleSpec(rows=rows, seed=1), status=complete_status(csv, rows))
    options = ReadOptions(robot=ROBOT)
    list(ingest_paths(open_lake(str(work / "warm")), [csv], options))  # compile, import, page cache
    best = {"local": [], "s3": []}
    lakes = {}
    for i in range(args.repeat):
        for kind in ("local", "s3"):
            lake = open_lake(str(work / f"local{i}") if kind == "local" else f"s3://{new_bucket()}/lake")
            t0 = time.perf_counter()
            outcomes = list(ingest_paths(lake, [csv], options))
            best[kind].append(time.perf_counter() - t0)
            assert [o.status for o in outcomes] == ["published"], outcomes
            lakes[kind] = lake
    for kind in ("local", "s3"):
        print(f"ingest {kind:5s}: {min(best[kind]):.3f} s best of {args.repeat} ({rows} rows)")
    print(f"ingest s3 / local: {min(best['s3']) / min(best['local']):.2f}x")
    for kind, lake in lakes.items():
        fresh, warm = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            con = connect(lake)
            got = clean_intervals(con, ROBOT, "rec")
            fresh.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            again = clean_intervals(con, ROBOT, "rec")
            warm.append(time.perf_counter() - t0)
            assert got.num_rows == again.num_rows >= 1
        print(f"intervals {kind:5s}: connect + one run {min(fresh) * 1e3:.1f} ms, open connection "
              f"{min(warm) * 1e3:.1f} ms ({got.num_rows} intervals)")


def bench_log(sizes: list[int], work: Path) -> None:
    """For each size, a bucket lake of that many runs: entries written straight to the log
    (PUTs, no listing: moto lists in time proportional to the bucket's keys, which S3 does
    not), all pointing at one uploaded run's files, with the checkpoint a writer would
    have left at the last multiple of 100; then the read side and one commit."""
    from twinlake.catalog import connect, open_lake
    from twinlake.catalog.commit_log import CHECKPOINT_EVERY, Commit, CommitLog, Snapshot, entry_name
    from twinlake.catalog.object_publish import _log_files
    from twinlake.catalog.object_store import store_for, upload_tree
    from twinlake.ingest import ingest_paths
    from twinlake.ingest.registry import ReadOptions
    from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

    csv = work / "small.csv"
    write_sample(csv, SampleSpec(rows=6000, seed=2), status=complete_status(csv, 6000))
    local = open_lake(str(work / "one"))
    list(ingest_paths(local, [csv], ReadOptions(robot=ROBOT)))
    part_dir = local.run_dir(ROBOT, "small")
    files = _log_files(part_dir)
    for size in sizes:
        lake = open_lake(f"s3://{new_bucket()}/lake")
        store = store_for(lake.location)
        upload_tree(store, part_dir, "data/c-shared")
        log, snap = CommitLog(store), Snapshot()
        t0 = time.perf_counter()
        for i in range(1, size + 1):
            commit = Commit(i, f"runs/robot={ROBOT}/run=r{i:05d}", "data/c-shared", files)
            store.put_new(entry_name(i), commit.to_json())
            snap.apply(commit)
            if i % CHECKPOINT_EVERY == 0:
                log.write_checkpoint(snap)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        fast = log.snapshot()
        fast_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = Snapshot()
        for commit in log.read(list(range(1, size + 1))):
            full.apply(commit)
        full_s = time.perf_counter() - t0
        assert fast.partitions == full.partitions and fast.version == size
        t0 = time.perf_counter()
        con = connect(lake)
        connect_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        (n,) = con.execute(f"select count(*) from frames where run = 'r{size // 2:05d}'").fetchone()
        query_s = time.perf_counter() - t0
        assert n == 6000
        t0 = time.perf_counter()
        log.commit(f"runs/robot={ROBOT}/run=extra", "data/c-shared", files)
        one_s = time.perf_counter() - t0
        print(f"log {size:6d} runs: snapshot {fast_s * 1e3:8.1f} ms (checkpoint + {size % CHECKPOINT_EVERY} "
              f"entries), peer fold of every entry {full_s * 1e3:9.1f} ms ({full_s / fast_s:.1f}x); connect "
              f"{connect_s * 1e3:7.1f} ms, one run's frames {query_s * 1e3:7.1f} ms, one more commit "
              f"{one_s * 1e3:6.1f} ms (writing the log: {build_s:.1f} s)")


def bench_local_log(runs: int, work: Path) -> None:
    """`runs` tiny partitions published into a local lake; the time inside
    `append_local_commit` against the whole publish, over the first and the last tenth."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from twinlake.catalog import Lake, local_log, publish_partition

    lake = Lake(work / "locallog")
    table = pa.table({"x": [1]})
    inside, whole = [], []
    original = local_log.append_local_commit

    def timed(*a, **kw):
        t0 = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            inside.append(time.perf_counter() - t0)

    local_log.append_local_commit = timed
    try:
        for i in range(runs):
            t0 = time.perf_counter()
            publish_partition(lake, f"fits/fit=f{i:05d}", lambda d: pq.write_table(table, d / "fit.parquet"))
            whole.append(time.perf_counter() - t0)
    finally:
        local_log.append_local_commit = original
    tenth = max(1, runs // 10)
    for label, sl in (("first", slice(0, tenth)), ("last", slice(runs - tenth, runs))):
        log_ms, pub_ms = sum(inside[sl]) / tenth * 1e3, sum(whole[sl]) / tenth * 1e3
        print(f"local log, {label} {tenth} of {runs} publishes: log entry {log_ms:.2f} ms of a "
              f"{pub_ms:.2f} ms publish ({log_ms / pub_ms:.0%})")


def bench_catalog(sizes: list[int], work: Path) -> None:
    """The catalog's cost on a bucket lake of N runs (see the module docstring, `catalog`)."""
    from twinlake.catalog import connect, open_lake
    from twinlake.catalog.commit_log import Commit, CommitLog, Snapshot
    from twinlake.catalog.object_publish import _log_files
    from twinlake.catalog.object_store import store_for, upload_tree
    from twinlake.catalog.session import open_session
    from twinlake.ingest import ingest_paths
    from twinlake.ingest.registry import ReadOptions
    from twinlake.ingest.samples import SampleSpec, complete_status, write_sample

    csv = work / "tiny.csv"
    write_sample(csv, SampleSpec(rows=200, seed=3), status=complete_status(csv, 200))
    local = open_lake(str(work / "tiny"))
    list(ingest_paths(local, [csv], ReadOptions(robot=ROBOT)))
    part_dir = local.run_dir(ROBOT, "tiny")
    files = tuple(f for f in _log_files(part_dir) if not f.name.startswith("raw/"))
    for size in sizes:
        lake = open_lake(f"s3://{new_bucket()}/lake")
        store = store_for(lake.location)
        upload_tree(store, part_dir, "data/c-shared")
        snap = Snapshot()
        for i in range(1, size + 1):
            snap.apply(Commit(i, f"runs/robot={ROBOT}/run=r{i:05d}", "data/c-shared", files))
        log = CommitLog(store)
        log.write_checkpoint(snap)
        t = {}
        t0 = time.perf_counter()
        assert log.snapshot().version == size
        t["snapshot"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        con = connect(lake)
        t["connect"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        (n,) = con.execute(f"select count(*) from frames where run = 'r{size // 2:05d}'").fetchone()
        t["frames"] = time.perf_counter() - t0
        assert n == 200
        t0 = time.perf_counter()
        log.commit(f"runs/robot={ROBOT}/run=extra", "data/c-shared", files)
        t["commit"] = time.perf_counter() - t0
        open_session(lake.location).close()  # the first one downloads the (shared) files
        t0 = time.perf_counter()
        session = open_session(lake.location)
        t["session"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        local_con = connect(session.root)
        t["local connect"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        (m,) = local_con.execute(f"select count(*) from frames where run = 'r{size // 2:05d}'").fetchone()
        t["local frames"] = time.perf_counter() - t0
        session.close()
        assert m == 200
        print(f"catalog {size:6d} runs (load {os.getloadavg()[0]:.1f}): snapshot {t['snapshot'] * 1e3:7.1f} ms, "
              f"connect {t['connect'] * 1e3:8.1f} ms (local lake of the same runs {t['local connect'] * 1e3:7.1f} ms: "
              f"{t['connect'] / t['local connect']:.2f}x), one run's frames {t['frames'] * 1e3:6.1f} ms "
              f"(local {t['local frames'] * 1e3:6.1f} ms), one more commit {t['commit'] * 1e3:6.1f} ms, "
              f"a session's local copy (files cached) {t['session']:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", default="100,1000,10000")
    parser.add_argument("--local-runs", type=int, default=1000, help="publishes of the local-log part")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--catalog-runs", default="1000,3000,10000", help="lake sizes of the catalog part")
    parser.add_argument("--only-catalog", action="store_true", help="only the catalog part")
    args = parser.parse_args()
    sizes = [int(x) for x in args.runs.split(",") if x]
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f}")
    proc, endpoint = start_server()
    print(f"S3 server: moto at {endpoint}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if not args.only_catalog:
                if not args.skip_ingest:
                    bench_ingest(args, Path(tmp))
                bench_local_log(args.local_runs, Path(tmp))
                bench_log(sizes, Path(tmp))
            bench_catalog([int(x) for x in args.catalog_runs.split(",") if x], Path(tmp))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
