"""Logs of the user's own layout (`twinlake ingest FILE --mapping MAP.toml`), as a PC-side
logger writes them: a clean 1 kHz recording of the independent test plant turned by
`plant.pc_logger` into the libfranka-example layout with a ms counter, ~6 % stale repeats,
one tick in twelve skipped and a jittery clock. Both are counted and flagged, never
interpolated; intervals list the clean stretches; the replay fit refuses the run (no
controller, gains) while a log of torques only is fitted by the torque route, validated by
held-out torque prediction and refused by the replay with the one message of fit/core/needs;
a log with targets gives a campaign reference; bad mappings are refused naming file, key and
column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the `plant` package
from plant import PcLogger, pc_log, record, write_csv, write_reference  # noqa: E402

from twinlake.catalog import Lake, connect  # noqa: E402
from twinlake.catalog.intervals import clean_intervals  # noqa: E402
from twinlake.ingest import ingest_paths  # noqa: E402
from twinlake.ingest.registry import ReadOptions  # noqa: E402

LIBFRANKA_MAPPING = """\
[time]
column = "duration"
unit = "ms"

[columns]
q = "q[{i}]"
dq = "dq[{i}]"
tau_measured = "tau_J[{i}]"
tau_external = "tau_ext_hat_filtered[{i}]"
q_target = "q_d[{i}]"
dq_target = "dq_d[{i}]"
"""
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


@pytest.fixture(scope="module")
def pc(tmp_path_factory):
    """(PcLog, its CSV, the mapping) from a 6 s plant recording."""
    d = tmp_path_factory.mktemp("pc")
    t = np.arange(0, 6.0, 0.01)
    q_ref = READY + 0.15 * np.sin(2 * np.pi * 0.5 * t[:, None] + np.arange(7))
    rec = record(write_reference(d / "reference.csv", t, q_ref), d / "clean.csv",
                 settle_s=0.3, tail_s=0.2)
    clean = _columns(rec.csv_path)
    log = pc_log(clean, PcLogger(seed=4))
    mapping = d / "libfranka.toml"
    mapping.write_text(LIBFRANKA_MAPPING)
    return log, write_csv(log, d / "panda_log.csv"), mapping


def _columns(csv: Path) -> dict[str, np.ndarray]:
    table = pacsv.read_csv(csv)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def _ingest(lake: Path, path: Path, mapping: Path, run: str, robot: str = "panda"):
    options = ReadOptions(robot=robot, run=run, mapping=mapping)
    return list(ingest_paths(Lake(lake), [path], options))


def _run_row(lake: Path, run: str) -> dict:
    con = connect(lake)
    cur = con.execute("SELECT * FROM runs WHERE run = ?", [run])
    names = [c[0] for c in cur.description]
    return dict(zip(names, cur.fetchone()))


def _frames(lake: Path, run: str) -> pa.Table:
    return connect(lake).sql(f"SELECT * FROM frames WHERE run = '{run}' ORDER BY seq").to_arrow_table()


def _clean_stretches(tick: np.ndarray, stale: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of consecutive ticks without a stale row (what intervals must list)."""
    ok = ~stale
    out, start = [], None
    for k in range(len(tick)):  # plain loop: an independent statement of the rule
        if ok[k] and start is None:
            start = k
        end = k + 1 == len(tick) or not ok[k + 1] or tick[k + 1] != tick[k] + 1
        if start is not None and ok[k] and end:
            out.append((int(tick[start] - tick[0]), int(tick[k] - tick[0])))
            start = None
    return out


