"""`twinlake daemon serve`, `twinlake record ...` and `twinlake excite`: the sim-backed FR3
daemon, its recording service as fr3_stack's `fr3-recording`, and fr3_stack's joint excitation
(docs/daemon.md), over twinlake.daemon.

`twinlake record` prints the 11-key status JSON on stdout (one line). Exit 0 on success; 2 for a
refused or invalid request, a status with an error, or a stop that is not complete; 3 for a
timeout (outcome unconfirmed). Errors are JSON on stderr.

`twinlake excite`: plan, preview and (with --execute) stream a joint excitation. The command
line is fr3_stack's `examples/joint_sysid.py`: lists are space-separated (`--joints 1 2 3`,
`--tones 0.1 0.23 0.41`, `--q0-rad 0 -0.785 0 -2.356 0 1.571 0.785`, the root app's value-list
convention, twinlake/option_lists.py) or comma-separated (`--joints 1,2,3`). Without `--output`
the run goes to a new `recordings/joint-<UTC time>`. Exit 0 on success, 1 on any error (bad
plan, existing output directory, guard abort), 130 on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import typer

from ..options import DESIGN_LAKE, TRUE_FRICTION_LAW, TRUE_PAYLOAD
from .lake_session import bucket_sessions

daemon_app = typer.Typer(help="Run the sim-backed FR3 daemon (fr3_stack wire protocol).", no_args_is_help=True)
record_app = typer.Typer(help="Start, stop or query a daemon's 1 kHz recording (port 5557).",
                         no_args_is_help=True)


@daemon_app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (use * for all)."),
    cmd_port: int = typer.Option(5555, "--cmd-port", help="Command PULL port (0 = ephemeral)."),
    state_port: int = typer.Option(5556, "--state-port", help="State PUB port (0 = ephemeral)."),
    recording_port: int = typer.Option(5557, "--recording-port", help="Recording REP port (0 = ephemeral)."),
    truth: str | None = typer.Option(None, "--truth", help="True dynamics: profile JSON or sysid_best_params.json (default: bundled demo robot)."),
    noise: str = typer.Option("q=2e-5,dq=5e-4,tau=0.05", "--noise", help="Measurement noise std: 'none' or q=RAD,dq=RAD_S,tau=NM."),
    seed: int = typer.Option(0, "--seed", help="Noise seed."),
    initial_controller: str = typer.Option("joint_impedance", "--initial-controller", help="joint_impedance (hold the start pose; what `twinlake excite --execute` needs) or idle."),
    joint: bool = typer.Option(False, "--joint", help="Shorthand for --initial-controller joint_impedance."),
    idle: bool = typer.Option(False, "--idle", help="Shorthand for --initial-controller idle."),
    log_1khz: str | None = typer.Option(None, "--log-1khz", help="Start a recording at startup (ID startup-<ns>)."),
    duration: float | None = typer.Option(None, "--duration", help="Stop after this many seconds (default: until terminated)."),
    rt_priority: int = typer.Option(0, "--rt-priority", help="SCHED_FIFO priority 1..99 for the daemon's threads (0 = normal scheduling)."),
    payload: str | None = TRUE_PAYLOAD,
    configured_load: str | None = typer.Option(None, "--configured-load", help="The firmware's configured load MASS[,X,Y,Z] (its gravity compensation; default: none)."),
    friction_law: str = TRUE_FRICTION_LAW,
) -> None:
    """Serve a simulated FR3 at 1 kHz; exit 2 if any recording failed or was incomplete."""
    import zmq

    from ..daemon.noise import NoiseConfig
    from ..daemon.server import DaemonConfig, Fr3Daemon

    if joint and idle:
        typer.echo("twinlake daemon serve: --joint and --idle are exclusive", err=True)
        raise typer.Exit(1)
    initial_controller = "joint_impedance" if joint else "idle" if idle else initial_controller
    try:
        from ..sim.arm_model.load import NO_LOAD, parse_load

        config = DaemonConfig(host=host, cmd_port=cmd_port, state_port=state_port,
                              recording_port=recording_port, truth_path=truth,
                              noise=NoiseConfig.parse(noise), seed=seed,
                              initial_controller=initial_controller, log_1khz=log_1khz,
                              rt_priority=rt_priority,
                              payload=None if payload is None else parse_load(payload, "--payload"),
                              configured_load=NO_LOAD if configured_load is None else parse_load(configured_load),
                              friction_law=friction_law)
        daemon = Fr3Daemon(config)
    except (ValueError, OSError, zmq.ZMQError) as exc:  # bad flags, truth file, port in use
        typer.echo(f"twinlake daemon serve: {exc}", err=True)
        raise typer.Exit(1)
    shown = "*" if host in ("0.0.0.0", "*") else host
    typer.echo(f"cmd   PULL  on tcp://{shown}:{daemon.ports['cmd']}")
    typer.echo(f"state PUB   on tcp://{shown}:{daemon.ports['state']}")
    typer.echo(f"record REP  on tcp://{shown}:{daemon.ports['recording']}", )
    typer.echo(f"truth {daemon.truth_path}", err=True)
    sys_stdout_flush()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: daemon.stop())
    raise typer.Exit(daemon.run(duration))


def sys_stdout_flush() -> None:
    sys.stdout.flush()


def _run(ctx: typer.Context, action: str, **kwargs) -> None:
    from ..daemon.client import Fr3Client, RecordingError, RecordingTimeout

    opts = ctx.obj
    client = None
    try:
        client = Fr3Client(opts["host"], recording_port=opts["port"])
        if action == "start":
            status = client.start_recording(kwargs["path"], recording_id=kwargs["recording_id"],
                                            timeout=opts["timeout"])
        elif action == "stop":
            status = client.stop_recording(kwargs["recording_id"], timeout=opts["timeout"])
        else:
            status = client.recording_status(timeout=opts["timeout"])
    except RecordingTimeout as exc:
        print(json.dumps({"error": str(exc), "recording_id": exc.recording_id, "outcome": "unconfirmed"}),
              file=sys.stderr)
        raise typer.Exit(3)
    except RecordingError as exc:
        print(json.dumps({"error": str(exc), "status": exc.status.to_dict()}), file=sys.stderr)
        raise typer.Exit(2)
    except ValueError as exc:
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        raise typer.Exit(2)
    finally:
        if client is not None:
            client.close()
    print(json.dumps(status.to_dict()))
    if status.error or (action == "stop" and not status.complete):
        raise typer.Exit(2)


@record_app.callback()
def record_options(
    ctx: typer.Context,
    host: str = typer.Option(..., "--host", help="Daemon address (the NUC, or 127.0.0.1)."),
    port: int = typer.Option(5557, "--port", help="Recording service port."),
    timeout: float = typer.Option(5.0, "--timeout", help="Whole-exchange timeout in seconds."),
) -> None:
    """Talk to the recording service of one daemon."""
    ctx.obj = {"host": host, "port": port, "timeout": timeout}


@record_app.command("start")
def record_start(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="Absolute path on the daemon's machine; must not exist."),
    recording_id: str | None = typer.Option(None, "--recording-id", help="1–128 of [A-Za-z0-9_-]; default a uuid4 hex."),
) -> None:
    """Start a recording; the file is created exclusively."""
    _run(ctx, "start", path=path, recording_id=recording_id)


@record_app.command("stop")
def record_stop(ctx: typer.Context, recording_id: str = typer.Argument(..., help="ID of the run to stop.")) -> None:
    """Stop the recording with this ID; exit 2 unless it is complete."""
    _run(ctx, "stop", recording_id=recording_id)


@record_app.command("status")
def record_status(ctx: typer.Context) -> None:
    """Status of the current or most recent recording."""
    _run(ctx, "status")


def _floats(values: list[str], name: str, count: int | None = None) -> tuple[float, ...] | None:
    """The numbers in `values` (items split at commas and spaces); None when none were given.
    count: the values must be 1 (repeated `count` times) or `count`."""
    if not values:
        return None
    numbers = []
    for item in " ".join(values).replace(",", " ").split():
        try:
            numbers.append(float(item))
        except ValueError:
            raise ValueError(f"{name}: expected numbers, got {item!r}") from None
    if not numbers:
        raise ValueError(f"{name}: expected numbers, got none")
    if count is not None and len(numbers) not in (1, count):
        raise ValueError(f"{name}: expected 1 or {count} values, got {len(numbers)}")
    return tuple(numbers * count if count is not None and len(numbers) == 1 else numbers)


def _joints(values: list[str]) -> tuple[int, ...]:
    numbers = _floats(values, "--joints") or ()
    if any(not float(j).is_integer() for j in numbers):
        raise ValueError(f"--joints: expected joint numbers 1..7, got {' '.join(values)!r}")
    return tuple(int(j) for j in numbers)


@bucket_sessions
def excite(
    mode: str = typer.Option("sine", "--mode", help="hold, sine, chirp or multisine."),
    joints: list[str] = typer.Option(["1"], "--joints", help="Joints 1..7: space- or comma-separated (--joints 1 2 3)."),
    seconds: float = typer.Option(20.0, "--seconds", help="Per-joint segment (sine/chirp) or total excitation (multisine) [s]."),
    ramp: float = typer.Option(5.0, "--ramp", help="Envelope fade-in/out per segment, seconds."),
    hold: float = typer.Option(2.0, "--hold", help="Hold before and after, seconds."),
    gap: float = typer.Option(2.0, "--gap", help="Hold between sine/chirp segments, seconds."),
    amplitude_deg: float = typer.Option(1.0, "--amplitude-deg", help="Peak offset bound per joint, degrees."),
    f0: float = typer.Option(0.1, "--f0", help="Sine frequency / chirp start, Hz."),
    f1: float = typer.Option(0.5, "--f1", help="Chirp end frequency, Hz."),
    tones: list[str] = typer.Option(["0.1", "0.23", "0.41"], "--tones", help="Multisine tones, Hz, space- or comma-separated."),
    seed: int = typer.Option(0, "--seed", help="Multisine phase seed."),
    rate: float = typer.Option(60.0, "--rate", help="Command rate, Hz (10..200)."),
    max_velocity: float = typer.Option(0.1, "--max-velocity", help="Reference velocity bound, rad/s."),
    max_acceleration: float = typer.Option(0.3, "--max-acceleration", help="Reference acceleration bound, rad/s²."),
    max_jerk: float = typer.Option(2.0, "--max-jerk", help="Reference jerk bound, rad/s³."),
    output: str | None = typer.Option(None, "--output", help="New output directory (default recordings/joint-<UTC time>, e.g. joint-20260923T141503-123456Z)."),
    q0_rad: list[str] = typer.Option([], "--q0-rad", help="Preview anchor: 7 joint angles, rad, space- or comma-separated (not with --execute)."),
    execute: bool = typer.Option(False, "--execute", help="Stream to a daemon (needs --host and --robot-id)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Preview only, never connect (the default; not with --execute)."),
    host: str | None = typer.Option(None, "--host", help="Daemon address."),
    robot_id: str | None = typer.Option(None, "--robot-id", help="Robot identity recorded in metadata."),
    cmd_port: int = typer.Option(5555, "--cmd-port"),
    state_port: int = typer.Option(5556, "--state-port"),
    recording_port: int = typer.Option(5557, "--recording-port"),
    record: str | None = typer.Option(None, "--record", help="Start/stop a daemon 1 kHz recording at PATH around the run (relative: inside --output)."),
    kp: list[str] = typer.Option([], "--kp", help="Joint stiffness, N·m/rad (1 or 7 values)."),
    kd: list[str] = typer.Option([], "--kd", help="Joint damping, N·m·s/rad (1 or 7 values)."),
    filter_alpha: float | None = typer.Option(None, "--filter-alpha", help="Target EMA alpha (0, 1]."),
    tracking_error: float = typer.Option(0.05, "--tracking-error", help="Abort when the tracking error (under --tracking-rule) exceeds this, rad."),
    tracking_rule: str = typer.Option("anchor", "--tracking-rule", help="anchor: |q − anchor| (what fr3_stack's client code compares; the project's rule) | target: |q − last sent target| (what its docs state)."),
    stale_after: float = typer.Option(0.2, "--stale-after", help="Abort when state is older than this, seconds."),
    max_lateness: float = typer.Option(0.05, "--max-lateness", help="Abort when a send is this late, seconds."),
    finish: str = typer.Option("hold", "--finish", help="hold (stay in joint impedance) or terminate."),
    experiment_metadata: str | None = typer.Option(None, "--experiment-metadata", help="JSON object stored in metadata."),
    nuc_log: str | None = typer.Option(None, "--nuc-log", help="Reference string of a separate NUC log."),
    design: bool = typer.Option(False, "--design", help="Design the multisine (tones, amplitudes, phases per joint) that minimises the predicted half-widths of --params, within the bounds and --seconds (twinlake/excitation_design/); --tones, --amplitude-deg and --joints are then chosen."),
    design_for: str | None = typer.Option(None, "--for", help="--design: linearise at this fit id (in --lake) or profile JSON (default: the nominal parameters)."),
    params: list[str] = typer.Option([], "--params", help="--design: the parameters served, as `fit run --params` (default: the default fit's 28 continuous ones)."),
    criterion: str = typer.Option("worst", "--criterion", help="--design: worst (largest relative 95 % half-width) or d (D-optimal)."),
    no_confirm: bool = typer.Option(False, "--no-confirm", help="--design: skip the confirmation (one replay Jacobian of the chosen design, the fit's HAC rule; ~20 s for 40 s) and print and store the surrogate's prediction, stated as such."),
    lake: Path | None = DESIGN_LAKE,
    configured_load: str | None = typer.Option(None, "--configured-load", help="The end-effector load set in Desk / setLoad, MASS[,X,Y,Z] (kg; CoM m in the flange frame): stored in metadata.json as configured_load, which the fit replays with."),
) -> None:
    """Joint excitation: preview files by default; --execute streams to a daemon."""
    from ..daemon.excitation import Plan, validate_plan
    from ..daemon.excite_run import Gains, Guards, load_experiment, new_output_dir, run_preview
    from ..sim.arm_model.load import parse_load

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        if dry_run and execute:
            raise ValueError("--dry-run previews without connecting; it cannot be combined with --execute")
        plan = Plan(mode=mode, joints=_joints(joints),
                    amplitude_deg=amplitude_deg, seconds=seconds, ramp=ramp, hold=hold, gap=gap, f0=f0, f1=f1,
                    tones=_floats(tones, "--tones"), seed=seed, rate=rate, max_velocity=max_velocity,
                    max_acceleration=max_acceleration, max_jerk=max_jerk)
        guards = Guards(stale_after=stale_after, tracking_error=tracking_error, max_lateness=max_lateness,
                        max_velocity=max_velocity, tracking_rule=tracking_rule).validate()
        if execute and (not host or not robot_id):
            raise ValueError("--execute needs --host and --robot-id")
        if execute and q0_rad:
            raise ValueError("--execute uses the live anchor; --q0-rad is for previews only")
        if finish not in ("hold", "terminate"):
            raise ValueError(f"--finish: expected hold or terminate, got {finish!r}")
        q0 = _floats(q0_rad, "--q0-rad")
        if q0 is not None and len(q0) != 7:
            raise ValueError(f"--q0-rad: expected 7 joint angles, got {len(q0)}")
        validate_plan(plan)
        base = Gains()
        gains = Gains(k_joint=_floats(kp, "--kp", 7) or base.k_joint, d_joint=_floats(kd, "--kd", 7) or base.d_joint,
                      filter_alpha=base.filter_alpha if filter_alpha is None else filter_alpha).validate()
        experiment = load_experiment(experiment_metadata)  # before anything is written
        load = None if configured_load is None else parse_load(configured_load)
        plan, design_section = _design(plan, q0, design, design_for, params, criterion, lake, tracking_error,
                                       not no_confirm)
        if not execute:  # refuse a preview that cannot pass before its directory exists
            from ..daemon.excitation import PREVIEW_ANCHOR_Q, preflight

            preflight(plan, PREVIEW_ANCHOR_Q if q0 is None else q0)
        out_dir = new_output_dir(output)
        if not execute:
            meta = run_preview(plan, out_dir, q0, robot_id=robot_id, guards=guards, configured_load=load,
                               design=design_section)
            summary = {"output": str(out_dir), "status": meta["status"], "total_s": plan.total_s}
            if design_section is not None:
                summary["predicted_worst_rel"] = design_section["predicted_worst_rel"]
                summary["baseline_predicted_worst_rel"] = design_section["baseline_predicted_worst_rel"]
            typer.echo(json.dumps(summary))
            return
        _execute(plan, out_dir, host, robot_id, guards, record, gains, finish,
                 experiment, nuc_log, cmd_port, state_port, recording_port, load, design_section)
    except KeyboardInterrupt:
        typer.echo("twinlake excite: interrupted", err=True)
        raise typer.Exit(130)
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001  one-line error in the user's terms, exit 1
        typer.echo(f"twinlake excite: {_said(exc)}", err=True)
        raise typer.Exit(1)


def _said(exc: BaseException) -> str:
    """An error as the user reads it: its message (never a Python class name); an OS error
    with its file."""
    if isinstance(exc, FileExistsError):
        return f"{exc.filename}: already exists (--output must name a new directory)"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc) or "failed without a message"


def _design(plan, q0, design, design_for, params, criterion, lake, tracking_error, confirm=True):
    """(plan, None) without --design; else the designed plan and its metadata section, the
    predicted half-widths printed on stderr before anything moves."""
    if not design:
        if design_for is not None or params or criterion != "worst" or not confirm:
            raise ValueError("--for, --params, --criterion and --no-confirm need --design")
        return plan, None
    from dataclasses import replace

    from ..daemon.excitation import PREVIEW_ANCHOR_Q
    from ..excitation_design.excite import run_design, summary_lines

    anchor = PREVIEW_ANCHOR_Q if q0 is None else q0
    if design_for is not None and not Path(design_for).is_file():
        from .lake_session import lake_root

        lake = lake_root(lake)
    base = replace(plan, mode="multisine", joints=tuple(range(1, 8)))
    designed, section = run_design(base, anchor, design_for=design_for, lake=lake, params=params,
                                   criterion=criterion, tracking_error_rad=tracking_error, confirm=confirm)
    for line in summary_lines(section):
        typer.echo(line, err=True)
    return designed.plan, section


def _execute(plan, out_dir, host, robot_id, guards, record, gains, finish, experiment,
             nuc_log, cmd_port, state_port, recording_port, configured_load, design=None) -> None:
    from ..daemon.client import Fr3Client
    from ..daemon.excite_abort import ExcitationAbort, abort_lines
    from ..daemon.excite_run import ExcitationRun
    from ..progress import Stages

    record_path = None
    if record is not None:
        record_path = record if record.startswith("/") else str((out_dir / record).resolve())
    client = Fr3Client(host, cmd_port, state_port, recording_port=recording_port, command_send_timeout_ms=20)
    try:
        with Stages("excite") as stages:
            run = ExcitationRun(plan, out_dir, client, robot_id=robot_id, gains=gains, guards=guards,
                                finish=finish, record_path=record_path, experiment=experiment, nuc_log=nuc_log,
                                configured_load=configured_load, progress=stages.fraction, on_stage=stages.stage)
            if design is not None:
                run.meta["design"] = design
            meta = run.run()
    except ExcitationAbort as exc:
        lines = abort_lines(exc, run.meta, host, out_dir)
        typer.echo("\n".join([f"twinlake excite: {lines[0]}", *(f"  {line}" for line in lines[1:])]), err=True)
        raise typer.Exit(1)
    finally:
        client.close()
    summary = {"output": str(out_dir), "status": meta["status"], "commands_sent": meta["commands_sent"]}
    if run.recording_status is not None:
        summary["recording"] = run.recording_status.to_dict()
    typer.echo(json.dumps(summary))
    if run.recording_status is not None and not run.recording_status.complete:
        typer.echo("twinlake excite: the recording is not complete", err=True)
        raise typer.Exit(1)
