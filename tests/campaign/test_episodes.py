"""Built-in campaigns end to end in this process: the files of an episode and of the campaign,
their hashes, determinism across lakes, resume without re-running, outcomes and the views."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from campaign_inputs import FIT_ID
from twinlake.campaign import CampaignRequest, CampaignStore, run_campaign
from twinlake.campaign.outcome import GuardLimits, score
from twinlake.campaign.store import canonical_json
from twinlake.catalog import connect


def _req(reference, **kw) -> CampaignRequest:
    base = dict(fit=FIT_ID, episodes=4, reference_csv=str(reference), campaign_id="c1", chunk_episodes=3)
    return CampaignRequest(**{**base, **kw})


def _without_wall(path) -> dict:
    doc = json.loads(path.read_text())
    doc.pop("wall")
    return doc


def test_episode_files_hashes_and_run_level_files(lake, reference):
    report = run_campaign(lake, _req(reference))
    assert (report.planned, report.ran, report.total_done, report.infrastructure_errors) == (4, 4, 4, 0)
    store = CampaignStore(lake, "c1")
    assert sorted(store.done()) == ["e000000", "e000001", "e000002", "e000003"]
    assert list(store.tmp_dir.iterdir()) == []
    ep = store.episodes_dir / "e000002"
    summary = json.loads((ep / "summary.json").read_text())
    config = json.loads((ep / "episode_config.json").read_text())
    assert summary["config_hash"] == hashlib.sha256(canonical_json(config).encode()).hexdigest()
    for name, digest in summary["files"].items():
        assert hashlib.sha256((ep / name).read_bytes()).hexdigest() == digest
    samples = pq.read_table(ep / "samples.parquet")
    assert samples.num_rows == summary["metrics"]["ticks"] and samples.column("tick").to_pylist()[:3] == [0, 1, 2]
    q = np.column_stack([samples.column(f"q{j}").to_numpy() for j in range(1, 8)])
    tgt = np.column_stack([samples.column(f"q_target{j}").to_numpy() for j in range(1, 8)])
    assert summary["metrics"]["track_max_rad"] == pytest.approx(np.abs(q - tgt).max(), rel=1e-12)
    assert summary["parameters"]["motor_delay_ms"] in (0, 1, 2)
    with open(store.root / "summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["episode_id"] for r in rows] == sorted(store.done())
    jsonl = [json.loads(line) for line in (store.root / "summary.jsonl").read_text().splitlines()]
    assert sorted(r["episode_id"] for r in jsonl) == sorted(store.done()) and {r["run_id"] for r in jsonl} == {report.run_id}
    manifest = json.loads((store.root / f"manifest_{report.run_id}.json").read_text())
    assert manifest["counts"]["ran"] == 4 and set(manifest["episode_wall_s"]) == store.done()
    assert manifest["inputs"]["reference_sha256"] == hashlib.sha256(reference.read_bytes()).hexdigest()


def test_same_command_same_bytes_and_resume_runs_nothing_twice(lake, reference, tmp_path):
    from campaign_inputs import make_fit

    other = tmp_path / "other"
    make_fit(other, delay_probs=[0.1, 0.6, 0.3, 0.0, 0.0])
    run_campaign(lake, _req(reference, chunk_episodes=4))
    run_campaign(other, _req(reference, chunk_episodes=1))  # other chunking: the same episodes
    a, b = CampaignStore(lake, "c1"), CampaignStore(other, "c1")
    for eid in sorted(a.done()):
        for name in ("episode_config.json", "samples.parquet"):
            assert (a.episodes_dir / eid / name).read_bytes() == (b.episodes_dir / eid / name).read_bytes()
        assert _without_wall(a.episodes_dir / eid / "summary.json") == _without_wall(b.episodes_dir / eid / "summary.json")
    again = run_campaign(lake, _req(reference, episodes=6, campaign_id="c2"))
    assert again.ran == 6
    more = run_campaign(lake, _req(reference, episodes=6, campaign_id="c2"))
    assert (more.ran, more.already_done, more.total_done) == (0, 6, 6)
    with pytest.raises(ValueError, match="exists with a different configuration .*seed"):
        run_campaign(lake, _req(reference, episodes=6, campaign_id="c2", seed=9))


def test_guard_outcomes_and_abort_time(lake, reference):
    # the reference aborts on the fit's own parameters: refused before any episode, naming guard, time and value
    with pytest.raises(ValueError, match=r"nominal episode .* aborts: tracking guard \(anchor rule\) at t = \d\.\d{3} s, "
                                         r"value \d\.\d+ rad on J\d \(bound 0\.001 rad\).*--allow-aborting-reference"):
        run_campaign(lake, _req(reference, tracking_limit_rad=1e-3, campaign_id="tight"))
    assert not (lake / "campaigns").exists()
    report = run_campaign(lake, _req(reference, tracking_limit_rad=1e-3, campaign_id="tight",
                                     allow_aborting_reference=True))
    assert report.outcomes == {"aborted_tracking": 4} and report.nominal["outcome"] == "aborted_tracking"
    s = CampaignStore(lake, "tight").summaries()[0]
    assert s["metrics"]["abort_reason"] == "tracking" and 0 < s["metrics"]["abort_t_s"] < s["metrics"]["ticks"] * 1e-3
    assert s["metrics"]["abort_value"] > 1e-3 and s["metrics"]["track_anchor_max_rad"] >= s["metrics"]["abort_value"]
    # the documented rule (vs the last sent target) is reported too, and can be the one enforced
    assert s["metrics"]["track_target_max_rad"] > 0
    loose = run_campaign(lake, _req(reference, tracking_limit_rad=1e-3, campaign_id="target", tracking_rule="target",
                                    allow_aborting_reference=True))
    t = CampaignStore(lake, "target").summaries()[0]["metrics"]
    assert loose.outcomes == {"aborted_tracking": 4} and t["abort_value"] > 1e-3


def test_score_flags_divergence_slew_and_torque():
    t = 50
    home = np.array([0.0, -0.6, 0.0, -1.8, 0.0, 1.8, 0.7])  # inside the joint range (the range guard)
    q = np.zeros((2, t, 7)) + home
    q[1, 30:] = np.nan  # MuJoCo reset this one: the engine gives NaN
    tau = np.zeros((2, t, 7))
    tau[0, 10:, 0] = np.minimum(np.arange(t - 10) + 1.0, 90.0)  # +1 N·m per tick: the slew limit
    ticks = np.arange(0, t, 10)
    targets, rows = np.tile(home, (t, 1)), np.tile(home, (len(ticks), 1))
    out = score(q, np.zeros_like(q), tau, targets, ticks, rows, GuardLimits(0.05, 1.0))
    assert out[1]["outcome"] == "diverged" and out[1]["metrics"]["track_rms_rad"] is None
    m = out[0]["metrics"]
    assert out[0]["outcome"] == "completed" and m["slew_saturated_ticks"] == t - 10
    assert m["tau_peak_nm_j1"] == 40.0 and not m["torque_limit_exceeded"]
    dq = np.zeros((1, t, 7))
    dq[0, 25:, 6] = 2.0  # J7 faster than the 1 rad/s bound from tick 25: the guard at tick 30 fires
    fast = score(q[:1], dq, tau[:1], targets, ticks, rows, GuardLimits(0.05, 1.0))[0]
    assert fast["outcome"] == "aborted_speed" and fast["metrics"]["abort_t_s"] == pytest.approx(0.030)
    assert (fast["metrics"]["abort_value"], fast["metrics"]["abort_joint"]) == (2.0, 7)
    off = q[:1].copy()
    off[0, 15:, 2] += 0.06  # 0.06 rad from the anchor (and the last sent target): the check at tick 20 fires
    far = score(off, np.zeros_like(off), tau[:1], targets, ticks, rows, GuardLimits(0.05, 1.0))[0]
    assert far["outcome"] == "aborted_tracking" and far["metrics"]["abort_t_s"] == pytest.approx(0.020)
    # the client checks the state of the daemon's latest 5 ms publication: a send at tick 33 sees tick 30's
    late = np.array([0, 13, 33])
    spike = q[:1].copy()
    spike[0, 31:, 4] += 0.06  # from tick 31: the send at 33 still sees tick 30, which is fine
    assert score(spike, np.zeros_like(spike), tau[:1], targets, late, np.tile(home, (3, 1)),
                 GuardLimits(0.05, 1.0))[0]["outcome"] == "completed"
    out_of_range = q[:1].copy()
    out_of_range[0, 18:, 3] = -0.1  # J4 past its repulsion limit (-0.47 rad) and 1.7 rad from the anchor
    ranged = score(out_of_range, np.zeros_like(q[:1]), tau[:1], targets, ticks, rows,
                   GuardLimits(5.0, 1.0))[0]
    assert ranged["outcome"] == "aborted_joint_range" and ranged["metrics"]["abort_t_s"] == pytest.approx(0.020)


def test_views_count_outcomes_and_percentiles(lake, reference):
    run_campaign(lake, _req(reference))
    run_campaign(lake, _req(reference, tracking_limit_rad=1e-3, campaign_id="tight", allow_aborting_reference=True))
    con = connect(lake)
    rows = con.execute("select campaign, outcome, count(*) from episodes group by all order by all").fetchall()
    assert rows == [("c1", "completed", 4), ("tight", "aborted_tracking", 4)]
    camp = con.execute("select campaign, fit, episodes, sample from campaigns order by campaign").fetchall()
    assert camp == [("c1", FIT_ID, 4, "posterior"), ("tight", FIT_ID, 4, "posterior")]
    p95 = con.execute("select quantile_cont(track_max_rad, 0.95) from episodes where campaign = ?", ["c1"]).fetchone()[0]
    values = [s["metrics"]["track_max_rad"] for s in CampaignStore(lake, "c1").summaries()]
    assert p95 == pytest.approx(np.percentile(values, 95))
    cols = {r[0] for r in con.execute("describe episodes").fetchall()}
    assert {"armature_j1", "motor_delay_ms", "kp_j7", "track_rms_rad_j3", "tau_peak_ratio"} <= cols


def test_empty_lake_has_empty_views(tmp_path):
    con = connect(tmp_path)
    assert con.execute("select count(*) from episodes").fetchone() == (0,)
    assert con.execute("select count(*) from campaigns").fetchone() == (0,)


def test_reference_preflight_errors_name_file_and_row(lake, tmp_path, reference):
    lines = reference.read_text().splitlines()
    cells = lines[5].split(",")
    cells[4] = "-3.5"  # q_ref4 far below its joint limit
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:5] + [",".join(cells)] + lines[6:]) + "\n")
    with pytest.raises(ValueError, match=r"bad.csv: row 4: target J4 = -3.5000 rad is outside"):
        run_campaign(lake, _req(bad))
    with pytest.raises(ValueError, match=r"reference.csv: row \d+: the reference itself moves J\d at .* pass --speed-limit"):
        run_campaign(lake, _req(reference, speed_limit_rad_s=0.01))
    assert not (lake / "campaigns").exists()


def test_a_recorded_runs_targets_as_the_reference(lake, tmp_path):
    from twinlake.fit.core.intervals import read_frames, resolve
    from twinlake.synthetic import multisine_run, record_and_ingest

    spec = multisine_run("r1", (0.5, 1.1), 1, seconds=1.0, amplitude_deg=2.0, ramp_s=0.3, hold_s=0.1)
    record_and_ingest([spec], tmp_path / "rec", lake, robot="bot")
    req = CampaignRequest(fit=FIT_ID, episodes=2, run="bot/r1", campaign_id="fromrun", sample="ranges",
                          ranges="mu_viscous=1:3", speed_limit_rad_s=3.0, tail_s=0.2)
    report = run_campaign(lake, req)
    assert report.total_done == 2
    store = CampaignStore(lake, "fromrun")
    config = store.read_config()
    assert config["reference"]["source"].startswith("bot/r1:")
    frames = read_frames(lake, resolve(lake, ["bot/r1"], min_duration_s=0.0)[:1])[0]
    recorded = np.column_stack([frames.column(f"q_target{j}").to_numpy() for j in range(1, 8)])
    samples = pq.read_table(store.episodes_dir / "e000000" / "samples.parquet")
    sent = np.column_stack([samples.column(f"q_target{j}").to_numpy() for j in range(1, 8)])
    assert sent.shape[0] == recorded.shape[0] + 200  # one tick per recorded row, then the tail
    assert np.array_equal(sent[: len(recorded)], recorded) and np.array_equal(sent[len(recorded):], np.tile(recorded[-1], (200, 1)))
    draws = [s["parameters"]["mu_viscous_j3"] for s in store.summaries()]
    assert all(1 <= v <= 3 for v in draws) and draws[0] != draws[1]