def test_stale_rows_and_skipped_ticks_are_counted_and_flagged(pc, tmp_path):
    log, csv, mapping = pc
    lake = tmp_path / "lake"
    (out,) = _ingest(lake, csv, mapping, "pc1")
    assert out.status == "published", out.message
    assert 0.04 < log.stale.mean() < 0.07 and log.skipped.size > 0
    row = _run_row(lake, "pc1")
    inner_skips = int(np.count_nonzero((log.skipped > log.tick[0]) & (log.skipped < log.tick[-1])))
    assert row["frame_count"] == log.rows  # every row kept, nothing interpolated
    assert row["stale_frames"] == int(log.stale.sum())
    assert row["dropped"] == row["gap_count"] == inner_skips  # each skip lost one tick
    assert row["tick_grid"] == "rebuilt"
    (said,) = [r for r in row["reasons"] if "tick grid rebuilt from t_s at its median period" in r]
    assert float(said.split("period ")[1].split(" ms")[0]) == pytest.approx(1.0, abs=0.01)
    assert abs(row["tick_period_s"] - 1e-3) < 2e-5
    assert {"stale_rows", "seq_gaps"} <= set(row["flags"])
    assert row["source_format"] == "mapped_csv" and row["mapping_file"] == "libfranka.toml"
    assert json.loads(row["metadata_json"])["mapping"]["time"] == {"column": "duration", "unit": "ms"}
    assert row["mapping_toml"] == LIBFRANKA_MAPPING
    roles = {f["role"]: f for f in row["raw_files"]}
    assert set(roles) == {"recording", "mapping"} and len(roles["mapping"]["sha256"]) == 64
    frames = _frames(lake, "pc1")
    np.testing.assert_array_equal(frames.column("seq").to_numpy(), log.tick - log.tick[0])
    np.testing.assert_array_equal(frames.column("stale").to_numpy(), log.stale)
    np.testing.assert_array_equal(frames.column("t_s").to_numpy(), log.columns["duration"] * 1e-3)
    np.testing.assert_allclose(frames.column("tau_ext3").to_numpy(),  # the CSV's %.12g
                               log.columns["tau_ext_hat_filtered[2]"], rtol=1e-11, atol=1e-11)
    assert frames.column("tau_cmd1").null_count == frames.num_rows  # not mapped: null


def test_intervals_list_the_clean_stretches_with_reasons(pc, tmp_path):
    log, csv, mapping = pc
    lake = tmp_path / "lake"
    _ingest(lake, csv, mapping, "pc1")
    rows = clean_intervals(connect(lake), run="pc1").to_pylist()
    assert [(r["seq_first"], r["seq_last"]) for r in rows] == _clean_stretches(log.tick, log.stale)
    assert {r["start_reason"] for r in rows} == {"run_start", "seq_gap", "stale"}
    for r in rows:
        assert r["period_s"] == pytest.approx(1e-3, abs=2e-5)
        if r["start_reason"] == "seq_gap":
            assert r["ticks_lost_before"] == 1
        else:
            assert r["ticks_lost_before"] is None
        if r["end_reason"] == "seq_gap":
            assert r["ticks_lost_after"] == 1
    stale_seq = set((log.tick - log.tick[0])[log.stale].tolist())
    assert not any(r["seq_first"] <= s <= r["seq_last"] for r in rows for s in stale_seq)


