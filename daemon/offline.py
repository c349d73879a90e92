"""The offline recorder: a daemon recording made in simulated time, as fast as the host allows.

`record_offline` runs the daemon's plant, controller, noise and CSV v2 formatter (`RobotTicker`,
`format_rows`) without sockets or a wall clock. A `reference.csv` drives it through the same
command semantics as the daemon (each row becomes a joint impedance command through
`plantloop.sim_command`, the function the daemon applies to its decoded frames; there is no
wire offline, so no encoding) at the reference's own times: row i becomes the pending command at tick round(t_i / 1 ms). The
arm starts at rest at the first reference target in joint impedance (as `--initial-controller
joint_impedance` does), and the run continues `tail_s` after the last row. The commands being
known up front, the whole run goes through compiled calls of CHUNK_ROWS ticks that take each
at its tick (`RobotTicker.advance_commanded`); a worker thread formats each chunk with the
compiled formatter (`csv_v2.format_rows_into`, the bytes of `format_rows`) and writes it while
the next is simulated. Same inputs and seed → the same bytes.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..sim import DEMO_PROFILE_PATH, NO_LOAD, EndLoad, JointImpedanceCommand, load_params

from . import csv_v2 as C
from .client import DEFAULT_D_JOINT, DEFAULT_FILTER_ALPHA, DEFAULT_K_JOINT
from .companions import recording_meta, write_companions
from .excite_files import read_reference_csv
from .guards import GuardBounds, GuardMonitor, send_checks
from .noise import NoiseConfig
from .plantloop import (_EE_QUAT, CONFIG_COLUMNS, TICK_S, CommandTable, RobotTicker, config_columns, quat_xyzw_from_mats,
                        sim_command)
from .status import RecordingStatus
from .wire import JointImpedanceCommand as WireJoint

BATCH_ROWS = 1024
CHUNK_ROWS = 4096  # ticks per compiled call and per write (~5 MB of frames, ~7 MB of text)


@dataclass(frozen=True)
class OfflineResult:
    """What an offline run produced: rows, simulated and wall seconds, the final status."""

    csv_path: Path
    rows: int
    sim_seconds: float
    wall_seconds: float
    status: RecordingStatus
    guards: dict | None = None  # GuardMonitor.report: where fr3_stack's client would have aborted

    @property
    def speedup(self) -> float:
        """Simulated time per wall time (≥ 100 is the target)."""
        return self.sim_seconds / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def _command_ticks(t_s: np.ndarray) -> np.ndarray:
    return np.rint((t_s - t_s[0]) / TICK_S).astype(np.int64)


def record_offline(reference_csv: str | Path, out_csv: str | Path, *, truth_path: str | None = None,
                   seed: int = 0, noise: NoiseConfig = NoiseConfig(), k_joint=DEFAULT_K_JOINT,
                   d_joint=DEFAULT_D_JOINT, filter_alpha: float = DEFAULT_FILTER_ALPHA,
                   tail_s: float = 1.0, robot_id: str | None = None, progress=None,
                   payload: EndLoad | None = None, configured_load: EndLoad = NO_LOAD,
                   friction_law: str = "stribeck", guards: GuardBounds | None = None,
                   enforce_guards: bool = False) -> OfflineResult:
    """Simulate `reference_csv` on the truth robot and write a CSV v2 recording + companions.

    payload: the true payload at the flange (replaces the truth profile's; None keeps it);
    configured_load: the load the firmware's gravity compensation assumes (Desk / setLoad),
    stated in the metadata as `configured_load` (the fit reads it from there); friction_law: the
    true plant's friction law (twinlake.sim.arm_model.plant.FRICTION_LAWS; like every truth, not stated in
    the metadata: a fit has to find it).

    guards: fr3_stack's streaming-guard bounds (default: from the reference's metadata.json,
    else fr3_stack's defaults), checked before each reference row as its client checks before
    each send (`SendChecks`); the report goes into the result and the meta companion
    (`guards`, `excitation_status`). enforce_guards: the recording ends at the first check an
    enforced guard fails, as the live client's run would (it aborts and terminates)."""
    out_csv = Path(out_csv)
    t_ref, q_ref = read_reference_csv(reference_csv)
    bounds = guards or GuardBounds.from_metadata(reference_metadata(reference_csv))
    params = load_params(truth_path or DEMO_PROFILE_PATH)
    if payload is not None:
        params = params.with_payload(payload)
    cmd_ticks = _command_ticks(t_ref)
    n_ticks = int(cmd_ticks[-1] + round(tail_s / TICK_S)) + 1
    robot = RobotTicker(params, noise, seed, q0=q_ref[0], configured_load=configured_load, friction_law=friction_law)
    gains = (np.asarray(k_joint, float), np.asarray(d_joint, float), float(filter_alpha))
    first = JointImpedanceCommand(robot.sim.q)  # initial controller: joint impedance at the live q
    checks = SendChecks(GuardMonitor(bounds.validate(), q_ref[0].copy(), enforce_guards), cmd_ticks, q_ref,
                        enforce_guards)
    started = time.perf_counter()
    fd = os.open(out_csv, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, C.HEADER.encode())
        with _CsvSink(fd) as sink:
            table = CommandTable(np.concatenate(([0], cmd_ticks)),
                                 [first, *(command for _, command in _commands(cmd_ticks, q_ref, gains))])
            written = _simulate_compiled(robot, n_ticks, table, sink, progress, checks)
            if written is None:
                written = _simulate(robot, n_ticks, first, _commands(cmd_ticks, q_ref, gains), sink, progress, checks)
    finally:
        os.close(fd)
    n_ticks = written
    wall = time.perf_counter() - started
    status = RecordingStatus(recording_id=f"offline-{out_csv.stem}", path=str(out_csv.resolve()), ok=True,
                             finished=True, complete=True, written=n_ticks)
    meta = _meta(reference_csv, robot_id, status, gains, seed, noise, q_ref[0])
    meta["configured_load"] = configured_load.to_json()
    report = checks.monitor.report(enforce_guards, OFFLINE_GUARD_NOTE)
    meta["guards"] = report
    meta["excitation_status"] = "aborted" if enforce_guards and report["would_abort"] else "completed"
    write_companions(out_csv, status, meta)
    return OfflineResult(out_csv, n_ticks, n_ticks * TICK_S, wall, status, report)


