"""fit/core/needs: what a replay and a campaign reference need, read from real lake runs of
each kind (fr3_stack CSV v2 of the independent plant; mapped logs of the same recording with
targets, without them, and with the controller and gains stated in the mapping's [run]), and
the one refusal a user sees."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest

from twinlake.options import error_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the `plant` package
from plant import PcLogger, pc_log, record, write_csv, write_reference  # noqa: E402

from twinlake.catalog import Lake, connect  # noqa: E402
from twinlake.catalog.selection import run_frames, run_intervals  # noqa: E402
from twinlake.fit.core import needs  # noqa: E402
from twinlake.fit.core.intervals import resolve  # noqa: E402
from twinlake.ingest import ingest_paths  # noqa: E402
from twinlake.ingest.registry import ReadOptions  # noqa: E402

READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
BASE = '[time]\ncolumn = "duration"\nunit = "ms"\n\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\ntau_measured = "tau_J[{i}]"\n'
TARGETS = 'q_target = "q_d[{i}]"\n'
STATED = ('\n[run]\ncontroller = "joint_impedance"\n'
          "kp = [600, 600, 600, 600, 250, 150, 50]\nkd = [50, 50, 50, 50, 30, 25, 15]\n")
KINDS = {  # run -> mapping (None: the fr3_stack CSV v2 itself)
    "v2": None, "torques_only": BASE, "with_targets": BASE + TARGETS, "stated": BASE + TARGETS + STATED,
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """One lake with a run of each kind from one 3 s recording of the independent plant."""
    d = tmp_path_factory.mktemp("needs")
    t = np.arange(0, 3.0, 0.01)
    rec = record(write_reference(d / "reference.csv", t, READY + 0.1 * np.sin(2 * np.pi * 0.5 * t[:, None])),
                 d / "clean.csv", settle_s=0.3, tail_s=0.2)
    table = pacsv.read_csv(rec.csv_path)
    log_csv = write_csv(pc_log({n: table.column(n).to_numpy() for n in table.column_names}, PcLogger(seed=2)),
                        d / "pc.csv")
    root = d / "lake"
    for run, mapping in KINDS.items():
        path = rec.csv_path if mapping is None else log_csv
        if mapping is not None:
            (d / f"{run}.toml").write_text(mapping)
        options = ReadOptions(robot="arm", run=run, mapping=None if mapping is None else d / f"{run}.toml")
        (out,) = ingest_paths(Lake(root), [path], options)
        assert out.status == "published", out.message
    return root


def _first_interval_frames(lake: Path, run: str):
    con = connect(lake)
    try:
        first = run_intervals(con, "arm", run)[0]
        return run_frames(con, "arm", run, first["seq_first"], first["seq_last"]), \
            needs.missing_in_run(con, "arm", run, first["seq_first"])
    finally:
        con.close()


@pytest.mark.parametrize("run, replay, reference", [
    ("v2", [], []),
    ("torques_only", ["controller", "targets", "gains"], ["targets"]),
    ("with_targets", ["controller", "gains"], []),
    ("stated", [], []),
])
def test_what_each_kind_of_run_lacks(lake, run, replay, reference):
    frames, at_first_tick = _first_interval_frames(lake, run)
    assert needs.missing(frames) == replay
    assert at_first_tick == replay  # one tick says the same as the interval
    assert needs.missing(frames, needs.REFERENCE) == reference


def test_the_refusal_names_the_run_what_is_missing_and_the_torque_route(lake):
    frames, _ = _first_interval_frames(lake, "torques_only")
    with pytest.raises(ValueError) as err:
        needs.require(frames, "arm/torques_only")
    text = str(err.value)
    assert text == str(needs.refusal("arm/torques_only", ["controller", "targets", "gains"]))
    assert text.startswith("run arm/torques_only: cannot be replayed: no controller (joint impedance, 2), "
                           "no joint targets (q_target), no gains (K_joint, D_joint) recorded")
    assert "try method = torque" in text and "\n" not in text
    assert "(try --method torque: the torque route needs only" in error_text(err.value)  # as the CLI says it
    needs.require(_first_interval_frames(lake, "stated")[0], "arm/stated")  # nothing missing: no error


def test_resolve_refuses_by_use(lake):
    with pytest.raises(ValueError, match=r"run arm/with_targets: cannot be replayed: no controller .*, no gains"):
        resolve(lake, ["arm/with_targets"], min_duration_s=0.0)
    refs = resolve(lake, ["arm/with_targets"], min_duration_s=0.0, needs=needs.REFERENCE)
    assert refs and {r.run for r in refs} == {"with_targets"}
    with pytest.raises(ValueError) as err:
        resolve(lake, ["arm/torques_only"], min_duration_s=0.0, needs=needs.REFERENCE, purpose="be a reference",
                hint=None)
    assert str(err.value) == "run arm/torques_only: cannot be a reference: no joint targets (q_target) recorded; " \
                             "it needs the targets"


def test_an_unknown_need_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown need 'filter': expected one of controller, targets, gains"):
        needs.refusal("a/b", [], needs=("filter",))
