"""`twinlake fit run --train A B --holdout C` and `fit validate --runs A B` on a tiny lake: the
space-separated lists reach the fit (train and holdout intervals, validated runs) as the
repeated and comma forms do."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fit"))

import synth  # noqa: E402  (tests/fit/synth.py: synthetic joint-impedance runs of a known truth)

SMALL_FIT = ["--method", "cma", "--population", "4", "--generations", "1", "--refine", "0", "--max-seconds", "0.3",
             "--workers", "0", "--json"]


@pytest.fixture(scope="module")
def tiny_lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("listlake")
    for i, run in enumerate(("r1", "r2", "r3"), start=1):
        synth.publish_run(root, "demo", run, synth.record(synth.TRUTH, 800, seed=i))
    return root


def _json_tail(output: str) -> dict:
    return json.loads(output[output.index("{\n"):])


def test_fit_run_and_validate_take_space_separated_lists(invoke, tiny_lake):
    lake = str(tiny_lake)
    ran = invoke("fit", "run", "--lake", lake, "--train", "r1", "r2", "--holdout", "r3", "--params",
                 "dynamic_ratio=0.6", "armature=0.2", "--id", "spaced", *SMALL_FIT)
    assert ran.exit_code == 0, ran.output[-2000:]
    summary = _json_tail(ran.stdout)
    roles = sorted((u["run"], u["role"]) for u in summary["runs"])
    assert roles == [("r1", "train"), ("r2", "train"), ("r3", "holdout")]
    shown = invoke("fit", "show", "spaced", "--lake", lake, "--json")
    settings = json.loads(shown.stdout)["settings"]
    assert settings["train"] == ["r1", "r2"] and settings["holdout"] == ["r3"]
    assert summary["params"]["armature_j1"] == 0.2 and summary["params"]["dynamic_ratio_j7"] == 0.6

    # the same fit from the repeated and comma forms: the same settings, the same result
    repeated = invoke("fit", "run", "--lake", lake, "--train", "r1", "--train", "r2", "--holdout", "r3",
                      "--params", "dynamic_ratio=0.6,armature=0.2", "--id", "repeated", *SMALL_FIT)
    assert repeated.exit_code == 0, repeated.output[-2000:]
    assert _json_tail(repeated.stdout)["params"] == summary["params"]
    commas = invoke("fit", "run", "--lake", lake, "--train", "r1,r2", "--holdout", "r3", "--params",
                    "dynamic_ratio=0.6,armature=0.2", "--id", "commas", *SMALL_FIT)
    assert commas.exit_code == 0, commas.output[-2000:]
    assert json.loads(invoke("fit", "show", "commas", "--lake", lake, "--json").stdout)["settings"]["train"] == \
        ["r1", "r2"]

    # a list at the end of the line: both runs are validated
    # (the tiny fit does not explain its runs, so the noise-floor gate is off: this is about lists)
    checked = invoke("fit", "validate", "spaced", "--lake", lake, "--json", "--allow-train",
                     "--max-floor-ratio", "0", "--runs", "r3", "r2")
    assert checked.exit_code == 0, checked.output[-2000:]
    rows = json.loads(checked.stdout)
    assert sorted({r["run"] for r in rows}) == ["r2", "r3"]
