"""Property: for any recording shape (rows, gaps, idle lead-in, NaN torque rows), the run
row counts exactly what the file holds, and the frames keep every row."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinlake.catalog import Lake, connect
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions
from twinlake.ingest.samples import SampleSpec, write_sample


@st.composite
def specs(draw) -> SampleSpec:
    rows = draw(st.integers(min_value=2, max_value=400))
    gaps = draw(st.lists(st.integers(0, rows - 2), max_size=4, unique=True))
    idle = draw(st.integers(0, rows - 1))
    nan_rows = draw(st.lists(st.integers(0, rows - 1), max_size=3, unique=True))
    return SampleSpec(rows=rows, seed=draw(st.integers(0, 99)), gap_at=tuple(sorted(gaps)),
                      idle_rows=idle, nan_tau_rows=tuple(nan_rows))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs())
def test_run_row_matches_the_file(spec: SampleSpec):
    with tempfile.TemporaryDirectory() as tmp:
        path = write_sample(Path(tmp) / "p.csv", spec)
        lake = Lake(Path(tmp) / "lake")
        [outcome] = list(ingest_paths(lake, [path], ReadOptions(robot="r")))
        assert outcome.status == "published", outcome.message
        con = connect(lake)
        run = con.execute("select frame_count, gap_count, dropped, seq_last, controllers, "
                          "controller_switches, resets, nan_tau_J from runs").fetchone()
        n_frames = con.execute("select count(*) from frames").fetchone()[0]
    jumps = len(spec.gap_at)
    switches = 1 if 0 < spec.idle_rows < spec.rows else 0
    expected_ctrl = [0] if spec.idle_rows >= spec.rows else ([2] if spec.idle_rows == 0 else [0, 2])
    assert n_frames == run[0] == spec.rows
    assert (run[1], run[2]) == (jumps, 2 * jumps)
    assert run[3] == spec.rows - 1 + 2 * jumps
    assert run[4] == expected_ctrl and run[5] == switches and run[6] == switches
    assert run[7] == len(spec.nan_tau_rows)
