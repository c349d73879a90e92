"""`twinlake record`: start/stop/status of a daemon recording, as fr3_stack's `fr3-recording`.

Prints the 11-key status JSON on stdout (one line). Exit 0 on success; 2 for a refused or
invalid request, a status with an error, or a stop that is not complete; 3 for a timeout
(outcome unconfirmed). Errors are JSON on stderr.
"""

from __future__ import annotations

import json
import sys

import typer

from .client import Fr3Client, RecordingError, RecordingTimeout

record_app = typer.Typer(help="Start, stop or query a daemon's 1 kHz recording (port 5557).",
                         no_args_is_help=True)


def _run(ctx: typer.Context, action: str, **kwargs) -> None:
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
