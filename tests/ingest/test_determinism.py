"""Same input, same bytes, on a recording large enough to span several CSV parse blocks."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq

from twinlake.ingest.rawstore import read_raw


def test_multi_block_recording_gives_same_frames_and_archive_bytes(ingest, make_csv, tmp_path):
    path = make_csv("big.csv", rows=5000, gap_at=(1234,), nan_tau_rows=(4321,))
    assert path.stat().st_size > 3 * (1 << 20)  # several 1 MiB parse blocks
    parts = []
    for name in ("l1", "l2"):
        assert ingest(path, "--robot", "r", lake_dir=tmp_path / name).exit_code == 0
        parts.append(tmp_path / name / "runs/robot=r/run=big")
    for file in ("frames.parquet", "raw/big.csv.zst"):
        assert (parts[0] / file).read_bytes() == (parts[1] / file).read_bytes(), file
    assert read_raw(parts[0] / "raw/big.csv.zst") == path.read_bytes()
    run = pq.read_table(parts[0] / "run.parquet").to_pylist()[0]
    assert run["raw_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    frames = pq.read_table(parts[0] / "frames.parquet")
    assert frames.num_rows == 5000
    assert frames.column("seq").to_pylist()[1234:1236] == [1234, 1237]
    assert frames.column("tau_J1")[4321].as_py() != frames.column("tau_J1")[4321].as_py()  # NaN