def _commands(cmd_ticks: np.ndarray, q_ref: np.ndarray, gains: tuple):
    """Yield (tick, sim command) per reference row: a jointImpedance command with the
    recording's gains, through the daemon's command semantics (`sim_command`)."""
    for tick, q in zip(cmd_ticks.tolist(), q_ref):
        yield tick, sim_command(WireJoint(q, *gains, False))


def _simulate_compiled(robot: RobotTicker, n_ticks: int, commands: CommandTable, sink: "_CsvSink",
                       progress, checks: "SendChecks | None" = None) -> int | None:
    """Run n_ticks ticks with every command known up front (`commands`: the first, then each
    reference row through `sim_command`) in chunks of CHUNK_ROWS rows, one compiled call each
    (`RobotTicker.advance_commanded`, which takes each command at its tick); each finished
    chunk goes to `sink` with the columns left to fill (`_finish_chunk`; two chunk buffers: the
    sink finishes and formats one while the next is simulated).
    The noise is drawn per chunk (the same stream as tick by tick). Returns the rows written
    (fewer when `checks` stops the run); None (nothing run) if the compiled loop cannot run
    (then `_simulate`)."""
    if not robot.sim.runs_compiled():
        return None  # before any noise is drawn: `_simulate` starts the stream from its beginning
    size = min(CHUNK_ROWS, n_ticks)
    buffers = [(C.empty_frames(size), np.zeros((size, 9)), np.zeros(size, dtype=np.int64)) for _ in range(2)]
    for chunk, start in enumerate(range(0, n_ticks, size)):
        count = min(size, n_ticks - start)
        batch, xmats, versions = (a[:count] for a in buffers[chunk % 2])
        offsets = robot.noise.block(count)
        if not robot.advance_commanded(start, commands, offsets, batch, xmats, versions):
            raise RuntimeError("the compiled loop stopped running mid-recording")
        keep = count if checks is None else checks.check(batch, start)
        sink.put(batch[:keep], _finish_chunk, xmats[:keep], versions[:keep], commands.states, start)
        if progress is not None:
            progress((start + count) / n_ticks)
        if keep < count:
            return start + keep
    return n_ticks


