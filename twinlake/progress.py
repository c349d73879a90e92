"""Progress of a long command on stderr, never on stdout (where its results go).

`terminal_status(text)`: a transient spinner while a block runs, on a terminal only.
`Stages(command, enabled)`: `stage(text)` starts a named stage, `fraction(f)` moves the current
stage's bar (0..1). On a terminal, one transient rich bar on stderr; otherwise (a pipe, a log
file, CI) one plain line per stage, `twinlake <command>: <stage>` (fractions print nothing, so
a log holds a few lines, not thousands). `enabled = False` (`--json`) prints nothing at all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def terminal_status(text: str) -> Iterator[Callable[[str], None]]:
    """A transient spinner showing `text` on stderr while the block runs, when stderr is a
    terminal; yields `update(text)`. Elsewhere (a pipe, a log) nothing is drawn and rich is not
    imported: its console and spinner are ~40 ms of a fresh `twinlake ingest`'s start-up. Plain
    lines printed to stderr meanwhile go above the spinner (rich's live display redirects them)."""
    if not sys.stderr.isatty():
        yield lambda _text: None
        return
    from rich.console import Console

    with Console(stderr=True).status(text, spinner="dots") as status:
        yield status.update


class Stages:
    """Stage lines or a bar on stderr for one command (a context manager)."""

    def __init__(self, command: str, enabled: bool = True) -> None:
        self.command, self.enabled = command, enabled
        self._tty = enabled and sys.stderr.isatty()
        self._bar = self._task = None
        self._started = time.monotonic()

    def __enter__(self) -> "Stages":
        if self._tty:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    def stage(self, text: str) -> None:
        """Start stage `text` (e.g. "streaming multisine, 24 s")."""
        if not self.enabled:
            return
        if self._bar is not None:
            if self._task is not None:
                self._bar.remove_task(self._task)
            self._task = self._bar.add_task(text, total=None)  # a pulse until a fraction is known
            return
        elapsed = time.monotonic() - self._started
        print(f"twinlake {self.command}: [{elapsed:6.1f} s] {text}", file=sys.stderr, flush=True)

    def fraction(self, done: float) -> None:
        """The current stage is `done` (0..1) complete (shown on a terminal only)."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=1.0, completed=min(max(done, 0.0), 1.0))


__all__ = ["Stages", "terminal_status"]
