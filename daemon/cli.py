"""Command-line commands owned by twinlake.daemon (registered on the root app).

`twinlake record ...`, `twinlake daemon serve`, `twinlake excite`, and `twinlake sim record`
(added to the sim helper's `sim` group).
"""

from __future__ import annotations

import typer

from .excite_cli import excite
from .record_cli import record_app


def register(app: typer.Typer) -> None:
    """Add this folder's commands to the root `twinlake` app."""
    app.add_typer(record_app, name="record")
    app.add_typer(daemon_app, name="daemon")
    app.command("excite")(excite)
    from twinlake.sim.cli import sim_app

    if not any(c.name == "record" for c in sim_app.registered_commands):
        sim_app.command("record")(sim_record)


daemon_app = typer.Typer(help="Run the sim-backed FR3 daemon (fr3_stack wire protocol).", no_args_is_help=True)


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
) -> None:
    """Serve a simulated FR3 at 1 kHz; exit 2 if any recording failed or was incomplete."""
    import signal

    import zmq

    from .noise import NoiseConfig
    from .server import DaemonConfig, Fr3Daemon

    if joint and idle:
        typer.echo("twinlake daemon serve: --joint and --idle are exclusive", err=True)
        raise typer.Exit(1)
    initial_controller = "joint_impedance" if joint else "idle" if idle else initial_controller
    try:
        config = DaemonConfig(host=host, cmd_port=cmd_port, state_port=state_port,
                              recording_port=recording_port, truth_path=truth,
                              noise=NoiseConfig.parse(noise), seed=seed,
                              initial_controller=initial_controller, log_1khz=log_1khz,
                              rt_priority=rt_priority)
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
    import sys

    sys.stdout.flush()


def sim_record(
    reference: str = typer.Option(..., "--reference", help="reference.csv (t_s, q_ref1..7) from `twinlake excite`."),
    out: str = typer.Option(..., "--out", help="Output CSV v2 path (must not exist)."),
    truth: str | None = typer.Option(None, "--truth", help="True dynamics: profile JSON or sysid_best_params.json (default: bundled demo robot)."),
    seed: int = typer.Option(0, "--seed", help="Noise seed."),
    noise: str = typer.Option("q=2e-5,dq=5e-4,tau=0.05", "--noise", help="'none' or q=RAD,dq=RAD_S,tau=NM."),
    tail: float = typer.Option(1.0, "--tail", help="Seconds simulated after the last reference row."),
    robot_id: str | None = typer.Option(None, "--robot-id", help="Robot identity for the meta file (default: the reference's metadata.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Offline recorder: the daemon's plant, controller and CSV writer in simulated time."""
    import json

    from rich.progress import Progress

    from .noise import NoiseConfig
    from .offline import record_offline

    try:
        with Progress(transient=True, disable=json_out) as progress:
            task = progress.add_task("simulating", total=1.0)
            result = record_offline(reference, out, truth_path=truth, seed=seed, noise=NoiseConfig.parse(noise),
                                    tail_s=tail, robot_id=robot_id,
                                    progress=lambda f: progress.update(task, completed=f))
    except (ValueError, OSError) as exc:
        typer.echo(f"twinlake sim record: {exc}", err=True)
        raise typer.Exit(1)
    summary = {"csv": str(result.csv_path), "rows": result.rows, "sim_seconds": result.sim_seconds,
               "wall_seconds": round(result.wall_seconds, 3), "speedup": round(result.speedup, 2),
               "status": result.status.to_dict()}
    typer.echo(json.dumps(summary) if json_out else
               f"{result.rows} rows, {result.sim_seconds:g} s simulated in {result.wall_seconds:.2f} s "
               f"({result.speedup:.1f}x real time) -> {result.csv_path}")
