"""Value lists on the command line, the argparse `nargs='+'` way, for every twinlake command.

fr3_stack's `examples/joint_sysid.py` (argparse) takes `--joints 1 2 3 4 5 6 7`,
`--tones 0.1 0.23 0.41` and `--q0-rad 0 -0.785 0 -2.356 0 1.571 0.785`; click (and so typer)
takes one value per occurrence of an option. `expand_value_lists(command, args)` rewrites a
command line once, before click parses it: for every option that collects several values (a
click option with `multiple=True`, i.e. a typer `list[...]` option) of the sub-command the line
resolves to,

    --opt a b c      becomes   --opt a --opt b --opt c

The values of such an option are the tokens after it up to the next token that starts with `-`
and is not a number (`-0.785`, `-1e-3` and a lone `-` are values; `--holdout`, `-f` are not) or
up to `--`; a list option with no value is an error (`MissingValues`), as in argparse.
`--opt=a` is one value; repeating the option keeps working; everything else
(other options and their values, arguments, unknown tokens) passes through unchanged, so
click still reports errors in its own words. A list swallows the arguments that follow it, as
in argparse: put arguments before the lists (`fit validate FIT --runs a b`) or after `--`.

`split_values(values)` is the other half of the convention: each value may itself be a
comma-separated list (`--joints 1,2,3`, `--train a,b`).

`ListOptionGroup` is the root app's click group: it rewrites in `parse_args`, the step both the
installed `twinlake` script and `typer.testing.CliRunner` go through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import typer
from typer.core import TyperGroup

# typer's commands and options are click's or, in recent typer, those of its vendored copy of
# click: they are recognised by their attributes (`commands`, `param_type_name`), not by class.
Command = Any
Option = Any


class MissingValues(ValueError):
    """A list option is followed by no value (`--train --holdout c`)."""


def split_values(values: Iterable[str]) -> list[str]:
    """Every comma-separated item of `values`, stripped, empty items dropped, in order."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def is_value_token(token: str) -> bool:
    """True if `token` after a list option is one more value: not an option, i.e. it does not
    start with `-` or it is a number (`-0.5`, `-3`, `-1e-3`, `-inf`) or a lone `-`."""
    if not token.startswith("-") or token == "-":
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def _subcommands(command: Command) -> Mapping[str, Command] | None:
    """The sub-commands of a group (typer's TyperGroup is not always a click.Group), else None."""
    commands = getattr(command, "commands", None)
    return commands if isinstance(commands, Mapping) else None


def _options(command: Command) -> dict[str, Option]:
    """Every spelling (`--train`, `-f`, `--no-x`) of the command's options → the option."""
    names: dict[str, Option] = {}
    for param in command.params:
        if getattr(param, "param_type_name", None) == "option":
            for name in (*param.opts, *param.secondary_opts):
                names[name] = param
    return names


def _is_list_option(option: Option) -> bool:
    return option.multiple and option.nargs == 1 and not option.is_flag and not option.count


def _takes_values(option: Option) -> int:
    """How many following tokens the option consumes when not written `--opt=value`."""
    return 0 if option.is_flag or option.count else max(option.nargs, 1)


def _rewrite_own_tokens(command: Command, args: list[str], start: int, out: list[str], path: str) -> int:
    """Copy `args[start:]` to `out`, expanding `command`'s list options, up to the first
    argument of a group (its sub-command name) or `--`. Returns the index where it stopped."""
    options = _options(command)
    is_group = _subcommands(command) is not None
    i = start
    while i < len(args):
        token = args[i]
        if token == "--" or (is_group and is_value_token(token)):
            return i
        name = token.split("=", 1)[0] if token.startswith("--") else token
        option = options.get(name)
        if option is None or name != token:  # an argument, an unknown token, or --opt=value
            out.append(token)
            i += 1
            continue
        if _is_list_option(option):
            j = i + 1
            while j < len(args) and args[j] != "--" and is_value_token(args[j]):
                out += [token, args[j]]
                j += 1
            if j == i + 1:  # click would take the next option as the value
                raise MissingValues(f"{path}: option {token!r} needs at least one value")
            i = j
            continue
        n = _takes_values(option)
        out += args[i:i + 1 + n]  # a single-valued option keeps its value, even "-x"-like
        i += 1 + n
    return i


def expand_value_lists(command: Command, args: list[str]) -> list[str]:
    """`args` (without the program name) with `--opt a b c` written `--opt a --opt b --opt c`
    for every list option of the (sub-)commands the line walks through, starting at `command`.
    Raises MissingValues for a list option without a value."""
    args = list(args)
    out: list[str] = []
    path = command.name or ""
    i = 0
    while True:
        i = _rewrite_own_tokens(command, args, i, out, path)
        commands = _subcommands(command)
        if i >= len(args) or args[i] == "--" or commands is None:
            return out + args[i:]
        sub = commands.get(args[i])
        out.append(args[i])
        i += 1
        if sub is None:  # unknown sub-command: click reports it
            return out + args[i:]
        command, path = sub, f"{path} {args[i - 1]}"


class ListOptionGroup(TyperGroup):
    """The root `twinlake` group: expands value lists (`expand_value_lists`) before parsing."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            try:
                args = expand_value_lists(self, args)
            except MissingValues as exc:
                ctx.fail(str(exc))
        return super().parse_args(ctx, args)


__all__ = ["ListOptionGroup", "MissingValues", "expand_value_lists", "is_value_token", "split_values"]