def test_the_replay_fit_refuses_a_run_without_controller_or_gains(pc, tmp_path):
    log, csv, mapping = pc
    lake = tmp_path / "lake"
    _ingest(lake, csv, mapping, "pc1")
    env = dict(os.environ, TWINLAKE_LAKE=str(lake))
    res = subprocess.run([sys.executable, "-m", "twinlake", "fit", "run", "--train", "panda/pc1",
                          "--min-seconds", "0.005"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "panda/pc1" in lines[0]
    assert "no controller (joint impedance, 2), no gains (K_joint, D_joint)" in lines[0]
    assert not (lake / "fits").exists()


def test_a_mapped_joint_impedance_run_with_gains_is_replayable(pc, tmp_path):
    from twinlake.fit.core.intervals import resolve

    log, csv, _ = pc
    mapping = tmp_path / "ji.toml"
    mapping.write_text(LIBFRANKA_MAPPING + '\n[run]\ncontroller = "joint_impedance"\n'
                       "kp = [600, 600, 600, 600, 250, 150, 50]\nkd = [50, 50, 50, 50, 30, 25, 15]\n")
    lake = tmp_path / "lake"
    (out,) = _ingest(lake, csv, mapping, "pc_ji")
    assert out.status == "published", out.message
    row = _run_row(lake, "pc_ji")
    assert row["K_joint"] == [600, 600, 600, 600, 250, 150, 50] and row["controllers"] == [2]
    refs = resolve(lake, ["panda/pc_ji"], min_duration_s=0.01)
    assert refs and all(r.run == "pc_ji" for r in refs)


TORQUES_ONLY = '[time]\ncolumn = "duration"\nunit = "ms"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\ntau_measured = "tau_J[{i}]"\n'


def _twinlake(lake: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TWINLAKE_LAKE=str(lake))
    return subprocess.run([sys.executable, "-m", "twinlake", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_a_log_of_torques_only_is_fitted_by_the_torque_route_and_refused_by_the_replay(pc, tmp_path):
    log, csv, _ = pc
    mapping = tmp_path / "torques.toml"
    mapping.write_text(TORQUES_ONLY)
    lake = tmp_path / "lake"
    clean = _columns(csv.parent / "clean.csv")  # the recording the log was written from
    held_out = write_csv(pc_log(clean, PcLogger(seed=9)), tmp_path / "held_out.csv")  # other stale rows and skips
    assert _ingest(lake, csv, mapping, "tq")[0].status == "published"
    assert _ingest(lake, held_out, mapping, "tq_b")[0].status == "published"
    fitted = _twinlake(lake, "fit", "run", "--method", "torque", "--train", "panda/tq", "--id", "tq-fit", "--json")
    assert fitted.returncode == 0, fitted.stderr
    (settings,) = connect(lake).execute("SELECT settings_json FROM fits WHERE fit = 'tq-fit'").fetchone()
    assert json.loads(settings)["method"] == "torque"
    refused = _twinlake(lake, "fit", "run", "--train", "panda/tq", "--min-seconds", "0.005", "--workers", "0")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.endswith("run panda/tq: cannot be replayed: no controller (joint impedance, 2), no joint targets "
                         "(q_target), no gains (K_joint, D_joint) recorded; it needs the controller, targets, gains "
                         "(try --method torque: the torque route needs only q, dq and a torque)"), line
    assert connect(lake).execute("SELECT count(*) FROM fits").fetchone() == (1,)  # the refusal wrote nothing
    scored = _twinlake(lake, "fit", "validate", "tq-fit", "--runs", "panda/tq_b", "--json")
    assert scored.returncode == 0, scored.stderr
    row = json.loads(scored.stdout)
    assert row["run"] == "panda/tq_b" and row["method"] == "torque prediction (not replayable)"
    assert row["passed"] is True and row["variance_explained_all"] > 0.9, row


def test_a_campaign_reference_is_taken_from_a_mapped_log_with_targets(pc, tmp_path):
    from twinlake.campaign.reference import from_run

    log, csv, mapping = pc  # q_target mapped, no controller or gains
    lake = tmp_path / "lake"
    _ingest(lake, csv, mapping, "ref")
    ref = from_run(lake, "panda/ref", speed_limit_rad_s=2.0)
    frames = _frames(lake, "ref")
    first = clean_intervals(connect(lake), run="ref").to_pylist()[0]
    rows = (frames.column("seq").to_numpy() >= first["seq_first"]) & (frames.column("seq").to_numpy() <= first["seq_last"])
    want = np.column_stack([frames.column(f"q_target{j}").to_numpy()[rows] for j in range(1, 8)])
    np.testing.assert_array_equal(ref.targets_rad, want)
    assert ref.source == "panda/ref:0"
    torques_only = tmp_path / "torques.toml"
    torques_only.write_text(TORQUES_ONLY)
    _ingest(lake, csv, torques_only, "bare")
    with pytest.raises(ValueError, match=r"^run panda/bare: cannot be a campaign reference \(--run\): no joint "
                                         r"targets \(q_target\) recorded; it needs the targets$"):
        from_run(lake, "panda/bare")


def test_parquet_and_npz_logs_give_the_same_frames(pc, tmp_path):
    log, _, mapping = pc
    parquet = tmp_path / "log.parquet"
    pq.write_table(pa.table({k: pa.array(v) for k, v in log.columns.items()}), parquet)
    npz = tmp_path / "log.npz"
    arrays = {"t_ms": log.columns["duration"]}
    for name in ("q", "dq", "tau_J"):
        arrays[name] = np.column_stack([log.columns[f"{name}[{i}]"] for i in range(7)])
    np.savez(npz, **arrays)
    npz_map = tmp_path / "npz.toml"
    npz_map.write_text('[time]\ncolumn = "t_ms"\nunit = "ms"\n[columns]\nq = "q"\ndq = "dq"\n'
                       'tau_measured = "tau_J"\n')
    lake = tmp_path / "lake"
    assert _ingest(lake, parquet, mapping, "pq")[0].status == "published"
    assert _ingest(lake, npz, npz_map, "npz")[0].status == "published"
    a, b = _frames(lake, "pq"), _frames(lake, "npz")
    for name in ["seq", "t_s", "stale"] + [f"{p}{j}" for p in ("q", "dq", "tau_J") for j in range(1, 8)]:
        assert a.column(name).equals(b.column(name)), name
    assert _run_row(lake, "npz")["source_format"] == "mapped_npz"
    assert _run_row(lake, "pq")["stale_frames"] == int(log.stale.sum())


def test_degrees_and_step_durations(tmp_path):
    n = 400
    step_ms = np.ones(n)
    step_ms[100] = 3.0  # libfranka's per-callback duration: two ticks lost before row 100
    q_deg = np.degrees(0.1 * np.sin(np.arange(n) * 0.01))[:, None] + np.zeros(7)
    q_deg = q_deg + np.degrees(np.array([0, -0.785, 0, -2.356, 0, 1.571, 0.785]))
    cols = {"d": step_ms} | {f"q{j}": q_deg[:, j - 1] for j in range(1, 8)}
    cols |= {f"v{j}": np.gradient(q_deg[:, j - 1], 1e-3) for j in range(1, 8)}
    csv = tmp_path / "deg.csv"
    pacsv.write_csv(pa.table(cols), csv)
    mapping = tmp_path / "deg.toml"
    mapping.write_text('[time]\ncolumn = "d"\nunit = "ms"\nsteps = true\nclock = "robot"\n'
                       '[columns]\nq = "q{j}"\ndq = ["v1", "v2", "v3", "v4", "v5", "v6", "v7"]\n'
                       '[units]\nangle = "deg"\n')
    lake = tmp_path / "lake"
    (out,) = _ingest(lake, csv, mapping, "deg")
    assert out.status == "published", out.message
    frames = _frames(lake, "deg")
    np.testing.assert_allclose(frames.column("q4").to_numpy(), np.radians(q_deg[:, 3]), rtol=1e-12)
    assert frames.column("robot_time_s").equals(frames.column("t_s"))
    seq = frames.column("seq").to_numpy()
    assert seq[100] - seq[99] == 3 and _run_row(lake, "deg")["dropped"] == 2


@pytest.mark.parametrize("toml, expected", [
    ('[time]\ncolumn = "duration"\nunit = "ms"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\n'
     'tau_measured = "tau_J[{j}]"\n',
     "mapping bad.toml [columns.tau_measured] names column 'tau_J[7]', which panda_log.csv does not have"),
    ('[time]\ncolumn = "time"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\n',
     "mapping bad.toml [time.column] names column 'time', which panda_log.csv does not have "
     "(its columns: duration, success rate, q[0]"),
    ('[time]\ncolumn = "duration"\nunit = "min"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\n',
     "bad.toml: field 'time.unit': expected one of s, ms, us, ns, got 'min'"),
    ('[time]\ncolumn = "duration"\n[columns]\nq = "q[{i}]"\n',
     "bad.toml: field 'columns.dq': required: the source columns of joint velocities"),
    ('[time]\ncolumn = "duration"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\ntau = "tau_J[{i}]"\n',
     "bad.toml: field 'columns.tau': unknown key; expected any of dq, dq_target, q,"),
    ('[time]\ncolumn = "duration"\n[columns]\nq = ["q[0]", "q[1]"]\ndq = "dq[{i}]"\n',
     "bad.toml: field 'columns.q': expected a list of 7 column names"),
    ('[time]\ncolumn = "duration"\n[columns]\nq = "q[{i}]"\ndq = "dq[{i}]"\n'
     '[run]\ncontroller = "joint_impedance"\n',
     "bad.toml: field 'columns.q_target': [run] controller = joint_impedance needs [columns] q_target"),
])
def test_bad_mappings_are_refused_naming_file_key_and_column(pc, tmp_path, toml, expected):
    log, csv, _ = pc
    bad = tmp_path / "bad.toml"
    bad.write_text(toml)
    lake = tmp_path / "lake"
    (out,) = _ingest(lake, csv, bad, "bad")
    assert out.status == "rejected" and expected in out.message, out.message
    assert not (lake / "runs").exists() or not any((lake / "runs").rglob("run.parquet"))
    (qdir,) = (lake / "_quarantine").iterdir()
    assert {"panda_log.csv", "bad.toml", "reason.json"} <= {p.name for p in qdir.iterdir()}


def test_the_cli_ingests_with_mapping_and_says_what_it_needs(pc, tmp_path):
    log, csv, mapping = pc
    lake = tmp_path / "lake"
    env = dict(os.environ, TWINLAKE_LAKE=str(lake))
    cmd = [sys.executable, "-m", "twinlake", "ingest", str(csv), "--robot", "panda"]
    res = subprocess.run(cmd + ["--mapping", str(mapping), "--json"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    outcome = json.loads(res.stdout)
    assert outcome["format"] == "mapped_log" and "stale_rows" in outcome["flags"]
    (again,) = list(ingest_paths(Lake(lake), [csv], ReadOptions(robot="panda", run="x")))
    assert again.status == "rejected"  # without the mapping it is not a recognised recording
    assert "mapped_log: a log of your own layout is read with --mapping MAP.toml" in again.message
