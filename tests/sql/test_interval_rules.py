"""Each split cause injected at known ticks gives exactly the expected intervals (real DuckDB
over real Parquet in the lake layout, through twinlake.catalog.connect)."""

from __future__ import annotations

import numpy as np
import pytest
from interval_oracle import expected_intervals
from interval_synth import K_DEFAULT, cartesian_recording, drop_ticks, joint_recording, set_idle


def spans(rows: list[dict]) -> list[tuple]:
    return [(r["seq_first"], r["seq_last"], r["start_reason"], r["end_reason"]) for r in rows]


def check_oracle(rows: list[dict], rec, **kwargs) -> None:
    """The SQL agrees with the plain-Python statement of the rules, field by field."""
    want = expected_intervals(rec, **kwargs)
    keys = list(want[0]) if want else []
    got = [{k: r[k] for k in keys} for r in rows]
    for g in got:
        g["duration_s"] = pytest.approx(g["duration_s"], abs=1e-12)
    assert got == want


def test_clean_run_is_one_interval_with_the_applied_gains(lake):
    rec = joint_recording(100, reset_count=4)
    lake.add(rec)
    (row,) = lake.intervals()
    assert (row["robot"], row["run"], row["interval_index"]) == ("fr3", "r1", 0)
    assert spans([row]) == [(0, 99, "run_start", "run_end")]
    assert row["frame_count"] == 100 and row["duration_s"] == pytest.approx(0.099)
    assert row["t_first_s"] == 0.0 and row["t_last_s"] == pytest.approx(0.099)
    assert row["controller"] == 2 and row["joint_reset_count"] == 4
    assert row["K_joint"] == list(K_DEFAULT) and row["D_joint"][6] == 15.0
    assert row["filter_alpha"] == 0.05 and row["use_friction"] is False


def test_seq_gap_splits_and_nothing_is_interpolated(lake):
    rec = joint_recording(100)
    drop_ticks(rec, 30, 5)
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 29, "run_start", "seq_gap"), (35, 99, "seq_gap", "run_end")]
    assert [r["frame_count"] for r in rows] == [30, 65]
    check_oracle(rows, rec)


def test_recorded_gap_names_the_jump_and_excludes_frames_inside_it(lake):
    rec = joint_recording(100)
    drop_ticks(rec, 30, 5)
    rec.recorded_gaps = [(30, 34), (60, 62)]  # the second covers frames that are present
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [
        (0, 29, "run_start", "recorded_gap"),
        (35, 59, "recorded_gap", "recorded_gap"),
        (63, 99, "recorded_gap", "run_end"),
    ]
    check_oracle(rows, rec)


def test_mode_change_and_reset_on_reentry(lake):
    rec = joint_recording(100, reset_count=1)
    set_idle(rec, 40, 60)
    rec.cols["joint_reset_count"][60:] = 2  # the switch back into joint impedance resets
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [
        (0, 39, "run_start", "mode_change"),
        (40, 59, "mode_change", "mode_change"),
        (60, 99, "mode_change", "run_end"),
    ]
    idle = rows[1]
    assert idle["controller"] == 0 and idle["K_joint"] is None and idle["filter_alpha"] is None
    assert rows[2]["joint_reset_count"] == 2
    check_oracle(rows, rec)


def test_reset_alone_splits_unless_switched_off(lake):
    rec = joint_recording(100, reset_count=7)
    rec.cols["joint_reset_count"][50:] = 8
    lake.add(rec)
    assert spans(lake.intervals()) == [(0, 49, "run_start", "reset"), (50, 99, "reset", "run_end")]
    off = lake.intervals(split_on=["gain_change", "nonfinite"])
    assert spans(off) == [(0, 99, "run_start", "run_end")]


@pytest.mark.parametrize(
    "column, value",
    [("K_joint4", 601.0), ("D_joint7", 14.0), ("filter_alpha", 0.1), ("joint_use_friction", 1)],
)
def test_any_gain_change_splits_and_the_new_gains_are_reported(lake, column, value):
    rec = joint_recording(100)
    rec.cols[column][50:] = value
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 49, "run_start", "gain_change"), (50, 99, "gain_change", "run_end")]
    if column == "K_joint4":
        assert rows[0]["K_joint"][3] == 600.0 and rows[1]["K_joint"][3] == 601.0
    if column == "joint_use_friction":
        assert (rows[0]["use_friction"], rows[1]["use_friction"]) == (False, True)
    check_oracle(rows, rec)


