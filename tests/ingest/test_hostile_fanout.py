"""Under `--workers 2` a bad input beside good ones: the good ones are published and reported,
the bad one is quarantined with a one-line message, no traceback (one local Ray for the module,
joined by each fan-out; bags by rosbags' writer, `.npz` by numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from bag_writers import JOINT_STATE, T0_NS, Topic, joint_states, motion, store, write_ros2
from ingest_helpers import quarantined, runs_of

from twinlake.catalog import Lake

TS = store(2)
NAMES = [f"fr3_joint{j}" for j in range(1, 8)]
N = 300


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray of 2 CPUs for the module: `fan_out_paths` joins it and leaves it running.
    A Ray an earlier test left running in this process (fan_out_paths leaves its own) is joined
    as it is, and left to its owner."""
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    if ray.is_initialized():
        yield
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _bag(path, garbage_first: bool = False, seed: int = 0):
    from rosbags.rosbag2 import StoragePlugin, Writer

    msgs = joint_states(TS, [T0_NS + i * 1_000_000 for i in range(N)], NAMES, motion(N, 0.001, seed))
    if not garbage_first:
        return write_ros2(path, TS, [Topic("/joint_states", JOINT_STATE, msgs)])
    with Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3) as w:
        conn = w.add_connection("/joint_states", JOINT_STATE, typestore=TS)
        w.write(conn, msgs[0][0], b"\x00\x01\x00\x00" + bytes(range(7)))
        for t, m in msgs[1:]:
            w.write(conn, t, TS.serialize_cdr(m, JOINT_STATE))
    return path


def _cli(*args):
    from twinlake.cli import app

    return CliRunner().invoke(app, ["ingest", *map(str, args)])


def _check(res, lake: Lake, good: list[str], bad: str, *words: str) -> None:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and "RayTaskError" not in res.output
    for run in good:
        assert f": published fr3/{run}:" in res.output, res.output
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and f"{bad}:" in errors[0] and errors[0].endswith("(quarantined)")
    for word in words:
        assert word in errors[0]
    assert sorted(r["run"] for r in runs_of(lake)) == sorted(good)
    assert len(quarantined(lake)) == 1


def test_a_bag_that_does_not_decode_beside_good_ones(tmp_path, local_ray):
    day = tmp_path / "day"
    day.mkdir()
    _bag(day / "a", seed=1)
    _bag(day / "b", garbage_first=True)
    _bag(day / "c", seed=2)
    lake = Lake(tmp_path / "lake")
    res = _cli(day / "a", day / "b", day / "c", "--robot", "fr3", "--workers", "2", "--lake", lake.root)
    _check(res, lake, ["a", "c"], "b", "topic /joint_states: message 0")


def test_an_npz_of_objects_beside_good_ones(tmp_path, local_ray):
    t = np.arange(N, dtype=np.float64)
    q = np.tile(np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]), (N, 1))
    for name, arr in (("a", q), ("b", q.astype(object)), ("c", q + 0.01)):
        np.savez(tmp_path / f"{name}.npz", t=t, q=arr, dq=np.zeros_like(q))
    mapping = tmp_path / "map.toml"
    mapping.write_text('[time]\ncolumn = "t"\nunit = "ms"\n\n[columns]\nq = "q"\ndq = "dq"\n')
    lake = Lake(tmp_path / "lake")
    res = _cli(*(tmp_path / f"{n}.npz" for n in "abc"), "--mapping", mapping, "--robot", "fr3",
               "--workers", "2", "--lake", lake.root)
    _check(res, lake, ["a", "c"], "b.npz", "array 'q' cannot be read")


def test_serially_the_input_after_a_bad_one_is_still_ingested(tmp_path):
    t = np.arange(N, dtype=np.float64)
    q = np.tile(np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]), (N, 1))
    np.savez(tmp_path / "a.npz", t=t, q=q.astype(object), dq=np.zeros_like(q))
    np.savez(tmp_path / "b.npz", t=t, q=q + 0.01, dq=np.zeros_like(q))
    mapping = tmp_path / "map.toml"
    mapping.write_text('[time]\ncolumn = "t"\nunit = "ms"\n\n[columns]\nq = "q"\ndq = "dq"\n')
    lake = Lake(tmp_path / "lake")
    res = _cli(tmp_path / "a.npz", tmp_path / "b.npz", "--mapping", mapping, "--robot", "fr3",
               "--lake", lake.root)
    _check(res, lake, ["b"], "a.npz", "array 'q' cannot be read")
