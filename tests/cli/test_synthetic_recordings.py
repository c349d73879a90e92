"""twinlake.synthetic, the recording helper of the demo, the benchmarks and these tests: a real
plan, the offline recorder on a real truth and the real ingest pipeline into a real lake."""

from __future__ import annotations

import json

import pytest

from twinlake.catalog import connect
from twinlake.sim import DEMO_PROFILE_PATH
from twinlake.synthetic import ingest, multisine_run, record, record_and_ingest

SHORT = dict(seconds=1.0, amplitude_deg=6.0, ramp_s=0.25, hold_s=0.2, tail_s=0.1)


def test_a_recording_is_deterministic_reused_and_named_after_its_run(tmp_path):
    spec = multisine_run("syn-a", (0.5, 1.1, 2.3), seed=4, **SHORT)
    made = record(spec, tmp_path / "one", robot_id="fr3-syn", truth_path=DEMO_PROFILE_PATH)
    folder = tmp_path / "one" / "syn-a"
    assert made.csv == folder / "syn-a.csv" and not made.reused
    assert sorted(p.name for p in folder.iterdir()) == ["metadata.json", "reference.csv", "syn-a.csv",
                                                        "syn-a.meta.json", "syn-a.status.json"]
    assert made.result.rows == round((spec.plan.total_s + spec.tail_s) * 1000) + 1  # 1 kHz, both ends
    meta = json.loads((folder / "syn-a.meta.json").read_text())
    assert meta["robot_id"] == "fr3-syn" and meta["seed"] == 4
    # a lively run raises fr3_stack's bounds explicitly, in metadata.json, and is checked against them
    plan_meta = json.loads((folder / "metadata.json").read_text())
    assert plan_meta["plan"]["max_velocity"] == 3.0 and plan_meta["guard_settings"]["tracking_error"] == 0.5
    assert meta["guards"]["bounds"] == plan_meta["guard_settings"] and meta["plan"] == plan_meta["plan"]
    assert meta["guards"]["would_abort"] is None and meta["excitation_status"] == "completed"
    # same plan, seed and truth elsewhere: the same bytes; another seed: other phases and noise
    again = record(spec, tmp_path / "two", robot_id="fr3-syn", truth_path=DEMO_PROFILE_PATH)
    assert again.csv.read_bytes() == made.csv.read_bytes()
    other = record(multisine_run("syn-a", (0.5, 1.1, 2.3), seed=5, **SHORT), tmp_path / "three",
                   robot_id="fr3-syn")
    assert other.csv.read_bytes() != made.csv.read_bytes()
    # an existing recording is reused, not re-simulated (the recorder never overwrites)
    before = made.csv.stat().st_mtime_ns
    reused = record(spec, tmp_path / "one", robot_id="fr3-syn")
    assert reused.reused and reused.result is None and made.csv.stat().st_mtime_ns == before


def test_record_and_ingest_publishes_clean_runs_once(tmp_path):
    specs = [multisine_run(f"syn-{i}", (0.4, 0.9, 1.7), seed=i, **SHORT) for i in (1, 2)]
    lake = tmp_path / "lake"
    selectors = record_and_ingest(specs, tmp_path / "rec", lake, robot="fr3-syn")
    assert selectors == ["fr3-syn/syn-1", "fr3-syn/syn-2"]
    rows = connect(lake).execute("SELECT run, frame_count, verdict, gap_count FROM runs ORDER BY run").fetchall()
    expected = round((specs[0].plan.total_s + specs[0].tail_s) * 1000) + 1
    assert rows == [("syn-1", expected, "ok", 0), ("syn-2", expected, "ok", 0)]
    # the recordings are reused and the lake already holds them: nothing new is published
    made = [record(s, tmp_path / "rec", robot_id="fr3-syn") for s in specs]
    assert all(m.reused for m in made)
    assert [o.status for o in ingest(lake, made, "fr3-syn")] == ["already_ingested", "already_ingested"]


def test_a_plan_beyond_the_reference_limits_is_refused_before_anything_is_recorded(tmp_path):
    spec = multisine_run("too-fast", (2.0, 3.1, 4.3), seed=0, seconds=1.0, ramp_s=0.25, amplitude_deg=40.0)
    with pytest.raises(ValueError, match="exceeds|joint-limit"):
        record(spec, tmp_path, robot_id="fr3-syn")
    assert not (tmp_path / "too-fast" / "too-fast.csv").exists()


def test_a_gentle_run_stays_inside_fr3_stacks_default_bounds_and_guards(tmp_path):
    from twinlake.daemon.guards import GuardBounds
    from twinlake.synthetic import gentle_multisine_run

    spec = gentle_multisine_run("calm", (0.2, 0.45, 0.8), seed=1, seconds=4.0, ramp_s=1.5)
    plan = spec.plan
    assert (plan.max_velocity, plan.max_acceleration, plan.max_jerk) == (0.1, 0.3, 2.0)  # fr3_stack's defaults
    assert spec.guards == GuardBounds() and 0.5 < plan.amplitude_deg < 1.8
    made = record(spec, tmp_path, robot_id="fr3-syn", enforce_guards=True)
    report = made.result.guards
    assert report["would_abort"] is None and report["enforced"] and report["bounds"] == GuardBounds().to_dict()
    assert made.result.rows == round((plan.total_s + spec.tail_s) * 1000) + 1  # not cut short
    peaks = report["peak"]
    assert peaks["tracking_anchor"]["value"] < 0.05 and peaks["speed"]["value"] < 0.1
    assert peaks["tracking_target"]["value"] > 0 and peaks["state_age"]["value"] <= 0.004 + 1e-12
