"""The offline recorder's fast path agrees with the daemon's per-tick frames; batch formatting."""

import os

import numpy as np
import pytest

from twinlake.daemon import csv_v2 as C
from twinlake.daemon.noise import NoiseConfig
from twinlake.daemon.offline import BATCH_ROWS, CHUNK_ROWS, _CsvSink, _simulate, _simulate_compiled
from twinlake.daemon.plantloop import CommandTable, RobotTicker
from twinlake.sim import HOME_Q, DynamicsParams, IdleCommand, JointImpedanceCommand, JointImpedanceConfig


class _Collect:
    def __init__(self):
        self.rows = []

    def put(self, rows):
        self.rows.append(rows.copy())


def _schedule(n: int):
    cfg = JointImpedanceConfig(filter_alpha=0.2)
    plan = [(t, JointImpedanceCommand(HOME_Q + 0.02 * np.sin(t / 90.0 + np.arange(7)), cfg)) for t in range(5, n, 17)]
    plan.insert(40, (plan[39][0] + 1, IdleCommand()))  # a mode switch: config columns change, reset count
    return plan


def test_offline_batches_equal_the_daemon_step_frames():
    n = BATCH_ROWS + 300  # crosses a batch boundary
    params, noise = DynamicsParams.nominal(), NoiseConfig()
    first = JointImpedanceCommand(HOME_Q)
    daemon, offline = RobotTicker(params, noise, 5, q0=HOME_Q), RobotTicker(params, noise, 5, q0=HOME_Q)
    by_tick = {}
    for tick, cmd in _schedule(n):
        by_tick[tick] = cmd
    frames = np.empty((n, C.FRAME_WIDTH))
    for k in range(n):
        frames[k] = daemon.step(first if k == 0 else by_tick.get(k))
        frames[k, C.SEQ.start], frames[k, C.T_S.start] = k, k * 0.001
    sink = _Collect()
    _simulate(offline, n, first, iter(_schedule(n)), sink, None)
    rows = np.concatenate(sink.rows)
    assert [len(r) for r in sink.rows] == [BATCH_ROWS, 300]
    quat = slice(C.EE_POSE.start + 3, C.EE_POSE.stop)  # daemon: mju_mat2Quat; offline: vectorised, round-off apart
    exact = np.ones(C.FRAME_WIDTH, dtype=bool)
    exact[quat] = False
    np.testing.assert_array_equal(rows[:, exact], frames[:, exact])
    np.testing.assert_allclose(rows[:, quat], frames[:, quat], rtol=0, atol=1e-12)
    assert set(rows[:, C.CONTROLLER.start]) == {0.0, 2.0} and rows[-1, C.JOINT_RESET_COUNT.start] == 2


def test_the_whole_run_compiled_loop_equals_the_per_command_path_across_mode_switches():
    n = CHUNK_ROWS + 700  # crosses a chunk boundary
    params, noise = DynamicsParams.nominal(), NoiseConfig()
    first = JointImpedanceCommand(HOME_Q)
    plan = _schedule(n)
    plan.insert(80, (plan[79][0], IdleCommand()))  # two commands due at one tick: the latest wins
    plan.insert(120, (plan[119][0] + 2, IdleCommand()))
    per_command, compiled = RobotTicker(params, noise, 9, q0=HOME_Q), RobotTicker(params, noise, 9, q0=HOME_Q)
    expected, got = _Collect(), _Finishing()
    _simulate(per_command, n, first, iter(plan), expected, None)
    table = CommandTable([0] + [t for t, _ in plan], [first] + [c for _, c in plan])
    assert _simulate_compiled(compiled, n, table, got, None)
    rows, want = np.concatenate(got.rows), np.concatenate(expected.rows)
    assert [len(r) for r in got.rows] == [CHUNK_ROWS, 700]  # one compiled call per chunk
    np.testing.assert_array_equal(rows, want)
    assert rows[-1, C.JOINT_RESET_COUNT.start] == 4 and set(rows[:, C.CONTROLLER.start]) == {0.0, 2.0}
    assert compiled.sim.reset_count == per_command.sim.reset_count == 4  # the state is handed back
    np.testing.assert_array_equal(compiled.sim.controller_state(), per_command.sim.controller_state())
    np.testing.assert_array_equal(compiled.sim.ema, per_command.sim.ema)


class _Finishing(_Collect):
    def put(self, rows, finish=None, *args):
        if finish is not None:
            finish(rows, *args)
        super().put(rows)


def _plain(rows: np.ndarray) -> str:
    out = []
    for row in rows.tolist():
        out.append(",".join(("%d" % v) if c in C.INT_COLUMNS else ("%.12g" % v) for c, v in zip(C.COLUMNS, row)))
    return "".join(line + "\n" for line in out)


def test_format_rows_with_constant_columns_matches_per_value_formatting():
    rng = np.random.default_rng(1)
    rows = C.empty_frames(6)
    rows[:, C.Q] = rng.normal(size=(6, 7)) * 10.0 ** rng.integers(-8, 8, size=(6, 7))
    rows[:, C.K_JOINT] = 600.0  # constant columns baked into the template
    rows[:, C.SEQ.start] = np.arange(6)
    rows[:, C.DQ.start] = [0.0, -0.0, 0.0, 0.0, -0.0, 0.0]  # equal but printed differently
    rows[:, C.DQ.start + 1] = np.nan  # NaN never compares equal
    rows[2, C.DQ.start + 2] = np.inf
    rows[:, C.TAU_J.start] = 1e-300
    for batch in (rows, rows[:1], rows[3:5]):
        assert C.format_rows(batch) == _plain(batch)


def test_the_csv_sink_writes_in_order_and_reports_a_failed_write(tmp_path):
    rows = C.empty_frames(5)
    rows[:, C.SEQ.start] = np.arange(5)
    path = tmp_path / "out.csv"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    with _CsvSink(fd) as sink:
        sink.put(rows[:3].copy())
        sink.put(rows[3:].copy())
    os.close(fd)
    assert path.read_bytes() == C.format_rows(rows).encode()
    fd = os.open(path, os.O_RDONLY)  # a write that fails surfaces in the caller, not lost in the thread
    with pytest.raises(OSError):
        with _CsvSink(fd) as sink:
            sink.put(rows.copy())
            sink.flush()
    os.close(fd)