def _finish_chunk(rows: np.ndarray, xmats: np.ndarray, versions: np.ndarray, states: np.ndarray, start: int) -> None:
    """The columns advance_commanded leaves: config (from the state of the command in force,
    `versions` (n,) into states (C, STATE_WIDTH); a command's row is final once taken), pose, time."""
    taken = states[:int(versions.max()) + 1]  # the loop may be filling later rows meanwhile
    rows[:, CONFIG_COLUMNS] = config_columns(taken)[versions]
    _fill_pose_and_time(rows, xmats, start)


def _simulate(robot: RobotTicker, n_ticks: int, first, commands, sink: "_CsvSink", progress,
              checks: "SendChecks | None" = None) -> int:
    """Run n_ticks ticks in batches of BATCH_ROWS rows; each finished batch goes to `sink`.

    Within a batch the ticks from one command to the next run in one compiled call
    (`RobotTicker.advance_many`); a command is taken in Python at its tick, on that tick's
    noise row (the noise is drawn per batch: the same stream as tick by tick). Returns the rows
    written (fewer when `checks` stops the run)."""
    batch = C.empty_frames(BATCH_ROWS)
    xmats = np.zeros((BATCH_ROWS, 9))
    versions = np.zeros(BATCH_ROWS, dtype=np.int64)  # config version of each row
    configs = {}  # config version -> its frame's config columns
    pending = next(commands, None)
    for start in range(0, n_ticks, BATCH_ROWS):
        count = min(BATCH_ROWS, n_ticks - start)
        offsets = robot.noise.block(count)
        i = 0
        while i < count:
            tick = start + i
            command = first if tick == 0 else None
            while pending is not None and pending[0] <= tick:  # latest wins
                command = pending[1]
                pending = next(commands, None)
            if command is not None:
                robot.take_command(command, offsets[i])
                configs[robot.config_version] = robot.config_row[CONFIG_COLUMNS].copy()
            end = count if pending is None else max(i + 1, min(count, pending[0] - start))
            robot.advance_many(offsets[i:end], batch[i:end], xmats[i:end])
            versions[i:end] = robot.config_version
            i = end
        rows = batch[:count]
        _fill_batch_columns(rows, xmats[:count], versions[:count], configs, start)
        configs = {versions[count - 1]: configs[versions[count - 1]]}
        keep = count if checks is None else checks.check(rows, start)
        sink.put(rows[:keep].copy())  # the sink may still be formatting it while the next batch fills
        if progress is not None:
            progress((start + count) / n_ticks)
        if keep < count:
            return start + keep
    return n_ticks


