"""A directory that is itself a unit (an excitation run) may also hold a 1 kHz recording of
its own, as `twinlake excite --execute --record run001.csv` leaves it: both are ingested."""

from __future__ import annotations

import formats_fixtures as ff

from twinlake.catalog import Lake, connect
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions


def test_excitation_directory_with_its_recording_ingests_both(tmp_path):
    run_dir = ff.write_excitation(tmp_path / "rec-001")
    ff.write_csv_v2(run_dir, "run001", n=300)
    lake = Lake(tmp_path / "lake")

    outcomes = list(ingest_paths(lake, [run_dir], ReadOptions(robot="left")))

    by_run = {o.run: o for o in outcomes}
    assert set(by_run) == {"rec-001", "run001"}, [o.message for o in outcomes]
    assert {o.status for o in outcomes} == {"published"}
    assert by_run["run001"].format == "fr3_stack_csv"
    con = connect(lake)
    rows = dict(con.execute("SELECT run, fit_eligible FROM runs").fetchall())
    assert rows == {"rec-001": False, "run001": True}
    assert con.execute("SELECT count(*) FROM frames WHERE run = 'run001'").fetchone() == (300,)
    # nothing of the directory is reported as unrecognised, and a re-run is a no-op
    again = list(ingest_paths(lake, [run_dir], ReadOptions(robot="left")))
    assert {o.status for o in again} == {"already_ingested"}
