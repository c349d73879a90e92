"""The sim-backed FR3 daemon: a 1 kHz real-time loop behind fr3_stack's three sockets.

Threads: the control loop (the caller of `run`), a command receiver (PULL, conflated, latest
wins), a state publisher (PUB on a fixed 5 ms grid, so up to 200 Hz; fr3_stack sleeps 5 ms after
each send) and the recording service (REP). `rt_priority` > 0 runs them all under SCHED_FIFO. Each tick: measure (true state + noise) → pending command (reset on a mode
change) → EMA → torque → slew → capture into the recording ring → physics. The loop keeps
time with a hybrid sleep: `time.sleep` until `spin_s` before the deadline, then a short spin.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import zmq

from ..sim import DEMO_PROFILE_PATH, NO_LOAD, EndLoad, JointImpedanceCommand, load_params

from . import csv_v2 as C
from .noise import NoiseConfig
from .plantloop import TICK_S, RobotTicker, to_sim_command
from .recording import RecordingManager, RecordingRefused
from .service import RecordingService
from .wire import CONTROLLER_NAMES, BadCommand, StateMessage, decode_command, encode_state

STATE_PERIOD_S = 0.005


def unsupported_controller_message(controller: str) -> str:
    """`lastError` for a command selecting a controller this daemon does not run.

    fr3_stack's daemon runs every controller of its wire protocol, so it never refuses one; this
    daemon runs joint impedance and idle only. It refuses the others (Cartesian impedance, moveTo,
    admittance, hybrid) with this message, and clears it when it next accepts a command, so a
    client that refuses a daemon with a `lastError` (fr3_stack's `Robot.observe()`,
    `joint_sysid.py`'s health check) can carry on once it is back in joint impedance. Malformed
    commands (wrong list lengths, undecodable bytes) are errors on any daemon: their `lastError`
    stays until a later error replaces it (fr3_stack documents `lastError` as the last
    bad-command, RT-abort or hybrid-trip message).
    """
    return (f"bad command: controller {controller} is not available in this daemon "
            "(joint_impedance and idle only; the command was ignored)")


@dataclass
class DaemonConfig:
    """Daemon settings. Port 0 binds an ephemeral port (see `Fr3Daemon.ports`)."""

    host: str = "127.0.0.1"
    cmd_port: int = 5555
    state_port: int = 5556
    recording_port: int = 5557
    truth_path: str | None = None  # profile JSON or sysid_best_params.json; bundled demo if None
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    seed: int = 0
    initial_controller: str = "joint_impedance"  # holds the start pose; or "idle"
    q0: np.ndarray | None = None  # initial joint position [rad]; sim home if None
    spin_s: float = 0.0003  # busy-wait this long before each deadline
    log_1khz: str | None = None  # start a recording at startup with ID startup-<ns>
    rt_priority: int = 0  # >0: SCHED_FIFO priority for the daemon's threads (as a real RT daemon)
    payload: EndLoad | None = None  # the true payload at the flange; the truth profile's if None
    configured_load: EndLoad = NO_LOAD  # the load the firmware's gravity compensation assumes (setLoad)
    friction_law: str = "stribeck"  # the true plant's friction law (twinlake.sim.arm_model.plant.FRICTION_LAWS)

    def validate(self) -> None:
        """Raise ValueError on bad ports or an unknown initial controller."""
        ports = (self.cmd_port, self.state_port, self.recording_port)
        for name, port in zip(("--cmd-port", "--state-port", "--recording-port"), ports):
            if not 0 <= port <= 65535:
                raise ValueError(f"{name}: expected 1..65535, got {port}")
        nonzero = [p for p in ports if p]
        if len(set(nonzero)) != len(nonzero):
            raise ValueError(f"ports must differ: cmd {self.cmd_port}, state {self.state_port}, "
                             f"recording {self.recording_port}")
        if self.initial_controller not in ("idle", "joint_impedance"):
            raise ValueError(f"--initial-controller: expected idle or joint_impedance, got {self.initial_controller!r}")


class Fr3Daemon:
    """Bind the sockets on construction; `run()` drives the loop until termination/`stop()`."""

    def __init__(self, config: DaemonConfig) -> None:
        config.validate()
        self.config = config
        # with rt_priority, raise it before any thread exists (zmq's I/O thread included): they inherit it
        self._restore_priority = self._raise_priority()
        self.truth_path = config.truth_path or str(DEMO_PROFILE_PATH)
        truth = load_params(self.truth_path)
        if config.payload is not None:
            truth = truth.with_payload(config.payload)
        self.robot = RobotTicker(truth, config.noise, config.seed, q0=config.q0, measured_coriolis=True,
                                 configured_load=config.configured_load, friction_law=config.friction_law)
        self.manager = RecordingManager()
        ctx = self._ctx = zmq.Context() if config.rt_priority > 0 else zmq.Context.instance()
        self._cmd = ctx.socket(zmq.PULL)
        self._cmd.setsockopt(zmq.CONFLATE, 1)
        self._cmd.setsockopt(zmq.RCVTIMEO, 50)
        self._cmd.setsockopt(zmq.LINGER, 0)
        self._state = ctx.socket(zmq.PUB)
        self._state.setsockopt(zmq.SNDHWM, 1)
        self._state.setsockopt(zmq.LINGER, 0)
        self.ports = {
            "cmd": self._bind(self._cmd, config.cmd_port),
            "state": self._bind(self._state, config.state_port),
        }
        self.service = RecordingService(self.manager, f"tcp://{config.host}:{config.recording_port}", ctx)
        self.ports["recording"] = self.service.port
        self._stop = threading.Event()
        self._pending = None  # latest sim command (conflated), taken by the loop
        self._pending_lock = threading.Lock()
        self.last_error = ""  # the state's lastError
        self._error_is_refusal = False  # last_error refuses an unsupported controller (cleared when one is accepted)
        self.running = False
        self.controller_name = "idle" if config.initial_controller == "idle" else "joint_impedance"
        self._snapshot: tuple | None = None  # (q, dq, pos, quat, robot_time) for the publisher
        self.ticks = 0
        self.startup_recording_id = ""

    def _bind(self, sock: zmq.Socket, port: int) -> int:
        if port == 0:
            return sock.bind_to_random_port(f"tcp://{self.config.host}")
        sock.bind(f"tcp://{self.config.host}:{port}")
        return port

    # ---- threads --------------------------------------------------------------------------
    def _receive_commands(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._cmd.recv()
            except zmq.Again:
                continue
            except zmq.ZMQError:
                break
            try:
                decoded = decode_command(data)
            except BadCommand as exc:
                self._set_error(str(exc), refusal=False)
                continue
            if decoded.termination:
                self._stop.set()
                continue
            command = to_sim_command(decoded)
            if command is None:
                self._set_error(unsupported_controller_message(CONTROLLER_NAMES[decoded.controller]), refusal=True)
                continue
            with self._pending_lock:
                self._pending = command
            if self._error_is_refusal:
                self._set_error("", refusal=False)  # accepted: the refusal no longer describes the session

    def _set_error(self, message: str, *, refusal: bool) -> None:
        """Publish `message` as `lastError`. refusal: it only refuses a controller this daemon does not
        run, and the next accepted command clears it (see `unsupported_controller_message`)."""
        self._error_is_refusal = refusal
        self.last_error = message

    def _publish_state(self) -> None:
        zero6 = np.zeros(6)
        deadline = time.perf_counter()
        while not self._stop.is_set():
            snap = self._snapshot
            if snap is not None:
                q, dq, pos, quat, stamp = snap
                msg = StateMessage(self.controller_name, pos, quat, q, dq, zero6, stamp, self.running,
                                   self.last_error)
                try:
                    self._state.send(encode_state(msg), zmq.DONTWAIT)
                except zmq.Again:
                    pass
            deadline += STATE_PERIOD_S  # fixed 5 ms grid: encoding time does not slow the rate
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            elif delay < -STATE_PERIOD_S:
                deadline = time.perf_counter()  # fell behind: skip, never burst

    # ---- the loop -------------------------------------------------------------------------
    def _take_pending(self):
        with self._pending_lock:
            command, self._pending = self._pending, None
        return command

    def _tick(self) -> None:
        """One tick. Its `control_period_s` is the robot clock's period, as libfranka's callback
        `period` is (fr3_stack's CSV v2 column 80): 0 on the first tick, then 1 ms, because the
        simulated arm advances exactly one 1 ms physics step per tick however late the host
        runs it. The host's lateness shows in `t_s` (host time at capture)."""
        robot = self.robot
        command = self._take_pending()
        if command is None and self.ticks == 0 and self.config.initial_controller == "joint_impedance":
            command = JointImpedanceCommand(robot.sim.q)  # anchor at the live q, default config
        frame = robot.step(command, 0.0 if self.ticks == 0 else TICK_S)
        self.controller_name = CONTROLLER_NAMES[int(frame[C.CONTROLLER.start])]
        if self.manager.enabled:
            self.manager.capture(frame, time.perf_counter())
        pos, quat = robot.ee_pose
        self._snapshot = (robot.q_meas, robot.dq_meas, pos, quat, frame[C.ROBOT_TIME_S.start])
        self.ticks += 1

    def run(self, duration_s: float | None = None) -> int:
        """Run until termination, `stop()` or `duration_s`; returns the exit status (docs/daemon.md §1)."""
        threads = [threading.Thread(target=f, name=n, daemon=True)
                   for f, n in ((self._receive_commands, "cmd-pull"), (self._publish_state, "state-pub"))]
        self.service.start()
        for t in threads:
            t.start()
        old_switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0002)  # hand the GIL back to the loop quickly after its sleep
        # everything alive now (the interpreter, MuJoCo, numba, zmq) is never scanned by the
        # cyclic GC again: a full collection over it would be a multi-millisecond pause
        gc.freeze()
        self.running = True
        startup_failed = False
        try:
            if self.config.log_1khz:
                try:
                    self.start_startup_recording()
                except ValueError as exc:  # the startup recording threw (invalid ID or path)
                    print(str(exc), file=sys.stderr)
                    startup_failed = True
            if not startup_failed:
                self._loop(duration_s)
        finally:
            self.running = False
            sys.setswitchinterval(old_switch)
            gc.unfreeze()
            self._stop.set()
            self.manager.shutdown()
            for t in threads:
                t.join()
            self.service.stop()
            self._cmd.close(linger=0)
            self._state.close(linger=0)
            if self._ctx is not zmq.Context.instance():
                self._ctx.term()
            self._restore_priority()
        return 2 if (startup_failed or self.manager.any_failed) else 0

    def _raise_priority(self):
        """Switch this thread to SCHED_FIFO when asked; returns a function restoring the old policy."""
        if self.config.rt_priority <= 0 or not hasattr(os, "sched_setscheduler"):
            return lambda: None
        old_policy, old_param = os.sched_getscheduler(0), os.sched_getparam(0)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.config.rt_priority))
        except OSError as exc:
            print(f"[daemon] real-time priority {self.config.rt_priority} refused ({exc}); running without",
                  file=sys.stderr)
            return lambda: None
        return lambda: os.sched_setscheduler(0, old_policy, old_param)

    def _loop(self, duration_s: float | None) -> None:
        spin = self.config.spin_s
        clock = time.perf_counter
        start = clock()
        end = None if duration_s is None else start + duration_s
        deadline = start
        while not self._stop.is_set():
            now = clock()
            self._tick()
            if end is not None and now >= end:
                break
            deadline += TICK_S
            remaining = deadline - clock()
            if remaining < -0.05:  # far behind (the host stalled): resynchronise, do not burst
                deadline = clock()
                continue
            if remaining > spin:
                time.sleep(remaining - spin)
            while clock() < deadline:
                pass

    def start_startup_recording(self) -> None:
        """`--log-1khz PATH`: start a recording now (relative paths made absolute)."""
        path = os.path.abspath(self.config.log_1khz)
        rid = f"startup-{time.monotonic_ns()}"
        self.startup_recording_id = rid
        try:
            self.manager.start(rid, path)
        except RecordingRefused as exc:
            raise ValueError(f"--log-1khz {path}: {exc}") from None

    def stop(self) -> None:
        """Ask the loop to finish (thread-safe)."""
        self._stop.set()