class _CsvSink:
    """Formats batches (compiled, ~2 µs a row, without the GIL) and writes them in order, on one
    worker thread: `put(rows)` waits for the batch before it, then hands `rows` over, so the
    caller may refill a batch only after the next put (two alternating buffers). The text goes
    into one reused buffer and is written from there (no copy)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._text = np.empty(0, dtype=np.uint8)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="csv-sink")
        self._pending = None

    def _write(self, rows: np.ndarray, finish=None, *args) -> None:
        if finish is not None:
            finish(rows, *args)
        need = C.text_bytes_needed(rows)
        if self._text.size < need:
            self._text = np.empty(need, dtype=np.uint8)
        end = C.format_rows_into(rows, self._text)
        _write_all(self.fd, memoryview(self._text)[:end])

    def put(self, rows: np.ndarray, finish=None, *args) -> None:
        """Format and write rows (n, 80) on the worker, after `finish(rows, *args)` there (the
        columns left to fill, with numpy while the caller's compiled loop runs without the GIL)."""
        self.flush()
        self._pending = self._pool.submit(self._write, rows, finish, *args)

    def flush(self) -> None:
        """Wait for the batch in hand (its error, if any, is raised here)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> "_CsvSink":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.flush()
            elif self._pending is not None:
                self._pending.exception()  # wait, so nothing writes to the fd after it closes
        finally:
            self._pool.shutdown(wait=True)


def _fill_batch_columns(rows: np.ndarray, xmats: np.ndarray, versions: np.ndarray, configs: dict,
                       start: int) -> None:
    """The columns `RobotTicker.advance` leaves to the caller, for a batch starting at tick `start`."""
    keys = np.array(sorted(configs))
    table = np.stack([configs[k] for k in keys])
    rows[:, CONFIG_COLUMNS] = table[np.searchsorted(keys, versions)]
    _fill_pose_and_time(rows, xmats, start)


def _fill_pose_and_time(rows: np.ndarray, xmats: np.ndarray, start: int) -> None:
    """The EE quaternion (from the rotation matrices (n, 9)), seq, times and period of rows
    starting at tick `start`."""
    rows[:, _EE_QUAT] = quat_xyzw_from_mats(xmats)
    rows[:, C.SEQ.start] = np.arange(start, start + len(rows))
    rows[:, C.T_S.start] = rows[:, C.SEQ.start] * TICK_S
    rows[:, C.ROBOT_TIME_S.start] = rows[:, C.SEQ.start] * TICK_S
    rows[:, C.CONTROL_PERIOD_S.start] = TICK_S


OFFLINE_GUARD_NOTE = ("offline: each reference row is checked against the state of the daemon's latest "
                      "5 ms publication before it (no network: the state age is that publication's age; "
                      "lateness and the terminal settle are not checked)")


class SendChecks:
    """fr3_stack's client checks before each send, offline: before reference row i (tick k_i)
    the state of the latest state publication (tick k_i − k_i mod 5: the daemon publishes every
    5 ms), against the anchor (the first row) and the last sent row, through `monitor`.
    `check(rows, start)` takes the frames of the ticks start.. as they are simulated."""

    def __init__(self, monitor: GuardMonitor, cmd_ticks: np.ndarray, q_ref: np.ndarray, enforce: bool) -> None:
        self.monitor, self.enforce = monitor, enforce
        self.ticks = cmd_ticks
        self.pub, self.age_s, self.last_sent = send_checks(cmd_ticks, q_ref, TICK_S)
        self.done = 0  # rows checked so far
        self._tail = np.zeros((0, C.FRAME_WIDTH))  # the last frames of the previous chunk
        self._tail_start = 0

    def check(self, rows: np.ndarray, start: int) -> int:
        """Check the sends whose state lies in `rows` (ticks start.. start + n − 1); returns how
        many rows to keep: all, or (enforced, a guard fired) through the tick of that send."""
        frames = np.vstack([self._tail, rows[:, :]]) if len(self._tail) else rows
        first_tick = self._tail_start if len(self._tail) else start
        end = start + len(rows)
        todo = np.arange(self.done, np.searchsorted(self.ticks, end, side="left"))
        todo = todo[self.pub[todo] >= first_tick]
        if todo.size:
            at = self.pub[todo] - first_tick
            stop = self.monitor.feed(self.ticks[todo] * TICK_S, frames[at][:, C.Q], frames[at][:, C.DQ],
                                     self.last_sent[todo], self.age_s[todo])
            self.done = int(todo[-1]) + 1
            if self.enforce and stop is not None:
                return int(self.ticks[todo[stop]] - start) + 1
        self._tail, self._tail_start = rows[-8:].copy(), end - min(8, len(rows))
        return len(rows)


def reference_metadata(reference_csv) -> dict | None:
    """The metadata.json beside a reference.csv (its plan and guard settings), None if absent or unreadable."""
    try:
        return json.loads(Path(reference_csv).with_name("metadata.json").read_text())
    except (OSError, ValueError):
        return None


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _meta(reference_csv, robot_id, status, gains, seed, noise, anchor) -> dict:
    ref = Path(reference_csv)
    plan, design = None, None
    sibling = ref.with_name("metadata.json")
    if sibling.is_file():
        try:
            plan_meta = json.loads(sibling.read_text())
            plan, design = plan_meta.get("plan"), plan_meta.get("design")
            robot_id = robot_id or plan_meta.get("robot_id")
        except (OSError, ValueError):
            plan, design = None, None
    k, d, alpha = gains
    return recording_meta(
        robot_id=robot_id, source="twinlake sim record", recording_id=status.recording_id,
        gains={"K_joint": k.tolist(), "D_joint": d.tolist(), "filter_alpha": alpha, "use_friction": False},
        plan=plan, anchor_q_rad=anchor, reference=ref.name, created_at_utc=None, seed=seed,
        noise={"q_std_rad": noise.q_std_rad, "dq_std_rad_s": noise.dq_std_rad_s, "tau_std_nm": noise.tau_std_nm},
        time_base="simulated", **({"design": design} if design is not None else {}),
    )
