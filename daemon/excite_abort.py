"""Why an executed excitation stopped, in the user's terms, and what addresses it.

fr3_stack's excitation client (`examples/joint_sysid.py`) aborts a run when a check before a
send fails and, once any motion command was attempted, asks the daemon to terminate: the
daemon then stops (specs: its `Robot.terminate()`, an idle command with `termination = true`).
A real arm's client faults the same way when its PC misses the loop, so the abort is right;
this module only makes it explain itself:

- `ExcitationAbort(message, cause)`: the exception the live run raises; `cause` is one of
  `CAUSES` and selects the advice.
- `daemon_answers(client, timeout_s)`: does the daemon's recording service still reply (a
  stopped daemon does not)?
- `no_daemon_message(client, waited_s)`: the refusal of a run that finds no daemon.
- `abort_lines(exc, meta, host)`: the lines `twinlake excite` prints on stderr: what stopped the
  run, what happened to the daemon, the options that address it, where the files are.
"""

from __future__ import annotations

LATE, GUARD, STALE, PREFLIGHT, NO_DAEMON, SETTLE, RECORD = (
    "late", "guard", "stale", "preflight", "no_daemon", "settle", "record")
CAUSES = (LATE, GUARD, STALE, PREFLIGHT, NO_DAEMON, SETTLE, RECORD)

_TIMING_ADVICE = (
    "what helps: `twinlake daemon serve --rt-priority N` (SCHED_FIFO for the daemon's threads; needs "
    "CAP_SYS_NICE or root), a larger `twinlake excite --max-lateness S` (e.g. 0.5: between sends the "
    "daemon holds the last target), or a less loaded machine (see `uptime`)")
_ADVICE = {
    LATE: _TIMING_ADVICE,
    STALE: _TIMING_ADVICE.replace("--max-lateness S` (e.g. 0.5", "--stale-after S` (e.g. 1.0"),
    GUARD: ("what helps: a smaller --amplitude-deg or lower frequencies (--f0/--f1/--tones), or, when the "
            "bound is too strict for your arm, a larger --tracking-error / --max-velocity"),
    SETTLE: "what helps: stiffer gains (--kp/--kd), or a smaller --amplitude-deg",
    PREFLIGHT: ("what helps: put the arm in joint impedance and let it come to rest (`twinlake daemon "
                "serve` starts so), then run `twinlake excite` again"),
    NO_DAEMON: "",
    RECORD: ("what helps: a --record path that does not exist yet, in a directory that exists on the daemon's "
             "machine (an absolute path there; a relative one lands in --output)"),
}


class ExcitationAbort(RuntimeError):
    """A live guard fired, the client was late, or the daemon misbehaved; the run is aborted.
    `cause`: one of `CAUSES` (what stopped it; selects the advice)."""

    def __init__(self, message: str, cause: str = GUARD) -> None:
        super().__init__(message)
        self.cause = cause if cause in CAUSES else GUARD


def daemon_answers(client, timeout_s: float = 0.5) -> bool:
    """True when the daemon's recording service replies to a status request within
    `timeout_s` [s]; False when it does not (a terminated daemon has closed its sockets)."""
    from .client import RecordingError, RecordingTimeout

    try:
        client.recording_status(timeout=timeout_s)
    except RecordingError:
        return True  # it answered, with a refusal
    except RecordingTimeout:
        return False
    return True


def no_daemon_message(client, waited_s: float) -> str:
    """The refusal of a run that received no state: names the address and ports."""
    return (f"no daemon answers on {client.host} (no state on port {client.state_port} within "
            f"{waited_s:g} s; commands go to port {client.cmd_port}): start one with `twinlake daemon "
            "serve` (an aborted excitation asks the daemon to terminate, so it has to be started again) "
            "or check --host / --state-port")


def abort_lines(exc: BaseException, meta: dict, host: str, out_dir) -> list[str]:
    """What `twinlake excite` prints when an executed run stops early, one line each: the
    cause (with the plan time reached), the daemon's fate, the advice, the kept files."""
    cause = getattr(exc, "cause", None)
    reached = meta.get("aborted_at_trajectory_s")
    where = "" if reached is None else f" at t = {reached:.3f} s of {meta['plan_total_s']:g} s"
    lines = [f"aborted{where}: {exc}"]
    if cause == NO_DAEMON:
        return lines
    termination = meta.get("termination")
    if termination == "attempted":
        stopped = meta.get("daemon_after_abort") == "stopped"
        lines.append(
            "as fr3_stack's client does after a fault, it asked the daemon to terminate; the daemon at "
            f"{host} " + ("has stopped: start it again (`twinlake daemon serve`) before the next run"
                          if stopped else "still answers (it did not stop; check it before the next run)"))
    elif termination:
        lines.append(f"the termination request failed ({termination[len('request_failed: '):]})")
    else:
        lines.append("no motion command had been sent, so the daemon was not asked to terminate")
    advice = _ADVICE.get(cause, "")
    if advice:
        lines.append(advice)
    recording = meta.get("recording") or {}
    kept = f"the run's files are kept in {out_dir} (metadata.json: status \"{meta.get('status')}\""
    if "stopped" in recording:
        kept += f"; the recording {recording['path']} holds {recording['stopped']['written']} rows up to the abort"
    lines.append(kept + ")")
    return lines


__all__ = ["CAUSES", "ExcitationAbort", "abort_lines", "daemon_answers", "no_daemon_message"]
