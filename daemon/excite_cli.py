"""`twinlake excite`: plan, preview and (with --execute) stream a joint excitation.

The command line is fr3_stack's `examples/joint_sysid.py`: lists are space-separated
(`--joints 1 2 3`, `--tones 0.1 0.23 0.41`, `--q0-rad 0 -0.785 0 -2.356 0 1.571 0.785`, the
root app's value-list convention, twinlake/option_lists.py) or comma-separated
(`--joints 1,2,3`). Without `--output` the run goes to a new `recordings/joint-<UTC time>`.
Exit 0 on success, 1 on any error (bad plan, existing output directory, guard abort), 130 on
Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import json
import signal

import typer

from .excitation import Plan


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
    tracking_error: float = typer.Option(0.05, "--tracking-error", help="Abort when |q − last sent target| exceeds this, rad."),
    stale_after: float = typer.Option(0.2, "--stale-after", help="Abort when state is older than this, seconds."),
    max_lateness: float = typer.Option(0.05, "--max-lateness", help="Abort when a send is this late, seconds."),
    finish: str = typer.Option("hold", "--finish", help="hold (stay in joint impedance) or terminate."),
    experiment_metadata: str | None = typer.Option(None, "--experiment-metadata", help="JSON object stored in metadata."),
    nuc_log: str | None = typer.Option(None, "--nuc-log", help="Reference string of a separate NUC log."),
) -> None:
    """Joint excitation: preview files by default; --execute streams to a daemon."""
    from .excite_run import Gains, Guards, load_experiment, new_output_dir, run_preview

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        if dry_run and execute:
            raise ValueError("--dry-run previews without connecting; it cannot be combined with --execute")
        plan = Plan(mode=mode, joints=_joints(joints),
                    amplitude_deg=amplitude_deg, seconds=seconds, ramp=ramp, hold=hold, gap=gap, f0=f0, f1=f1,
                    tones=_floats(tones, "--tones"), seed=seed, rate=rate, max_velocity=max_velocity,
                    max_acceleration=max_acceleration, max_jerk=max_jerk)
        guards = Guards(stale_after=stale_after, tracking_error=tracking_error, max_lateness=max_lateness)
        if execute and (not host or not robot_id):
            raise ValueError("--execute needs --host and --robot-id")
        if execute and q0_rad:
            raise ValueError("--execute uses the live anchor; --q0-rad is for previews only")
        if finish not in ("hold", "terminate"):
            raise ValueError(f"--finish: expected hold or terminate, got {finish!r}")
        q0 = _floats(q0_rad, "--q0-rad")
        if q0 is not None and len(q0) != 7:
            raise ValueError(f"--q0-rad: expected 7 joint angles, got {len(q0)}")
        from .excitation import validate_plan

        validate_plan(plan)
        base = Gains()
        gains = Gains(k_joint=_floats(kp, "--kp", 7) or base.k_joint, d_joint=_floats(kd, "--kd", 7) or base.d_joint,
                      filter_alpha=base.filter_alpha if filter_alpha is None else filter_alpha).validate()
        experiment = load_experiment(experiment_metadata)  # before anything is written
        out_dir = new_output_dir(output)
        if not execute:
            meta = run_preview(plan, out_dir, q0, robot_id=robot_id, guards=guards)
            typer.echo(json.dumps({"output": str(out_dir), "status": meta["status"],
                                   "total_s": plan.total_s}))
            return
        _execute(plan, out_dir, host, robot_id, guards, record, gains, finish,
                 experiment, nuc_log, cmd_port, state_port, recording_port)
    except KeyboardInterrupt:
        typer.echo("twinlake excite: interrupted", err=True)
        raise typer.Exit(130)
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001  one-line error, exit 1
        typer.echo(f"twinlake excite: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1)


def _execute(plan, out_dir, host, robot_id, guards, record, gains, finish, experiment,
             nuc_log, cmd_port, state_port, recording_port) -> None:
    from rich.progress import Progress

    from .client import Fr3Client
    from .excite_run import ExcitationRun

    record_path = None
    if record is not None:
        record_path = record if record.startswith("/") else str((out_dir / record).resolve())
    client = Fr3Client(host, cmd_port, state_port, recording_port=recording_port, command_send_timeout_ms=20)
    try:
        with Progress(transient=True) as progress:
            task = progress.add_task(f"{plan.mode} {plan.total_s:g} s", total=1.0)
            run = ExcitationRun(plan, out_dir, client, robot_id=robot_id, gains=gains, guards=guards,
                                finish=finish, record_path=record_path, experiment=experiment, nuc_log=nuc_log,
                                progress=lambda f: progress.update(task, completed=f))
            meta = run.run()
    finally:
        client.close()
    summary = {"output": str(out_dir), "status": meta["status"], "commands_sent": meta["commands_sent"]}
    if run.recording_status is not None:
        summary["recording"] = run.recording_status.to_dict()
    typer.echo(json.dumps(summary))
    if run.recording_status is not None and not run.recording_status.complete:
        typer.echo("twinlake excite: the recording is not complete", err=True)
        raise typer.Exit(1)
