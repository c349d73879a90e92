"""The README's "A session with your own robot", run as written (`run_readme_session`; the
session-scoped fixture `readme_session` of tests/session/conftest.py runs it once).

`run_readme_session` reads the command block of README.md's own-robot section and runs every line
in order, in one fresh working directory, in-process (`twinlake.cli.app` through typer's
CliRunner; `fit run` starts or joins the process's local Ray), with only these changes:

- `twinlake daemon serve &` starts the same daemon (`Fr3Daemon`, `daemon serve`'s defaults) on
  a thread, on ephemeral 127.0.0.1 ports, and every `excite` line gets those ports
  (`--cmd-port/--state-port/--recording-port`): two test sessions on one machine never meet;
- `--seconds 40` becomes `--seconds 4` (`SECONDS`): 6 s runs instead of 42 s;
- `FIT` / `FIT_TORQUE` are the ids the two `fit run` lines printed;
- an `excite` that aborts is retried as the README says (start the daemon again, remove the
  output directory, run the line again), at most `RETRIES` times.

Every line must exit 0 but the three that act on a fit's judgement (`VERDICTS`: `fit compare`,
`fit validate`, and `fit export`, which refuses a fit whose verdict is *not trusted*), whose exit
says whether the fit passed: their outcome is kept for the tests that
judge it. The result, `Session`, keeps each line's exit code, stdout and stderr,
the lake (absolute path), the fit ids and the run names; tests over it (tests/session and
others, e.g. a verdict test) read the lake, never write to it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## A session with your own robot"
SECONDS = "4"
RETRIES = 2
VERDICTS = (("fit", "compare"), ("fit", "validate"), ("fit", "export"))
FIT_ID = re.compile(r"\bfit-\d{8}T\d{6}-[0-9a-f]{8}\b")


@dataclass(frozen=True)
class Step:
    """One README line as run: its words (after the substitutions), exit code and output."""

    line: str
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    attempts: int = 1
    seconds: float = 0.0  # wall time of the line (all its attempts)


@dataclass
class Session:
    """The README session's outcome: `root` its working directory, `lake` (root/lake), the
    runs it recorded, `fit` / `fit_torque` the ids of its two fits, `steps` every line."""

    root: Path
    lake: Path
    fit: str = ""
    fit_torque: str = ""
    runs: tuple[str, ...] = ("run001", "run002", "run003")
    steps: list[Step] = field(default_factory=list)
    elapsed_s: float = 0.0

    def step(self, prefix: str) -> Step:
        """The first step whose argv starts with the words of `prefix` (e.g. "fit validate")."""
        words = tuple(prefix.split())
        for s in self.steps:
            if s.argv[1:1 + len(words)] == words:
                return s
        raise KeyError(prefix)


def readme_commands(text: str) -> list[str]:
    """The command lines of the README's own-robot block: continuations joined, comments and
    blank lines dropped, in order."""
    section = text[text.index(SECTION):]
    block = section.split("```", 2)[1]
    joined = block.replace("\\\n", " ")
    lines = []
    for raw in joined.splitlines():
        words = shlex.split(raw, comments=True)
        background = bool(words) and words[-1] == "&"
        words = words[:-1] if background else words
        if words:
            lines.append(shlex.join(words) + (" &" if background else ""))
    return lines


class _Daemon:
    """`twinlake daemon serve` (its defaults) on a thread, on ephemeral ports."""

    def __init__(self) -> None:
        from twinlake.daemon.noise import NoiseConfig
        from twinlake.daemon.server import DaemonConfig, Fr3Daemon

        noise = NoiseConfig.parse("q=2e-5,dq=5e-4,tau=0.05")  # `daemon serve --noise`'s default
        self.daemon = Fr3Daemon(DaemonConfig(cmd_port=0, state_port=0, recording_port=0, noise=noise))
        self.thread = threading.Thread(target=self.daemon.run, daemon=True)
        self.thread.start()

    def port_options(self) -> list[str]:
        p = self.daemon.ports
        return ["--cmd-port", str(p["cmd"]), "--state-port", str(p["state"]),
                "--recording-port", str(p["recording"])]

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(timeout=10)


def _argv(line: str, session: Session, daemon: _Daemon | None) -> list[str]:
    words = shlex.split(line)
    if words[:2] == ["twinlake", "excite"]:
        words = [SECONDS if i > 0 and words[i - 1] == "--seconds" else w for i, w in enumerate(words)]
        words += daemon.port_options()
    return [{"FIT": session.fit, "FIT_TORQUE": session.fit_torque}.get(w, w) for w in words]


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from twinlake.cli import app

    result = CliRunner().invoke(app, argv[1:])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _excite(line: str, session: Session, daemon: _Daemon) -> tuple[Step, _Daemon]:
    """Run an excite line; on an abort, the README's retry (new daemon, output removed)."""
    for attempt in range(1, RETRIES + 2):
        argv = _argv(line, session, daemon)
        code, out, err = _invoke(argv)
        if code == 0 or "aborted" not in err or attempt > RETRIES:
            return Step(line, tuple(argv), code, out, err, attempt), daemon
        daemon.stop()
        shutil.rmtree(argv[argv.index("--output") + 1], ignore_errors=True)
        daemon = _Daemon()
    raise AssertionError("unreachable")


def run_readme_session(root: Path) -> Session:
    """Run the README block in `root` (see the module docstring); every line must exit 0."""
    session = Session(root=root, lake=root / "lake")
    daemon = None
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for line in readme_commands(README.read_text(encoding="utf-8")):
            if line.startswith("twinlake daemon serve"):
                assert line.endswith(" &"), line
                daemon = _Daemon()
                continue
            began = time.monotonic()
            if line.startswith("twinlake excite"):
                step, daemon = _excite(line, session, daemon)
            else:
                argv = _argv(line, session, daemon)
                step = Step(line, tuple(argv), *_invoke(argv))
            step = replace(step, seconds=time.monotonic() - began)
            session.steps.append(step)
            if step.exit_code != 0 and step.argv[1:3] not in VERDICTS:
                raise AssertionError(f"README line failed (exit {step.exit_code}): {' '.join(step.argv)}\n"
                                     f"stdout:\n{step.stdout[-3000:]}\nstderr:\n{step.stderr[-3000:]}")
            if step.argv[1:3] == ("fit", "run"):
                found = FIT_ID.search(step.stdout)
                assert found, step.stdout[-2000:]
                if "--method" in step.argv and step.argv[step.argv.index("--method") + 1] == "torque":
                    session.fit_torque = found.group(0)
                else:
                    session.fit = found.group(0)
    finally:
        os.chdir(cwd)
        if daemon is not None:
            daemon.stop()
    return session
