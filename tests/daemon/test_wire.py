"""Wire compatibility: a client compiled from an independent schema text (another file id, other
type names, same ordinals and types as fr3_stack's Appendix A) talks to our daemon unchanged."""

from __future__ import annotations

import time

import capnp
import numpy as np
import pytest
import zmq

from twinlake.daemon.wire import (
    CONTROLLER_IDLE, CONTROLLER_JOINT, BadCommand, JointImpedanceCommand, decode_command,
    encode_joint_impedance, schema,
)

PEER_SCHEMA = """
@0xb84d2c8e7f3a915a;
struct Idle { rate @0 :List(Float64); fric @1 :Bool; }
struct Cart { p @0 :List(Float64); q @1 :List(Float64); k @2 :List(Float64); d @3 :List(Float64);
  qn @4 :List(Float64); kn @5 :Float64; a @6 :Float64; os @7 :Bool; w @8 :List(Float64);
  md @9 :List(Float64); f @10 :Bool; li @11 :Bool = true; ema @12 :Bool = true; dn @13 :Float64;
  mt @14 :Float64; }
struct Joint { target @0 :List(Float64); k @1 :List(Float64); d @2 :List(Float64); alpha @3 :Float64;
  friction @4 :Bool; }
struct Adm { x @0 :Float64; }
struct Hyb { x @0 :Float64; }
struct Move { p @0 :List(Float64); }
struct Cmd { term @0 :Bool; union { idle @1 :Idle; cart @2 :Cart; joint @3 :Joint; adm @4 :Adm;
  hyb @5 :Hyb; move @6 :Move; } }
struct St { controller @0 :Text; pos @1 :List(Float64); quat @2 :List(Float64); q @3 :List(Float64);
  dq @4 :List(Float64); wrench @5 :List(Float64); timestamp @6 :Float64; running @7 :Bool;
  lastError @8 :Text; ft @9 :List(Float64); ftRaw @10 :List(Float64); ftComp @11 :Bool; }
enum Act { status @0; start @1; stop @2; }
struct Req { action @0 :Act; id @1 :Text; path @2 :Text; }
struct Stat { id @0 :Text; path @1 :Text; active @2 :Bool; ok @3 :Bool; finished @4 :Bool;
  complete @5 :Bool; written @6 :UInt64; discarded @7 :UInt64; dropped @8 :UInt64; error @9 :Text;
  code @10 :Int32; }
struct Rep { accepted @0 :Bool; error @1 :Text; status @2 :Stat; }
"""


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    path = tmp_path_factory.mktemp("peer") / "peer_fr3.capnp"
    path.write_text(PEER_SCHEMA)
    return capnp.load(str(path))


def test_peer_joint_command_decodes(peer):
    msg = peer.Cmd.new_message()
    j = msg.init("joint")
    j.target = [0.1 * i for i in range(7)]
    j.k = [600.0] * 7
    j.d = [50.0] * 7
    j.alpha = 0.05
    j.friction = True
    cmd = decode_command(msg.to_bytes())
    assert cmd.controller == CONTROLLER_JOINT and not cmd.termination
    assert np.allclose(cmd.config.q_target, [0.1 * i for i in range(7)]) and cmd.config.use_friction
    term = peer.Cmd.new_message(term=True)
    term.init("idle")
    decoded = decode_command(term.to_bytes())
    assert decoded.termination and decoded.controller == CONTROLLER_IDLE


def test_our_command_reads_in_peer_and_defaults_survive(peer):
    data = encode_joint_impedance(JointImpedanceCommand(np.arange(7.0), np.ones(7), np.ones(7), 0.2, False))
    with peer.Cmd.from_bytes(data) as msg:
        assert msg.which() == "joint" and list(msg.joint.target) == list(np.arange(7.0))
    ours = schema.Command.new_message()
    ours.config.init("cartesianImpedance")
    with peer.Cmd.from_bytes(ours.to_bytes()) as msg:
        assert msg.cart.li is True and msg.cart.ema is True  # XOR-encoded defaults agree


def test_wrong_length_is_a_bad_command(peer):
    msg = peer.Cmd.new_message()
    j = msg.init("joint")
    j.target = [0.0] * 6
    j.k = [1.0] * 7
    j.d = [1.0] * 7
    with pytest.raises(BadCommand, match="qTarget: expected length 7, got 6"):
        decode_command(msg.to_bytes())


def test_peer_client_talks_to_live_daemon(peer, start_daemon, tmp_path):
    d = start_daemon(initial_controller="joint_impedance")
    d.wait_state(lambda s: s.controller == "joint_impedance")
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(f"tcp://127.0.0.1:{d.daemon.ports['state']}")
    assert sub.poll(3000)
    with peer.St.from_bytes(sub.recv()) as st:
        assert st.controller == "joint_impedance" and len(st.q) == 7 and st.running
    sub.close()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(f"tcp://127.0.0.1:{d.daemon.ports['recording']}")
    req.send(peer.Req.new_message(action="start", id="peer-1", path=str(tmp_path / "p.csv")).to_bytes())
    assert req.poll(3000)
    with peer.Rep.from_bytes(req.recv()) as rep:
        assert rep.accepted and rep.status.active and rep.status.ok and rep.status.id == "peer-1"
    time.sleep(0.05)
    req.send(peer.Req.new_message(action="stop", id="peer-1").to_bytes())
    assert req.poll(3000)
    with peer.Rep.from_bytes(req.recv()) as rep:
        assert rep.status.complete and rep.status.written > 0
    req.close()
