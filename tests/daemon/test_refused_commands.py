"""A command selecting a controller the sim daemon does not run is refused with a clear
`lastError`, and the next accepted command clears it: over a real PUSH/SUB session on
ephemeral ports, the state is healthy again by the checks fr3_stack's clients make."""

from __future__ import annotations

import time

import numpy as np
import pytest
import zmq

from twinlake.daemon.excite_run import PREFLIGHT_DQ_BOUND, unhealthy_reason
from twinlake.daemon.wire import JointImpedanceCommand, encode_idle, encode_joint_impedance, schema

K = np.array([600.0, 600, 600, 600, 250, 150, 50])
D = np.array([50.0, 50, 50, 50, 30, 25, 15])


@pytest.fixture
def session(start_daemon):
    """(daemon, PUSH socket connected to its command port)."""
    d = start_daemon(initial_controller="joint_impedance")
    d.wait_state(lambda s: s.running and s.controller == "joint_impedance")
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(f"tcp://127.0.0.1:{d.daemon.ports['cmd']}")
    try:
        yield d, push
    finally:
        push.close()


def _other_controller(arm: str) -> bytes:
    msg = schema.Command.new_message()
    msg.config.init(arm)
    return msg.to_bytes()


def _joint(q) -> bytes:
    return encode_joint_impedance(JointImpedanceCommand(np.asarray(q), K, D, 0.05))


def _healthy(st) -> str | None:
    """fr3_stack's health check of a state (joint_sysid.py's preflight: running, no lastError,
    joint impedance, finite, in range, still), as `twinlake excite --execute` runs it."""
    return unhealthy_reason(st, time.monotonic(), 1.0, PREFLIGHT_DQ_BOUND)


def test_cartesian_then_joint_command_leaves_a_healthy_state(session):
    d, push = session
    push.send(_other_controller("cartesianImpedance"))
    refused = d.wait_state(lambda s: s.last_error != "")
    assert refused.last_error == ("bad command: controller cartesian_impedance is not available in this daemon "
                                  "(joint_impedance and idle only; the command was ignored)")
    assert refused.running and refused.controller == "joint_impedance"  # the arm kept holding
    assert _healthy(refused) is not None  # what makes fr3_stack's client refuse the daemon

    push.send(_joint(refused.q))
    st = d.wait_state(lambda s: s.last_error == "")
    assert _healthy(st) is None, _healthy(st)
    time.sleep(0.1)  # it stays clear
    assert d.wait_state(lambda s: True).last_error == "" and d.daemon.last_error == ""
    assert d.finish() == 0


@pytest.mark.parametrize("arm, name", [("moveTo", "cartesian_impedance"), ("admittance", "admittance"),
                                       ("hybrid", "hybrid")])
def test_every_unsupported_controller_is_refused_then_forgotten(session, arm, name):
    d, push = session
    push.send(_other_controller(arm))
    st = d.wait_state(lambda s: s.last_error != "")
    assert f"controller {name} is not available" in st.last_error
    push.send(encode_idle())  # idle is accepted too, and clears the refusal
    st = d.wait_state(lambda s: s.last_error == "" and s.controller == "gravity_compensation")
    assert st.running
    assert d.finish() == 0


def test_a_malformed_command_is_not_cleared_by_a_later_one(session):
    d, push = session
    push.send(_other_controller("cartesianImpedance"))
    d.wait_state(lambda s: "cartesian_impedance" in s.last_error)
    bad = schema.Command.new_message()
    ji = bad.config.init("jointImpedance")
    ji.qTarget, ji.kJoint, ji.dJoint = [0.0] * 6, [1.0] * 7, [1.0] * 7
    push.send(bad.to_bytes())
    st = d.wait_state(lambda s: "qTarget" in s.last_error)
    push.send(encode_idle())  # accepted (the controller changes), yet the error stays
    st = d.wait_state(lambda s: s.controller == "gravity_compensation")
    assert st.last_error == "bad command: qTarget: expected length 7, got 6"
    assert d.finish() == 0
