"""The offline recorder's compiled tick loop writes the bytes of the daemon's tick-by-tick path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from twinlake.daemon import csv_v2 as C
from twinlake.daemon.client import DEFAULT_D_JOINT, DEFAULT_FILTER_ALPHA, DEFAULT_K_JOINT
from twinlake.daemon.excitation import Plan
from twinlake.daemon.excite_files import read_reference_csv
from twinlake.daemon.noise import NoiseConfig
from twinlake.daemon.offline import _command_ticks, record_offline
from twinlake.daemon.plantloop import TICK_S, RobotTicker, quat_xyzw_from_mats, sim_command
from twinlake.daemon.wire import JointImpedanceCommand as WireJoint
from twinlake.sim import DEMO_PROFILE_PATH, NO_LOAD, EndLoad, JointImpedanceCommand, load_params, save_profile
from twinlake.sim.kernels.arm_loop import step_functions
from twinlake.synthetic import SyntheticRun, write_reference

TAIL_S = 0.3


def _per_tick_recording(reference, truth, seed, configured_load) -> bytes:
    """The recording as the daemon's RobotTicker.step makes it, one tick at a time (the reference path)."""
    t_ref, q_ref = read_reference_csv(reference)
    ticks = _command_ticks(t_ref)
    by_tick = {}
    for tick, q in zip(ticks.tolist(), q_ref):  # latest wins
        by_tick[tick] = sim_command(WireJoint(q, np.asarray(DEFAULT_K_JOINT, float), np.asarray(DEFAULT_D_JOINT, float),
                                              float(DEFAULT_FILTER_ALPHA), False))
    n = int(ticks[-1] + round(TAIL_S / TICK_S)) + 1
    robot = RobotTicker(truth, NoiseConfig(), seed, q0=q_ref[0], configured_load=configured_load)
    rows, xmats = C.empty_frames(n), np.zeros((n, 9))
    for k in range(n):
        command = by_tick.get(k)
        if k == 0:
            command = command or JointImpedanceCommand(robot.sim.q)
        robot.step(command, out=rows[k], ee_xmat_out=xmats[k])
    rows[:, C.EE_POSE.start + 3:C.EE_POSE.stop] = quat_xyzw_from_mats(xmats)
    rows[:, C.SEQ.start] = np.arange(n)
    rows[:, C.T_S.start] = rows[:, C.SEQ.start] * TICK_S
    rows[:, C.ROBOT_TIME_S.start] = rows[:, C.SEQ.start] * TICK_S
    return (C.HEADER + "".join(C.format_rows(rows[i:i + 1000]) for i in range(0, n, 1000))).encode()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    plan = Plan(mode="multisine", joints=tuple(range(1, 8)), seconds=5.0, ramp=1.0, hold=0.5)
    return write_reference(SyntheticRun("loop", plan, tail_s=0.0), tmp_path_factory.mktemp("ref") / "reference.csv")


def test_the_compiled_loop_is_available():
    assert step_functions() is not None  # else the recorder silently steps tick by tick


@pytest.mark.parametrize("case", ["demo", "payload", "bias_and_asymmetry", "joint_delays"])
def test_a_5s_multisine_recording_is_byte_identical_to_the_per_tick_path(tmp_path, reference, case):
    truth, payload, configured, truth_path = load_params(DEMO_PROFILE_PATH), None, NO_LOAD, None
    if case == "payload":
        payload, configured = EndLoad(1.2, (0.01, 0.0, 0.06)), EndLoad(0.8, (0.0, 0.0, 0.04))
        truth = truth.with_payload(payload)
    if case == "bias_and_asymmetry":
        truth = dataclasses.replace(truth, tau_bias=np.linspace(-0.4, 0.5, 7), coulomb_asymmetry=np.full(7, 0.08))
        truth_path = str(save_profile(truth, tmp_path / "truth.json"))
    if case == "joint_delays":  # per-joint delays 2, 2, 3, 2, 1, 2, 2 ms from the profile JSON
        truth = dataclasses.replace(truth, motor_delay_offset_ms=np.array([0, 0, 1, 0, -1, 0, 0]))
        truth_path = str(save_profile(truth, tmp_path / "truth.json"))
        assert load_params(truth_path).joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    result = record_offline(reference, tmp_path / "rec.csv", truth_path=truth_path, seed=11, tail_s=TAIL_S,
                            payload=payload, configured_load=configured)
    expected = _per_tick_recording(reference, truth, 11, configured)
    got = (tmp_path / "rec.csv").read_bytes()
    assert result.rows == expected.count(b"\n") - 1
    assert got == expected


def test_the_tick_by_tick_fallback_writes_the_same_bytes(tmp_path, reference, monkeypatch):
    import twinlake.sim.arm as arm

    record_offline(reference, tmp_path / "compiled.csv", seed=5, tail_s=TAIL_S)
    monkeypatch.setattr(arm, "step_functions", lambda: None)  # as on a host whose libmujoco has no symbols
    record_offline(reference, tmp_path / "fallback.csv", seed=5, tail_s=TAIL_S)
    assert (tmp_path / "fallback.csv").read_bytes() == (tmp_path / "compiled.csv").read_bytes()
