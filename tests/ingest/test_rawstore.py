"""The raw archive: byte-exact, hashed, and the same bytes whatever the number of
compressing threads (frames are compressed in parallel but written in input order)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pytest

from twinlake.ingest.rawstore import ZSTD_LEVEL, read_raw, store_file

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _blob(tmp_path, size: int):
    src = tmp_path / "blob.csv"
    rng = np.random.default_rng(7)
    text = "\n".join(",".join(f"{v:.12g}" for v in row) for row in rng.normal(size=(size // 200, 10)))
    src.write_bytes(text.encode()[:size])
    return src, src.read_bytes()


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_same_archive_bytes_for_any_thread_count(tmp_path, codec):
    src, data = _blob(tmp_path, 700_000)
    archives = []
    for threads in (1, 2, 3):
        raw_dir = tmp_path / f"raw{threads}"
        raw_dir.mkdir()
        stored = store_file(src, raw_dir, "recording", codec, chunk_bytes=65_536, threads=threads)
        assert stored.sha256 == hashlib.sha256(data).hexdigest()
        assert stored.size_bytes == len(data)
        archives.append((tmp_path / f"raw{threads}" / stored.stored_as.split("/", 1)[1]))
    first = archives[0].read_bytes()
    assert len(first) < 0.9 * len(data)  # compressed, not copied
    for other in archives[1:]:
        assert other.read_bytes() == first
    assert read_raw(archives[0]) == data


def test_zstd_archive_is_independent_frames_at_the_chosen_level(tmp_path):
    src, data = _blob(tmp_path, 300_000)
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    stored = store_file(src, raw_dir, "recording", "zstd", chunk_bytes=65_536, threads=2)
    archive = (tmp_path / stored.stored_as).read_bytes()
    frames = [pa.Codec("zstd", ZSTD_LEVEL).compress(data[i:i + 65_536], asbytes=True)
              for i in range(0, len(data), 65_536)]
    assert archive == b"".join(frames)  # decodable frame by frame by any zstd reader
    assert archive.count(_ZSTD_MAGIC) >= len(frames)


def test_empty_file_archives_to_an_empty_stream(tmp_path):
    src = tmp_path / "empty.csv"
    src.write_bytes(b"")
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    stored = store_file(src, raw_dir, "recording", "zstd", threads=2)
    assert stored.sha256 == hashlib.sha256(b"").hexdigest()
    assert read_raw(tmp_path / stored.stored_as) == b""
