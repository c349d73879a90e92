"""`atomic_write_bytes` / `atomic_write_text`: the one atomic single-file write (checkpoints,
excitation metadata, ...): readers see the old or the new bytes, never a part, and a failed
write leaves the old file and no temporary behind."""

from __future__ import annotations

import threading

import pytest

from twinlake.catalog import atomic_write_bytes, atomic_write_text


def test_writes_and_replaces_leaving_no_temporary(tmp_path):
    path = tmp_path / "state.json"
    assert atomic_write_text(path, "{\"a\": 1}\n") == path
    assert path.read_text() == "{\"a\": 1}\n"
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    atomic_write_text(path, "é", encoding="latin-1")
    assert path.read_bytes() == b"\xe9"


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "checkpoint.pkl"
    path.write_bytes(b"old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pkl"]
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "missing-dir" / "x", b"x")


def test_a_concurrent_reader_never_sees_a_partial_file(tmp_path):
    path = tmp_path / "big.bin"
    versions = [bytes([v]) * (4 << 20) for v in (1, 2)]
    atomic_write_bytes(path, versions[0])
    seen: list[bool] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_bytes() in versions)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for k in range(20):
            atomic_write_bytes(path, versions[k % 2])
    finally:
        stop.set()
        reader.join()
    assert seen and all(seen)
