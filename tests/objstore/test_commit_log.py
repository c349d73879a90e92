"""The commit log on both stores: a local directory and a bucket of the test run's local S3
server (moto over HTTP, tests/s3_server.py). A version is written only if absent (S3
`If-None-Match: *`, locally a hard link), so of two writers of one version exactly one wins;
the loser catches up and takes the next version, or is refused if the winner published the
same partition."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from twinlake.catalog import open_lake
from twinlake.catalog.commit_log import CommitLog, LogFile, PartitionCommitted, Snapshot, entry_name
from twinlake.catalog.object_publish import STAGING_DIR, _write_lease, reclaim_staging, upload_tree
from twinlake.catalog.object_store import LocalStore, store_for

FILES = (LogFile("run.parquet", 10, "abc"),)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStore(tmp_path / "lake")
    s3_lake = request.getfixturevalue("s3_lake")
    return store_for(open_lake(s3_lake).location)


def test_a_version_is_created_once(store):
    assert store.put_new("_log/x.json", b"first") is True
    assert store.put_new("_log/x.json", b"second") is False
    assert store.read("_log/x.json") == b"first"
    assert store.list_names("_log") == ["x.json"]


def test_versions_fold_into_snapshots(store):
    log = CommitLog(store)
    a = log.commit("runs/robot=r/run=a", "runs/robot=r/run=a/c-1", FILES)
    b = log.commit("runs/robot=r/run=b", "runs/robot=r/run=b/c-2", FILES)
    c = log.commit("runs/robot=r/run=a", "runs/robot=r/run=a/c-3", FILES, replace=True)
    assert [a.version, b.version, c.version] == [1, 2, 3] and c.replace and not a.replace
    assert log.versions() == [1, 2, 3]
    at1, now = log.snapshot(1), log.snapshot()
    assert sorted(at1.partitions) == ["runs/robot=r/run=a"]
    assert now.partitions["runs/robot=r/run=a"].data_dir == "runs/robot=r/run=a/c-3"
    assert now.committed_dirs == {"runs/robot=r/run=a/c-1", "runs/robot=r/run=b/c-2", "runs/robot=r/run=a/c-3"}
    with pytest.raises(PartitionCommitted, match="version 3"):
        log.commit("runs/robot=r/run=a", "runs/robot=r/run=a/c-4", FILES)
    with pytest.raises(ValueError, match="latest: 3"):
        log.snapshot(7)


def test_a_writer_that_lost_its_version_catches_up(store):
    log = CommitLog(store)
    stale = log.snapshot()  # both writers saw version 0
    log.commit("runs/robot=r/run=a", "runs/robot=r/run=a/c-1", FILES, snap=log.snapshot())
    late = log.commit("runs/robot=r/run=b", "runs/robot=r/run=b/c-2", FILES, snap=stale)
    assert late.version == 2  # version 1 was refused to it: it read the winner and took 2
    stale = log.snapshot(1)
    log.commit("runs/robot=r/run=c", "runs/robot=r/run=c/c-3", FILES)
    with pytest.raises(PartitionCommitted):  # the winner of version 2 published this partition
        log.commit("runs/robot=r/run=b", "runs/robot=r/run=b/c-4", FILES, snap=stale)
    assert store.read(entry_name(5)) is None


def test_expired_leases_are_reclaimed_committed_data_never(s3_lake, tmp_path):
    lake = open_lake(s3_lake)
    store = store_for(lake.location)
    local = tmp_path / "part"
    (local / "raw").mkdir(parents=True)
    (local / "frames.parquet").write_bytes(b"x" * 100)
    (local / "raw" / "a.zst").write_bytes(b"y")
    for name in ("c-orphan", "c-kept"):
        _write_lease(store, name, "runs/robot=r/run=a", f"runs/robot=r/run=a/{name}")
        upload_tree(store, local, f"runs/robot=r/run=a/{name}")
    CommitLog(store).commit("runs/robot=r/run=a", "runs/robot=r/run=a/c-kept", FILES)
    assert reclaim_staging(lake) == []  # leases still running: nothing touched
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert reclaim_staging(lake, now=later) == ["runs/robot=r/run=a/c-orphan"]
    assert store.list_names("runs/robot=r/run=a") == ["c-kept"]
    assert store.list_names("runs/robot=r/run=a/c-kept") == ["frames.parquet", "raw"]
    assert store.list_names(STAGING_DIR) == []


def test_checkpoints_give_the_same_snapshots(store, monkeypatch):
    from twinlake.catalog import commit_log

    monkeypatch.setattr(commit_log, "CHECKPOINT_EVERY", 3)
    log = CommitLog(store)
    for i in range(7):
        log.commit(f"runs/robot=r/run=x{i % 5}", f"runs/robot=r/run=x{i % 5}/c-{i}", FILES, replace=True)
    assert store.list_names(commit_log.CHECKPOINT_DIR) == [entry_name(3)[5:], entry_name(6)[5:]]
    assert log.latest() == 7 and log.versions(after=5) == [6, 7]
    for as_of in (None, 2, 3, 5, 6):
        got, want = log.snapshot(as_of), Snapshot()
        for commit in log.read(list(range(1, (as_of or 7) + 1))):  # the fold of every entry
            want.apply(commit)
        assert (got.version, got.partitions, got.committed_dirs) == (want.version, want.partitions,
                                                                     want.committed_dirs), as_of
