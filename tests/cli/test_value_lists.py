"""The value-list convention of every twinlake command (twinlake/option_lists.py): argparse
`nargs='+'` lists (`--opt a b c`, negative numbers as values), commas, repeated flags; on the
root app's real command tree, through CliRunner and through the installed script."""

from __future__ import annotations

import json

import pytest
import typer

from twinlake.cli import app
from twinlake.option_lists import MissingValues, expand_value_lists, is_value_token, split_values

ROOT = typer.main.get_command(app)


def expand(line: str) -> list[str]:
    return expand_value_lists(ROOT, line.split())


@pytest.mark.parametrize("line, expected", [
    # a list followed by another option, and a list at the end of the line
    ("fit run --train a b --holdout c",
     "fit run --train a --train b --holdout c"),
    ("fit run --holdout c --seeds 3 --train a b",
     "fit run --holdout c --seeds 3 --train a --train b"),
    # negative numbers are values; an option after them ends the list
    ("excite --q0-rad 0 -0.785 0 -2.356 0 1.571 0.785 --dry-run",
     "excite --q0-rad 0 --q0-rad -0.785 --q0-rad 0 --q0-rad -2.356 --q0-rad 0 --q0-rad 1.571 --q0-rad 0.785 --dry-run"),
    ("excite --kp 600 --kd -1e-3 -.5 --seed 0",
     "excite --kp 600 --kd -1e-3 --kd -.5 --seed 0"),
    # repeated flags and the comma form pass through (commas are split by the command)
    ("fit validate F --runs a --runs b,c --json",
     "fit validate F --runs a --runs b,c --json"),
    ("intervals --no-split reset gain_change --json",
     "intervals --no-split reset --no-split gain_change --json"),
    # a single-valued option keeps its value, even one that looks like an option or a number
    ("excite --seed -1 --output -x --joints 1 2",
     "excite --seed -1 --output -x --joints 1 --joints 2"),
    # --opt=value is one value; `--` ends the rewriting; group options are left alone
    ("excite --joints=1 2", "excite --joints=1 2"),
    ("fit validate --runs a -- b", "fit validate --runs a -- b"),
    ("record --host 127.0.0.1 --port 5557 start /abs/run.csv --recording-id r1",
     "record --host 127.0.0.1 --port 5557 start /abs/run.csv --recording-id r1"),
    # nothing to expand, unknown commands and options: click reports them as before
    ("nosuch --train a b", "nosuch --train a b"),
    ("excite --nosuch 1 2", "excite --nosuch 1 2"),
])
def test_expansion_on_the_real_command_tree(line, expected):
    assert expand(line) == expected.split()


def test_value_tokens_and_comma_items():
    assert [is_value_token(t) for t in ("a", "-0.785", "-3", "-1e-3", "-inf", "-", "--x", "-f", "-x1")] == \
        [True, True, True, True, True, True, False, False, False]
    assert split_values(["a,b", " c ", "d,,", ","]) == ["a", "b", "c", "d"]


def _plan(out_dir) -> dict:
    return json.loads((out_dir / "metadata.json").read_text())["plan"]


def test_cli_runner_and_installed_script_parse_alike(invoke, twinlake_script, tmp_path):
    line = ("twinlake excite --mode multisine --joints 2 4 --tones 0.2 0.35 --seconds 10 --seed 5 "
            "--amplitude-deg 0.5 --output {out}")
    runner_out, script_out = tmp_path / "runner", tmp_path / "script"
    res = invoke(*line.format(out=runner_out).split()[1:])
    assert res.exit_code == 0, res.output
    done = twinlake_script(line.format(out=script_out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = _plan(runner_out)
    assert plan == _plan(script_out)
    assert plan["joints"] == [2, 4] and plan["tones"] == [0.2, 0.35] and plan["seed"] == 5
    assert (runner_out / "reference.csv").read_bytes() == (script_out / "reference.csv").read_bytes()


def test_spaces_commas_and_repeats_mix(invoke, tmp_path):
    res = invoke("excite", "--mode", "multisine", "--joints", "1,2", "3", "--joints", "5", "--tones", "0.1,0.2",
                 "0.3", "--seconds", "10", "--output", tmp_path / "mix")
    assert res.exit_code == 0, res.output
    plan = _plan(tmp_path / "mix")
    assert plan["joints"] == [1, 2, 3, 5] and plan["tones"] == [0.1, 0.2, 0.3]


@pytest.mark.parametrize("args, message", [
    (["--joints", "1", "x"], "--joints: expected numbers, got 'x'"),
    (["--joints", "1.5"], "--joints: expected joint numbers 1..7"),
    (["--q0-rad", "0", "-0.785", "0"], "--q0-rad: expected 7 joint angles, got 3"),
    (["--kp", "600", "600", "--execute", "--host", "h", "--robot-id", "r"], "--kp: expected 1 or 7 values, got 2"),
    (["--dry-run", "--execute", "--host", "h", "--robot-id", "r"], "--dry-run previews without connecting"),
])
def test_bad_lists_are_named(invoke, tmp_path, args, message):
    res = invoke("excite", *args, "--output", tmp_path / "bad")
    assert res.exit_code == 1 and message in res.output, res.output
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("line", ["fit run --train --holdout c", "fit run --holdout c --train"])
def test_a_list_without_values_is_a_usage_error(invoke, line):
    with pytest.raises(MissingValues, match="fit run: option '--train' needs at least one value"):
        expand(line)
    res = invoke(*line.split())  # click alone would take "--holdout" as the training run
    assert res.exit_code == 2 and "option '--train' needs at least one value" in res.output, res.output
