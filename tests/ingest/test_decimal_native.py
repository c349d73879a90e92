"""The C kernels of the decimal reader: built once into the cache directory (atomically,
named by the source's hash), loaded with ctypes, and replaced by numba's kernels when they
cannot be built or are switched off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from twinlake.ingest import decimal_csv, decimal_native
from twinlake.ingest.rawstore import read_raw
from twinlake.ingest.samples import SampleSpec, write_sample

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture
def fresh_load(monkeypatch, tmp_path):
    """`decimal_native.load` with its memo cleared, the cache in tmp_path/cache."""
    monkeypatch.setenv("TWINLAKE_CACHE_DIR", str(tmp_path / "cache"))
    decimal_native.load.cache_clear()
    yield decimal_native.load
    decimal_native.load.cache_clear()


@needs_cc
def test_built_once_into_the_cache_directory(fresh_load, tmp_path):
    kernel = fresh_load()
    assert kernel is not None
    built = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert built == [decimal_native.library_path().name]  # no temporary file left
    data = np.frombuffer(b"a\n1.5,2\n-3,4\n", np.uint8)
    assert kernel.count_newlines(data, 2, data.size) == 2
    floats, ints = np.zeros((1, 2)), np.zeros((1, 2), np.int64)
    assert kernel.parse_rows(data, 2, 2, 0, np.array([False, True]), floats, ints,
                             decimal_csv._POW10) == 2
    assert floats.tolist() == [[1.5, -3.0]] and ints.tolist() == [[2, 4]]
    mtime = decimal_native.library_path().stat().st_mtime_ns
    decimal_native.load.cache_clear()
    assert fresh_load() is not None
    assert decimal_native.library_path().stat().st_mtime_ns == mtime  # loaded, not rebuilt


def test_the_name_follows_the_source(monkeypatch, tmp_path):
    first = decimal_native.library_path()
    edited = tmp_path / "decimal_kernel.c"
    edited.write_bytes(decimal_native.SOURCE.read_bytes() + b"\n/* edited */\n")
    monkeypatch.setattr(decimal_native, "SOURCE", edited)
    assert decimal_native.library_path() != first


def test_no_compiler_or_switched_off_means_numba(fresh_load, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert fresh_load() is None
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    monkeypatch.delenv("CC")
    monkeypatch.setenv(decimal_native.SWITCH, "0")
    decimal_native.load.cache_clear()
    assert fresh_load() is None


def test_a_failed_build_leaves_nothing(fresh_load, monkeypatch, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(decimal_native, "SOURCE", broken)
    assert fresh_load() is None
    assert not any((tmp_path / "cache").iterdir())


_INGEST = """
import sys
import twinlake.ingest.fr3_stack.recording_csv as r
r.DECIMAL_MIN_BYTES = 0  # the compiled reader for this small file too
sys.argv = ["twinlake", "ingest", sys.argv[1], "--robot", "r", "--lake", sys.argv[2]]
from twinlake.cli import main
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("numba" in sys.modules)
"""


@needs_cc
def test_either_kernel_publishes_the_same_bytes(tmp_path):
    """Fresh processes, one with the C kernels, one with numba's: the same frames.parquet,
    and both keep the raw file byte for byte."""
    assert decimal_native.load() is not None
    csv = write_sample(tmp_path / "k.csv", SampleSpec(rows=3000, seed=8, nan_tau_rows=(9,)))
    runs = {}
    for name, switch in (("c", "1"), ("numba", "0")):
        env = dict(os.environ, **{decimal_native.SWITCH: switch})
        done = subprocess.run([sys.executable, "-c", _INGEST, str(csv), str(tmp_path / name)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == ("True" if name == "numba" else "False")
        runs[name] = tmp_path / name / "runs/robot=r/run=k"
    assert (runs["c"] / "frames.parquet").read_bytes() == \
        (runs["numba"] / "frames.parquet").read_bytes()
    for run in runs.values():
        assert read_raw(run / "raw/k.csv.zst") == csv.read_bytes()


def test_an_unwritable_cache_or_a_broken_library_means_numba(fresh_load, monkeypatch, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be\n")
    assert fresh_load() is None
    assert not decimal_native.is_built()
    blocker.unlink()
    blocker.mkdir()
    decimal_native.library_path().write_bytes(b"not a shared library")
    decimal_native.load.cache_clear()
    assert fresh_load() is None
