"""Lake layout, atomic publish (with a real two-process race), quarantine, hashing."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from twinlake.catalog import (
    Lake,
    PartitionExists,
    clean_staging,
    publish_partition,
    quarantine,
    resolve_lake,
    sha256_file,
)


def test_resolve_lake_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TWINLAKE_LAKE", raising=False)
    assert resolve_lake(None) == tmp_path / "lake"
    monkeypatch.setenv("TWINLAKE_LAKE", str(tmp_path / "env"))
    assert resolve_lake(None) == tmp_path / "env"
    assert resolve_lake(tmp_path / "arg") == tmp_path / "arg"


def test_partition_paths_and_id_checks(tmp_path):
    lake = Lake(tmp_path)
    assert lake.run_dir("fr3", "r1") == tmp_path / "runs" / "robot=fr3" / "run=r1"
    assert lake.fit_dir("f1") == tmp_path / "fits" / "fit=f1"
    for bad in ("../x", "a/b", "", ".hidden", "x" * 200, "a b"):
        with pytest.raises(ValueError, match="run id"):
            lake.run_dir("fr3", bad)


def test_sha256_file_matches_hashlib(tmp_path):
    path = tmp_path / "blob"
    data = bytes(range(256)) * 50_000
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def _writer(content: str):
    def write(d: Path) -> None:
        (d / "data.txt").write_text(content)

    return write


def test_publish_exists_replace_and_cleanup(tmp_path):
    lake = Lake(tmp_path)
    target = publish_partition(lake, "runs/robot=a/run=1", _writer("first"))
    assert (target / "data.txt").read_text() == "first"
    with pytest.raises(PartitionExists):
        publish_partition(lake, "runs/robot=a/run=1", _writer("second"))
    publish_partition(lake, "runs/robot=a/run=1", _writer("third"), replace=True)
    assert (target / "data.txt").read_text() == "third"

    def boom(d: Path) -> None:
        (d / "partial.txt").write_text("half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        publish_partition(lake, "runs/robot=a/run=2", boom)
    assert not (tmp_path / "runs/robot=a/run=2").exists()
    assert list(lake.staging_dir.iterdir()) == []
    with pytest.raises(ValueError, match="empty"):
        publish_partition(lake, "runs/robot=a/run=3", lambda d: None)
    with pytest.raises(ValueError):
        publish_partition(lake, "../outside", _writer("x"))


def _race(root: str, label: str, barrier, results) -> None:
    barrier.wait()
    try:
        publish_partition(root, "runs/robot=a/run=race", _writer(label))
        results.put(("won", label))
    except PartitionExists:
        results.put(("lost", label))


def test_two_processes_racing_publish_exactly_once(tmp_path):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), f"p{i}", barrier, results))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    assert [o[0] for o in outcomes] == ["lost", "won"]
    winner = outcomes[1][1]
    assert (tmp_path / "runs/robot=a/run=race/data.txt").read_text() == winner


def test_clean_staging_removes_only_dead_owners(tmp_path):
    lake = Lake(tmp_path)
    lake.staging_dir.mkdir(parents=True)
    dead = lake.staging_dir / "part-999999999-abc"
    dead.mkdir()
    import os

    alive = lake.staging_dir / f"part-{os.getpid()}-def"
    alive.mkdir()
    assert clean_staging(lake) == [dead]
    assert alive.exists() and not dead.exists()


def test_quarantine_copies_input_with_reason(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_bytes(b"seq,t_s\n1,")
    qdir = quarantine(tmp_path / "lake", [src], {"error": "bad.csv:2: truncated"})
    assert qdir.parent == tmp_path / "lake" / "_quarantine"
    assert (qdir / "bad.csv").read_bytes() == src.read_bytes()
    reason = json.loads((qdir / "reason.json").read_text())
    assert reason["error"] == "bad.csv:2: truncated" and "quarantined_at_utc" in reason


def test_published_parquet_is_readable(tmp_path):
    table = pa.table({"x": [1, 2, 3]})
    target = publish_partition(tmp_path, "fits/fit=f1",
                               lambda d: pq.write_table(table, d / "fit.parquet"))
    assert pq.read_table(target / "fit.parquet").equals(table)