def test_invalid_joint_target_ticks_are_in_no_interval(lake):
    rec = joint_recording(100)
    rec.cols["joint_target_valid"][20:23] = 0
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 19, "run_start", "target_invalid"), (23, 99, "target_invalid", "run_end")]


@pytest.mark.parametrize(
    "column, value",
    [("q3", np.nan), ("dq7", np.inf), ("q_target2", -np.inf), ("q_target_filtered5", np.nan)],
)
def test_nonfinite_state_or_target_excludes_the_tick(lake, column, value):
    rec = joint_recording(100)
    rec.cols[column][70] = value
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 69, "run_start", "nonfinite"), (71, 99, "nonfinite", "run_end")]


@pytest.mark.parametrize("value", [np.nan, -np.inf])
def test_nonfinite_commanded_torque_excludes_the_tick(lake, value):
    rec = joint_recording(100)
    rec.cols["tau_cmd6"][40] = value
    lake.add(rec)
    assert spans(lake.intervals()) == [(0, 39, "run_start", "nonfinite"), (41, 99, "nonfinite", "run_end")]
    assert spans(lake.intervals(split_on=["reset"])) == [(0, 99, "run_start", "run_end")]


def test_nonfinite_torque_sensor_or_unrecorded_torque_does_not_split(lake):
    rec = joint_recording(60)
    rec.cols["tau_J2"][30] = np.nan  # the torque sensor is not part of the rule
    rec.cols["tau_cmd1"] = np.full(60, None, dtype=object)  # not recorded: null
    lake.add(rec)
    assert spans(lake.intervals()) == [(0, 59, "run_start", "run_end")]


def test_null_measured_state_counts_as_nonfinite(lake):
    rec = joint_recording(50)
    q = rec.cols["q1"].astype(object)
    q[10] = None
    rec.cols["q1"] = q
    lake.add(rec)
    assert spans(lake.intervals()) == [(0, 9, "run_start", "nonfinite"), (11, 49, "nonfinite", "run_end")]


@pytest.mark.parametrize("period", [0.0031, 0.0, 0.00049])
def test_period_outlier_splits_before_the_tick(lake, period):
    rec = joint_recording(100)
    rec.cols["control_period_s"][60] = period
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 59, "run_start", "period_outlier"), (60, 99, "period_outlier", "run_end")]
    check_oracle(rows, rec)


def test_period_tolerance_is_a_parameter(lake):
    rec = joint_recording(100)
    rec.cols["control_period_s"][30] = 0.0012  # inside the default 1 ms ± 0.5 ms
    lake.add(rec)
    assert len(lake.intervals()) == 1
    tight = lake.intervals(period_tol_s=0.0001)
    assert spans(tight) == [(0, 29, "run_start", "period_outlier"), (30, 99, "period_outlier", "run_end")]
    assert len(lake.intervals(period_s=0.0012, period_tol_s=0.00001)) == 99  # every 1 ms step


def test_first_tick_period_zero_is_allowed_and_a_one_tick_interval_is_kept(lake):
    rec = joint_recording(30)
    assert rec.cols["control_period_s"][0] == 0.0
    rec.cols["q2"][10] = np.nan
    rec.cols["q2"][12] = np.nan
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows)[1] == (11, 11, "nonfinite", "nonfinite")
    assert rows[1]["frame_count"] == 1 and rows[1]["duration_s"] == 0.0
    assert spans(rows)[0] == (0, 9, "run_start", "nonfinite")


def test_boundary_reason_wins_over_an_excluded_neighbour(lake):
    rec = joint_recording(100)
    rec.cols["q4"][55] = np.nan  # first tick after the jump is also bad
    drop_ticks(rec, 50, 5)
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [(0, 49, "run_start", "seq_gap"), (56, 99, "nonfinite", "run_end")]
    check_oracle(rows, rec)


def test_fit_eligible_false_gives_nothing_and_null_counts_as_eligible(lake):
    diag = joint_recording(50)
    diag.fit_eligible = False
    lake.add(diag, run="excitation")
    csv_run = joint_recording(50)
    csv_run.fit_eligible = None
    lake.add(csv_run, run="csv")
    rows = lake.intervals()
    assert [(r["run"], r["frame_count"]) for r in rows] == [("csv", 50)]


