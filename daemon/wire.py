"""Cap'n Proto messages of the fr3_stack wire protocol (our own schema, `fr3.capnp`).

Encode and decode helpers for the three sockets: commands (PULL 5555), state (PUB 5556) and
the recording service (REP 5557). Every message is unpacked Cap'n Proto in one ZMQ frame.
Joint vectors are 7 float64 values in joint order j1..j7 (rad, rad/s, N·m/rad, N·m·s/rad).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import capnp  # noqa: F401  (pycapnp; `load` below)
import numpy as np

SCHEMA_PATH = Path(__file__).with_name("fr3.capnp")
schema = capnp.load(str(SCHEMA_PATH))

TRAVERSAL_LIMIT_WORDS = 8192
MAX_MESSAGE_BYTES = 65536

# ControllerType enum (CSV `controller` column) and the names published on the state socket.
CONTROLLER_IDLE = 0
CONTROLLER_CARTESIAN = 1
CONTROLLER_JOINT = 2
CONTROLLER_ADMITTANCE = 3
CONTROLLER_HYBRID = 4
CONTROLLER_NAMES = {
    CONTROLLER_IDLE: "gravity_compensation",
    CONTROLLER_CARTESIAN: "cartesian_impedance",
    CONTROLLER_JOINT: "joint_impedance",
    CONTROLLER_ADMITTANCE: "admittance",
    CONTROLLER_HYBRID: "hybrid",
}
_ARM_TO_CONTROLLER = {
    "idle": CONTROLLER_IDLE,
    "cartesianImpedance": CONTROLLER_CARTESIAN,
    "moveTo": CONTROLLER_CARTESIAN,
    "jointImpedance": CONTROLLER_JOINT,
    "admittance": CONTROLLER_ADMITTANCE,
    "hybrid": CONTROLLER_HYBRID,
}


class BadCommand(ValueError):
    """A command the daemon rejects; the message becomes the state's `lastError`."""


@dataclass(frozen=True)
class JointImpedanceCommand:
    """A joint impedance command: pre-EMA target [rad], K [N·m/rad], D [N·m·s/rad], alpha."""

    q_target: np.ndarray
    k_joint: np.ndarray
    d_joint: np.ndarray
    filter_alpha: float
    use_friction: bool = False


@dataclass(frozen=True)
class IdleCommand:
    """Idle (gravity compensation); `d_rate` is the per-joint damping rate [1/s], may be empty."""

    d_rate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    use_friction: bool = False


@dataclass(frozen=True)
class DecodedCommand:
    """One decoded `Command`: the requested controller enum, its config, and the stop flag."""

    termination: bool
    controller: int
    config: JointImpedanceCommand | IdleCommand | None


def _vec7(values, name: str) -> np.ndarray:
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.shape != (7,):
        raise BadCommand(f"bad command: {name}: expected length 7, got {arr.size}")
    return arr


def encode_joint_impedance(cmd: JointImpedanceCommand, *, termination: bool = False) -> bytes:
    """Serialise a joint impedance `Command` (termination false unless asked)."""
    msg = schema.Command.new_message()
    msg.termination = bool(termination)
    ji = msg.config.init("jointImpedance")
    ji.qTarget = [float(x) for x in _vec7(cmd.q_target, "qTarget")]
    ji.kJoint = [float(x) for x in _vec7(cmd.k_joint, "kJoint")]
    ji.dJoint = [float(x) for x in _vec7(cmd.d_joint, "dJoint")]
    ji.filterAlpha = float(cmd.filter_alpha)
    ji.useFriction = bool(cmd.use_friction)
    return msg.to_bytes()


def encode_idle(cmd: IdleCommand | None = None, *, termination: bool = False) -> bytes:
    """Serialise an idle `Command`; `termination=True` asks the daemon to stop."""
    cmd = cmd or IdleCommand()
    msg = schema.Command.new_message()
    msg.termination = bool(termination)
    idle = msg.config.init("idle")
    idle.dRate = [float(x) for x in np.asarray(cmd.d_rate, dtype=np.float64)]
    idle.useFriction = bool(cmd.use_friction)
    return msg.to_bytes()


def decode_command(data: bytes) -> DecodedCommand:
    """Decode one `Command` frame; raises `BadCommand` with a one-line reason."""
    if not data or len(data) % 8 or len(data) > MAX_MESSAGE_BYTES:
        raise BadCommand("bad command: invalid message size")
    try:
        with schema.Command.from_bytes(data, traversal_limit_in_words=TRAVERSAL_LIMIT_WORDS) as msg:
            arm = str(msg.config.which())
            termination = bool(msg.termination)
            controller = _ARM_TO_CONTROLLER.get(arm)
            if controller is None:
                raise BadCommand(f"bad command: unknown config {arm!r}")
            if arm == "jointImpedance":
                ji = msg.config.jointImpedance
                config = JointImpedanceCommand(
                    q_target=_vec7(ji.qTarget, "qTarget"),
                    k_joint=_vec7(ji.kJoint, "kJoint"),
                    d_joint=_vec7(ji.dJoint, "dJoint"),
                    filter_alpha=float(ji.filterAlpha),
                    use_friction=bool(ji.useFriction),
                )
            elif arm == "idle":
                config = IdleCommand(np.asarray(list(msg.config.idle.dRate), dtype=np.float64),
                                     bool(msg.config.idle.useFriction))
            else:
                config = None
    except BadCommand:
        raise
    except Exception as exc:  # capnp.KjException and friends: never let bad bytes escape
        raise BadCommand(f"bad command: cannot decode Command ({type(exc).__name__})") from None
    return DecodedCommand(termination, controller, config)


@dataclass(frozen=True)
class StateMessage:
    """The daemon's published state (robot clock `timestamp` [s], q [rad], dq [rad/s])."""

    controller: str
    pos: np.ndarray
    quat_xyzw: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    wrench_ext: np.ndarray
    timestamp: float
    running: bool
    last_error: str


def encode_state(state: StateMessage) -> bytes:
    """Serialise a `State` (wrenchFt/wrenchFtRaw left empty: no F/T sensor in the sim)."""
    msg = schema.State.new_message()
    msg.controller = state.controller
    msg.pos = [float(x) for x in state.pos]
    msg.quatXyzw = [float(x) for x in state.quat_xyzw]
    msg.q = [float(x) for x in state.q]
    msg.dq = [float(x) for x in state.dq]
    msg.wrenchExt = [float(x) for x in state.wrench_ext]
    msg.timestamp = float(state.timestamp)
    msg.running = bool(state.running)
    msg.lastError = state.last_error
    return msg.to_bytes()


def decode_state(data: bytes) -> StateMessage:
    """Decode one `State` frame."""
    with schema.State.from_bytes(data, traversal_limit_in_words=TRAVERSAL_LIMIT_WORDS) as m:
        return StateMessage(
            controller=str(m.controller),
            pos=np.asarray(list(m.pos), dtype=np.float64),
            quat_xyzw=np.asarray(list(m.quatXyzw), dtype=np.float64),
            q=np.asarray(list(m.q), dtype=np.float64),
            dq=np.asarray(list(m.dq), dtype=np.float64),
            wrench_ext=np.asarray(list(m.wrenchExt), dtype=np.float64),
            timestamp=float(m.timestamp),
            running=bool(m.running),
            last_error=str(m.lastError),
        )
