"""docs/cli.md, generated from the typer app: every command, its usage, arguments and options.

    python -m twinlake.clidoc > docs/cli.md

The reference part of each command (usage, help text, the argument/option table) comes from
the composed root app, so it cannot drift from what `twinlake … --help` says. Hand-written
prose (an introduction, outcome tables, examples) lives in `clidoc.md` beside this module,
one section per command; the generator places each section under its command and refuses a
section whose command no longer exists. tests/docs/test_cli_doc.py fails when docs/cli.md
differs from this output.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

NOTES_PATH = Path(__file__).with_name("clidoc.md")
REGENERATE = "python -m twinlake.clidoc > docs/cli.md"
_MARKER = re.compile(r"^<!-- (.+?) -->$", re.MULTILINE)
INTRO = "intro"


@dataclass
class CommandDoc:
    """One command or group as documented: its path (`twinlake fit run`), depth 1 = top level."""

    path: str
    depth: int
    command: Any
    is_group: bool


def walk(root: Any, name: str = "twinlake") -> list[CommandDoc]:
    """Every command and group under `root` (a click command), depth first, in registration order."""
    out: list[CommandDoc] = []

    def visit(command: Any, path: str, depth: int, parent: Any) -> None:
        ctx = typer.Context(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)
        is_group = hasattr(command, "list_commands")
        if depth > 0:
            out.append(CommandDoc(path, depth, command, is_group))
        if is_group:
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                if child is not None and not getattr(child, "hidden", False):
                    visit(child, f"{path} {sub}", depth + 1, ctx)

    visit(root, name, 0, None)
    return out


def read_notes(text: str) -> dict[str, str]:
    """`<!-- twinlake ingest -->` sections of the notes file → {command path or "intro": markdown}.

    Text before the first marker explains the file to its editors and is not copied.
    """
    parts = _MARKER.split(text)
    notes: dict[str, str] = {}
    for key, body in zip(parts[1::2], parts[2::2]):
        if key in notes:
            raise ValueError(f"{NOTES_PATH.name}: section '{key}' appears twice")
        notes[key] = body.strip()
    return notes


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _help(command: Any) -> str:
    """The command's docstring as markdown paragraphs (click's `\\b` no-rewrap markers dropped)."""
    text = inspect.cleandoc(command.help or "")
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _argument_name(param: Any) -> str:
    name = (param.metavar or param.name or "").upper()
    if param.nargs == -1:
        name += "..."
    return name if param.required else f"[{name}]"


def _option_names(param: Any) -> str:
    names = ", ".join(param.opts)
    if param.secondary_opts:
        return f"{names} / {', '.join(param.secondary_opts)}"
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return names
    spelled = max(param.opts, key=len).lstrip("-").replace("-", "_").upper()
    return f"{names} {param.metavar or spelled}"


def _bounds(param: Any) -> str:
    """A numeric option's range, from the parameter (vendored click) or its type (click 8)."""
    lo, hi = (getattr(param, key, None) for key in ("min", "max"))
    if lo is None and hi is None:
        lo, hi = (getattr(getattr(param, "type", None), key, None) for key in ("min", "max"))
    if lo is not None and hi is not None:
        return f"{lo} ≤ x ≤ {hi}"
    if lo is not None:
        return f"x ≥ {lo}"
    return f"x ≤ {hi}" if hi is not None else ""


def _default(param: Any) -> str:
    value = param.default
    if callable(value) or value is None or value is False or value in ((), [], ""):
        return ""
    if param.secondary_opts:
        return param.opts[0] if value else param.secondary_opts[0]
    if getattr(param, "is_flag", False):
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _param_row(param: Any) -> str:
    is_arg = param.param_type_name == "argument"
    name = _argument_name(param) if is_arg else _option_names(param)
    facts = [getattr(param, "help", None) or ""]
    if param.required and not is_arg:
        facts.append("(required)")
    if getattr(param, "multiple", False) and "repeat" not in facts[0].lower():
        facts.append("(repeatable)")
    if _bounds(param):
        facts.append(f"(range {_bounds(param)})")
    if _default(param):
        facts.append(f"(default `{_default(param)}`)")
    return f"| `{name}` | {_cell(' '.join(f for f in facts if f))} |"


def _usage(doc: CommandDoc) -> str:
    pieces = [doc.path]
    params = [p for p in doc.command.params if not getattr(p, "hidden", False)]
    if any(p.param_type_name == "option" for p in params):
        pieces.append("[OPTIONS]")
    pieces += [_argument_name(p) for p in params if p.param_type_name == "argument"]
    if doc.is_group:
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def render_command(doc: CommandDoc, notes: str) -> str:
    """One command's section: heading, usage, help, argument/option table, then its notes."""
    lines = [f"{'#' * (doc.depth + 1)} `{doc.path}`", "", "```", _usage(doc), "```", ""]
    if _help(doc.command):
        lines += [_help(doc.command), ""]
    rows = [_param_row(p) for p in doc.command.params
            if not getattr(p, "hidden", False) and p.name != "help"]
    if rows:
        lines += ["| argument / option | meaning |", "|---|---|", *rows, ""]
    if doc.is_group:
        subs = [f"`{doc.path} {name}`" for name, sub in doc.command.commands.items()
                if not getattr(sub, "hidden", False)]
        lines += ["Commands: " + ", ".join(subs) + ".", ""]
    if notes:
        lines += [notes, ""]
    return "\n".join(lines)


def render(root: Any, notes: dict[str, str]) -> str:
    """The whole of docs/cli.md for the click command `root` and the notes sections."""
    docs = walk(root)
    unknown = sorted(set(notes) - {INTRO} - {d.path for d in docs})
    if unknown:
        raise ValueError(f"{NOTES_PATH.name}: notes for commands the app does not have: {', '.join(unknown)}")
    head = [
        "# twinlake command line",
        "",
        f"<!-- Generated by `{REGENERATE}` from the typer app and twinlake/clidoc.md"
        " (the prose); edit those, not this file. -->",
        "",
    ]
    if notes.get(INTRO):
        head += [notes[INTRO], ""]
    head += ["| command | what it does |", "|---|---|"]
    head += [f"| `{d.path}` | {_cell(_help(d.command).split(chr(10) * 2)[0])} |" for d in docs if not d.is_group]
    head.append("")
    body = [render_command(d, notes.get(d.path, "")) for d in docs]
    return "\n".join(head + body).rstrip("\n") + "\n"


def generate() -> str:
    """docs/cli.md for the composed `twinlake` app."""
    from .cli import app

    return render(typer.main.get_command(app), read_notes(NOTES_PATH.read_text(encoding="utf-8")))


def main() -> None:
    sys.stdout.reconfigure(encoding="utf-8")
    sys.stdout.write(generate())


if __name__ == "__main__":
    main()
