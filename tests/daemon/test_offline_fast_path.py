"""The offline recorder's fast path agrees with the daemon's per-tick frames; batch formatting."""

import numpy as np

from twinlake.daemon import csv_v2 as C
from twinlake.daemon.noise import NoiseConfig
from twinlake.daemon.offline import BATCH_ROWS, _simulate
from twinlake.daemon.plantloop import RobotTicker
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
