"""Run an excitation plan: offline preview, or stream it to a daemon with live guards.

`run_preview` writes `reference.csv`, `preview.svg` and `metadata.json` for an anchor given by
the user (or the illustrative one). `ExcitationRun` reads the live anchor from the daemon (no
state within a second: no daemon answers), runs the preflight, optionally starts a daemon
recording (`record_path`), streams targets at the plan rate evaluated at actual wall time
(expired slots skipped; a send, or the next slot after a stall anywhere in the loop, later
than `max_lateness` aborts), and guards every send: state fresh, running, error-free, in
joint impedance, finite, inside the joint range, speed bound, and tracking error under the
chosen rule (daemon/guards.py; the anchor rule by default). A fault after a motion command
requests termination and checks that the daemon stopped; daemon/excite_abort.py says why.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..contracts.jsonfile import read_json_object

from .client import DEFAULT_D_JOINT, DEFAULT_FILTER_ALPHA, DEFAULT_K_JOINT, ClientState, Fr3Client
from .companions import recording_meta, write_companions
from .excite_abort import GUARD, LATE, NO_DAEMON, PREFLIGHT, RECORD, SETTLE, STALE, ExcitationAbort, daemon_answers, no_daemon_message
from .excitation import PREVIEW_ANCHOR_Q, Q_LOWER, Q_UPPER, Plan, offsets, preflight, validate_plan
from .excite_files import initial_metadata, reference_table, write_json_atomic, write_preview_svg, write_reference_csv
from .guards import GuardBounds, GuardEvent, first_abort, guard_values

PREFLIGHT_DQ_BOUND = 0.02  # rad/s: the arm must be still before we start
ANCHOR_DRIFT_RAD = 0.002
SETTLE_TIMEOUT_S = 5.0
NO_DAEMON_WAIT_S = 1.0  # no state within this: no daemon answers (it publishes every 5 ms)
COMMAND_COLUMNS = (
    ["seq", "trajectory_t_s", "send_start_monotonic_s", "send_return_monotonic_s", "state_daemon_timestamp",
     "state_received_monotonic_s", "lateness_s"]
    + [f"q_target{j}" for j in range(1, 8)] + [f"q_measured{j}" for j in range(1, 8)]
    + [f"dq_measured{j}" for j in range(1, 8)]
)


Guards = GuardBounds  # the live guards' bounds (daemon/guards.py); max_velocity is set from the plan


@dataclass(frozen=True)
class Gains:
    k_joint: tuple = DEFAULT_K_JOINT
    d_joint: tuple = DEFAULT_D_JOINT
    filter_alpha: float = DEFAULT_FILTER_ALPHA

    def validate(self) -> "Gains":
        if len(self.k_joint) != 7 or len(self.d_joint) != 7:
            raise ValueError("--kp/--kd: expected 1 or 7 values each")
        if min(self.k_joint) <= 0:
            raise ValueError(f"--kp: expected stiffnesses > 0 N·m/rad, got {min(self.k_joint):g}")
        if min(self.d_joint) <= 0:
            raise ValueError(f"--kd: expected dampings > 0 N·m·s/rad, got {min(self.d_joint):g}")
        if not 0 < self.filter_alpha <= 1:
            raise ValueError(f"--filter-alpha: expected 0 < alpha ≤ 1, got {self.filter_alpha:g}")
        return self

    def to_dict(self) -> dict:
        return {"K_joint": list(self.k_joint), "D_joint": list(self.d_joint),
                "filter_alpha": self.filter_alpha, "use_friction": False}


def unhealthy_reason(state: ClientState | None, now: float, stale_after: float, dq_bound: float) -> str | None:
    """Why `state` is not healthy (None when it is): the preflight checks (the streaming ones
    go through `guard_reason` too)."""
    if state is None:
        return "no state received"
    age = now - state.received_at
    if not math.isfinite(state.received_at) or not 0 <= age <= stale_after:
        return f"stale state (age {age:.3f} s > {stale_after} s)"
    return _daemon_reason(state) or _range_speed_reason(state, dq_bound)


def _daemon_reason(state: ClientState) -> str | None:
    if not state.running or state.last_error:
        return f"daemon not healthy: running={state.running} last_error={state.last_error!r}"
    if state.controller != "joint_impedance":
        return f"controller is {state.controller!r}, expected 'joint_impedance'"
    if not (np.isfinite(state.q).all() and np.isfinite(state.dq).all() and math.isfinite(state.timestamp)):
        return "non-finite state"
    return None


def _range_speed_reason(state: ClientState, dq_bound: float) -> str | None:
    if state.q.shape != (7,) or np.any(state.q <= Q_LOWER) or np.any(state.q >= Q_UPPER):
        return "joint position outside the allowed range (repulsion zone)"
    if np.abs(state.dq).max() > dq_bound:
        return f"joint speed {np.abs(state.dq).max():.4f} rad/s exceeds {dq_bound} rad/s"
    return None


def guard_reason(state: ClientState | None, now: float, anchor: np.ndarray, last_target: np.ndarray | None,
                 guards: GuardBounds, t_s: float) -> str | None:
    """Why the run must abort before this send (None: send): the daemon's health here, then
    the streaming guards of daemon/guards.py (state age, range, speed, tracking under the rule)."""
    if state is None:
        return "no state received"
    reason = _daemon_reason(state)
    if reason:
        return reason
    last = np.full(7, np.nan) if last_target is None else np.asarray(last_target, dtype=np.float64)
    age = now - state.received_at if math.isfinite(state.received_at) else np.nan
    values = guard_values(state.q[None], state.dq[None], anchor, last[None], np.array([age]))
    first, which = first_abort(values, guards)
    if first < 0:
        return None
    guard = guards.enforced[int(which)]
    value, joint = values[guard]
    return GuardEvent(guard, t_s, None if joint[0] < 0 else int(joint[0]) + 1, float(value[0]),
                      guards.bound(guard)).describe()


def new_output_dir(output: str | None) -> Path:
    """The run directory: must be new. Default, as fr3_stack's `examples/joint_sysid.py`:
    `recordings/joint-%Y%m%dT%H%M%S-%fZ` (UTC, microseconds), relative to the working directory."""
    if output is None:
        output = datetime.now(timezone.utc).strftime("recordings/joint-%Y%m%dT%H%M%S-%fZ")
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(exist_ok=False)
    return path


def run_preview(plan: Plan, out_dir: Path, q0=None, *, robot_id=None, guards: Guards = Guards(),
                configured_load=None, design: dict | None = None) -> dict:
    """Offline preview: no network. Writes the three files; returns the metadata.
    `configured_load` (a twinlake.sim EndLoad, the load set in Desk) goes into the metadata, and
    so does `design` (a designed excitation's predictions, twinlake/excitation_design/) as key `design`."""
    validate_plan(plan)
    anchor = PREVIEW_ANCHOR_Q if q0 is None else np.asarray(q0, dtype=np.float64)
    peaks = preflight(plan, anchor)
    meta = initial_metadata(plan, robot_id=robot_id, host=None, cmd_port=5555, state_port=5556,
                            guards=replace(guards, max_velocity=plan.max_velocity).validate().to_dict(),
                            configured_load=configured_load)
    write_reference_csv(out_dir / "reference.csv", reference_table(plan, anchor))
    write_preview_svg(out_dir / "preview.svg", plan)
    meta.update(status="preview", anchor_q_rad=[float(x) for x in anchor],
                anchor_source="illustrative_only" if q0 is None else "user", reference_peaks=peaks)
    if design is not None:
        meta["design"] = design
    write_json_atomic(out_dir / "metadata.json", meta)
    return meta


class ExcitationRun:
    """One executed run against a daemon; `run()` returns the final metadata."""

    def __init__(self, plan: Plan, out_dir: Path, client: Fr3Client, *, robot_id: str,
                 gains: Gains = Gains(), guards: Guards = Guards(), finish: str = "hold",
                 record_path: str | None = None, experiment: dict | None = None, nuc_log: str | None = None,
                 progress=None, configured_load=None, on_stage=None) -> None:
        self.plan, self.out, self.client = validate_plan(plan), out_dir, client
        guards = replace(guards, max_velocity=plan.max_velocity).validate()  # the streaming speed bound
        self.gains, self.guards, self.finish = gains.validate(), guards, finish
        self.record_path = record_path
        self.progress = progress or (lambda fraction: None)
        self.on_stage = on_stage or (lambda text: None)  # a stage's name, for progress on stderr
        self.meta = initial_metadata(plan, robot_id=robot_id, host=client.host, cmd_port=client.cmd_port,
                                     state_port=client.state_port, guards=guards.to_dict(), experiment=experiment,
                                     configured_load=configured_load)
        self.meta["nuc_log_reference"] = nuc_log
        self.meta_path = out_dir / "metadata.json"
        self.recording_id = ""
        self.recording_status = None

    def _save(self, **updates) -> None:
        self.meta.update(updates)
        write_json_atomic(self.meta_path, self.meta)

    def _wait_healthy(self, dq_bound: float, timeout: float = 3.0) -> ClientState:
        if self.client.state(timeout=NO_DAEMON_WAIT_S) is None:
            raise ExcitationAbort(no_daemon_message(self.client, NO_DAEMON_WAIT_S), NO_DAEMON)
        deadline = time.monotonic() + timeout
        reason = "no state received"
        while time.monotonic() < deadline:
            st = self.client.state(timeout=0.2)
            reason = unhealthy_reason(st, time.monotonic(), self.guards.stale_after, dq_bound)
            if reason is None:
                return st
            time.sleep(0.01)
        raise ExcitationAbort(f"preflight: {reason}", PREFLIGHT)

    def run(self) -> dict:
        self._save()
        self.on_stage(f"preflight: reading the arm's pose from {self.client.host}")
        anchor = self._wait_healthy(PREFLIGHT_DQ_BOUND).q.copy()
        peaks = preflight(self.plan, anchor)
        write_reference_csv(self.out / "reference.csv", reference_table(self.plan, anchor))
        write_preview_svg(self.out / "preview.svg", self.plan)
        self._save(status="prepared", anchor_q_rad=[float(x) for x in anchor], reference_peaks=peaks,
                   commanded_controller_settings=self.gains.to_dict(), controller_settings_acknowledged=False)
        now_q = self._wait_healthy(PREFLIGHT_DQ_BOUND).q
        if np.abs(now_q - anchor).max() > ANCHOR_DRIFT_RAD:
            raise ExcitationAbort(f"anchor moved {np.abs(now_q - anchor).max():.4f} rad while preparing", PREFLIGHT)
        if self.record_path:
            self.on_stage(f"recording at 1 kHz to {self.record_path}")
            self._start_recording()
        try:
            self._save(status="running")
            self.on_stage(f"streaming {self.plan.mode}, {self.plan.total_s:g} s at {self.plan.rate:g} Hz")
            self._stream(anchor)
            self.on_stage("terminal settle: waiting for the arm to return to the anchor and stop")
            self._settle(anchor)
            self.meta["status"] = "completed"
            if self.record_path:
                self.on_stage("stopping the recording")
            self._stop_recording(anchor)  # before any termination: shutdown would end the service
            if self.finish == "terminate":
                self.client.terminate()
                self.meta["termination"] = "requested_unconfirmed"
            self._save(status="completed", end_behavior=self.finish)
        except BaseException as exc:
            self._abort(exc)
            raise
        finally:
            self._stop_recording(anchor)
            self._save(finished_at_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return self.meta

    def _start_recording(self) -> None:
        from .client import RecordingError

        self.recording_id = f"excite-{uuid.uuid4().hex[:16]}"
        try:
            status = self.client.start_recording(self.record_path, recording_id=self.recording_id)
        except RecordingError as exc:  # e.g. the file exists (EEXIST) or its directory does not (ENOENT)
            code = f", errno {exc.status.error_code} ({os.strerror(exc.status.error_code)})" if exc.status.error_code else ""
            self._save(status="aborted", error=f"RecordingError: {exc}")
            raise ExcitationAbort(f"--record {self.record_path}: the daemon refused the recording: {exc}{code}",
                                  RECORD) from None
        self._save(recording={"path": self.record_path, "recording_id": self.recording_id,
                              "started": status.to_dict()})

    def _stop_recording(self, anchor, timeout: float = 5.0) -> None:
        """Stop our recording once (before any termination request) and write its companions."""
        if not self.recording_id or "stopped" in self.meta["recording"] or "stop_error" in self.meta["recording"]:
            return
        try:
            status = self.client.stop_recording(self.recording_id, timeout=timeout)
        except Exception as exc:  # noqa: BLE001  keep the original failure; note this one
            self.meta["recording"]["stop_error"] = f"{type(exc).__name__}: {exc}"
            return
        self.recording_status = status
        self.meta["recording"]["stopped"] = status.to_dict()
        meta = recording_meta(robot_id=self.meta["robot_id"], source="twinlake daemon",
                              recording_id=self.recording_id, gains=self.gains.to_dict(),
                              plan=self.plan.to_dict(), anchor_q_rad=anchor, reference="reference.csv",
                              excitation_status=self.meta["status"],
                              **({"design": self.meta["design"]} if "design" in self.meta else {}))
        csv = Path(self.record_path)
        target = csv if csv.parent.is_dir() else self.out / csv.name  # remote daemon: keep them here
        write_companions(target, status, meta)

    def _abort(self, exc: BaseException) -> None:
        self.meta["status"] = "aborted"
        self._stop_recording(self.meta.get("anchor_q_rad"), timeout=1.0)  # termination ends the daemon
        if self.meta["motion_command_attempted"]:
            try:
                self.client.terminate()
                time.sleep(0.1)
                self.meta["termination"] = "attempted"
                # a terminated daemon closes its sockets: say whether it really stopped
                self.meta["daemon_after_abort"] = "still_answering" if daemon_answers(self.client) else "stopped"
            except Exception as term_exc:  # noqa: BLE001
                self.meta["termination"] = f"request_failed: {term_exc}"
        # fr3_stack's metadata contract: error = "Type: message"
        self._save(status="aborted", error=f"{type(exc).__name__}: {exc}")

    def _stream(self, anchor: np.ndarray) -> None:
        plan, guards, client = self.plan, self.guards, self.client
        period = 1.0 / plan.rate
        fmt = ",".join(["%d"] + ["%.12g"] * (len(COMMAND_COLUMNS) - 1)) + "\n"
        with open(self.out / "commands_and_state.csv", "x", encoding="ascii") as log:
            log.write(",".join(COMMAND_COLUMNS) + "\n")
            origin = time.monotonic()
            self.meta["plan_total_s"] = plan.total_s
            slot, last_target, seq = 0, None, 0
            while True:
                scheduled = origin + slot * period
                delay = scheduled - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                now = time.monotonic()
                lateness = now - scheduled
                traj_t = min(now - origin, plan.total_s)
                self._check_lateness(lateness, traj_t)
                st = client.state(timeout=guards.stale_after)
                reason = guard_reason(st, time.monotonic(), anchor, last_target, guards, traj_t)
                if reason:
                    self.meta["aborted_at_trajectory_s"] = traj_t
                    raise ExcitationAbort(reason, STALE if reason.startswith("state age") else GUARD)
                target = anchor + offsets(plan, np.array([traj_t]))[0, 0]
                self.meta["motion_command_attempted"] = True
                sent_at = time.monotonic()
                client.send_joint_impedance(target, K_joint=self.gains.k_joint, D_joint=self.gains.d_joint,
                                            filter_alpha=self.gains.filter_alpha, use_friction=False)
                returned = time.monotonic()
                last_target = target
                row = [seq, traj_t, sent_at, returned, st.timestamp, st.received_at, lateness,
                       *target, *st.q, *st.dq]
                log.write(fmt % tuple(row))
                seq += 1
                self.meta["commands_sent"] = seq
                self.progress(traj_t / plan.total_s)
                if traj_t >= plan.total_s:
                    break
                # the next slot's deadline is checked wherever the client stalled (in a send as in
                # the sleep); expired slots within the bound are skipped, never burst-sent
                slot += 1
                now = time.monotonic()
                self._check_lateness(now - (origin + slot * period), min(now - origin, plan.total_s))
                slot = max(slot, int((now - origin) / period))

    def _check_lateness(self, lateness: float, traj_t: float) -> None:
        """Abort (fr3_stack's lateness guard) when a send's deadline passed by more than
        --max-lateness [s]; `traj_t`: the plan time reached [s]."""
        if lateness > self.guards.max_lateness:
            self.meta["aborted_at_trajectory_s"] = traj_t
            raise ExcitationAbort(
                f"the client was {lateness:.3f} s late for a send (--max-lateness {self.guards.max_lateness:g} s): "
                "this machine did not run the client on time", LATE)

    def _settle(self, anchor: np.ndarray) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            st = self.client.state(timeout=0.2)
            if st is not None and np.abs(st.q - anchor).max() <= self.guards.tracking_error \
                    and np.abs(st.dq).max() <= PREFLIGHT_DQ_BOUND:
                return
            time.sleep(0.01)
        raise ExcitationAbort("terminal settle: the arm did not return to the anchor and stop within "
                              f"{SETTLE_TIMEOUT_S:g} s", SETTLE)


def load_experiment(path: str | None) -> dict | None:
    """The user's experiment JSON object (or None); raises ValueError if it is not an object."""
    if path is None:
        return None
    return read_json_object(path, "experiment metadata file")
