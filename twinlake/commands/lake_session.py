"""The lake directory of a command that works on a local lake's files (fit, validation,
campaign), for a `--lake` that may be a bucket.

    @bucket_sessions
    def show_cmd(..., lake=OBJECT_LAKE):
        root = lake_root(lake)          # a local path, or a session's root (catalog/session.py)

For `s3://` the command works on a session: a local lake holding the bucket's snapshot (the
latest version, or `as_of`), opened once per command and lake; when the command ends
(normally or not), `bucket_sessions` commits to the bucket what it published there and
removes the session. Only this process reads or writes the bucket; Ray actors and tasks get
their data from it as they do with a local lake.
"""

from __future__ import annotations

import functools
from pathlib import Path

import typer

_OPEN: list = []
"""The sessions opened by the running command, innermost command last."""


def lake_root(lake, as_of: int | None = None) -> Path:
    """The lake directory of `--lake` (`lake_location` rules): a local lake's path, or the root
    of this command's session on a bucket lake at version `as_of` (None: the latest).
    `as_of` on a local lake raises ValueError (it keeps only the current bytes)."""
    from ..catalog import lake_location

    location = lake_location(lake)
    if location.is_local:
        if as_of is not None:
            raise ValueError(f"--as-of {as_of}: a local lake keeps only each run's current files; "
                             "reading an earlier version needs a lake on object storage (s3://)")
        return location.path
    for session in _OPEN:
        if session.lake.location == location and (as_of is None or session.version == as_of):
            return session.root
    from ..catalog.session import open_session

    try:
        session = open_session(location, as_of)
    except OSError as exc:  # no credentials, no such bucket, the server unreachable
        from ..options import fail

        fail(f"{location.uri}: {exc}", 1)
    _OPEN.append(session)
    return session.root


def bucket_sessions(command):
    """Wrap a command: the bucket sessions it opens are pushed (committed URIs said on stderr)
    and closed when it returns or raises."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        mark = len(_OPEN)
        try:
            return command(*args, **kwargs)
        finally:
            opened = _OPEN[mark:]
            del _OPEN[mark:]
            for session in opened:
                try:
                    uris = session.push()
                except OSError as exc:  # a partition committed by another writer, the bucket unreachable
                    typer.echo(f"error: {session.lake.location.uri}: not committed ({exc}); what the "
                               f"command published is kept in {session.root}", err=True)
                    raise SystemExit(1) from None
                for uri in uris:
                    typer.echo(f"committed {uri}", err=True)
                session.close()

    return run