def test_run_parquet_without_contract_columns(lake):
    from interval_synth import publish_run

    rec = joint_recording(40)
    drop_ticks(rec, 10, 2)
    publish_run(lake.root, "fr3", "old", rec, contract_columns=False)
    rows = lake.intervals()
    assert spans(rows) == [(0, 9, "run_start", "seq_gap"), (12, 39, "seq_gap", "run_end")]


def test_whole_run_excluded_gives_no_interval(lake):
    rec = joint_recording(20)
    rec.cols["joint_target_valid"][:] = 0
    lake.add(rec)
    assert lake.intervals() == []


def test_cartesian_ring_log_forms_its_own_intervals(lake):
    rec = cartesian_recording(300, seq0=5000)
    drop_ticks(rec, 100, 4)  # lost from the ring and recorded in the sidecar
    rec.recorded_gaps = [(5100, 5103)]
    drop_ticks(rec, 200, 1)  # a jump the sidecar does not list
    rec.cols["control_period_s"][250] = 0.004
    rec.cols["tgt_pz"][270] = np.nan
    lake.add(rec, robot="fr3-cart")
    rows = lake.intervals()
    assert spans(rows) == [
        (5000, 5099, "run_start", "recorded_gap"),
        (5104, 5203, "recorded_gap", "seq_gap"),
        (5205, 5254, "seq_gap", "period_outlier"),
        (5255, 5274, "period_outlier", "nonfinite"),
        (5276, 5299, "nonfinite", "run_end"),
    ]
    assert all(r["controller"] == 1 and r["K_joint"] is None and r["use_friction"] is None for r in rows)
    check_oracle(rows, rec)


def test_cartesian_null_target_is_not_a_defect(lake):
    rec = cartesian_recording(50)
    for s in ("px", "py", "pz", "qx", "qy", "qz", "qw"):
        del rec.cols[f"tgt_{s}"]  # kept in targets.parquet instead: null in frames
    lake.add(rec)
    assert spans(lake.intervals()) == [(0, 49, "run_start", "run_end")]


def test_stale_rows_are_in_no_interval_and_time_gaps_say_what_they_lost(lake):
    rec = joint_recording(100)
    rec.tick_period_s = 1e-3  # measured at ingest: the time rules use it
    rec.cols["stale"][[20, 21, 50]] = True  # a PC-side logger's repeated samples
    rec.cols["t_s"][70:] += 0.003  # consecutive seq, three ticks lost in time
    rec.cols["t_s"][85:] -= 0.005  # the clock stepped back
    drop_ticks(rec, 40, 2)
    lake.add(rec)
    rows = lake.intervals()
    assert spans(rows) == [
        (0, 19, "run_start", "stale"), (22, 39, "stale", "seq_gap"), (42, 49, "seq_gap", "stale"),
        (51, 69, "stale", "time_gap"), (70, 84, "time_gap", "clock_reversal"),
        (85, 99, "clock_reversal", "run_end")]
    assert [(r["ticks_lost_before"], r["ticks_lost_after"]) for r in rows] == [
        (None, None), (None, 2), (2, None), (None, 3), (3, None), (None, None)]
    check_oracle(rows, rec)


def test_each_run_is_judged_at_its_own_tick_period(lake):
    slow = joint_recording(60)
    slow.cols["t_s"] = slow.cols["t_s"] * 20  # a 50 Hz log: 20 ms ticks
    slow.cols["control_period_s"][1:] = 0.02
    slow.cols["t_s"][30:] += 0.04  # two ticks lost in time
    slow.tick_period_s = 0.02
    lake.add(slow, run="slow")
    fast = joint_recording(60)
    fast.cols["t_s"][40:] += 0.01  # no tick period known: the time rules are off
    lake.add(fast, run="fast")
    rows = {r["run"]: r for r in lake.intervals() if r["interval_index"] == 0}
    assert rows["slow"]["period_s"] == 0.02 and rows["fast"]["period_s"] == 0.001
    assert spans([rows["slow"]]) == [(0, 29, "run_start", "time_gap")]
    assert rows["slow"]["ticks_lost_after"] == 2
    assert spans([rows["fast"]]) == [(0, 59, "run_start", "run_end")]
    forced = [r for r in lake.intervals(period_s=0.001) if r["run"] == "slow"]
    assert forced[0]["end_reason"] == "time_gap" and forced[0]["seq_last"] == 0  # 20 ms at 1 ms
