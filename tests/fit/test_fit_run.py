"""End-to-end fits on a real local Ray cluster over a real lake: determinism across worker
counts, a killed actor, the partition round trip through `twinlake sql`, export, and
`--resume` after a SIGKILL of the driver."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from twinlake.catalog import Lake, connect
from twinlake.cli import app
from twinlake.fit.records.record import load_fit
from twinlake.fit.run import FitSettings, run_fit, work_dir
from twinlake.fit.core.space import parse_space
import synth
from twinlake.sim import PARAM_NAMES, load_params

TWINLAKE = [sys.executable, "-m", "twinlake"]


def _settings(**kw) -> FitSettings:
    base = dict(train=["r1", "demo/r2:0"], holdout=["r3"], space=parse_space(["dynamic_ratio=0.6"]).to_json(),
                population=8, generations=3, seed=11, max_duration_s=0.4, chunk=3, method="cma")
    base.update(kw)
    return FitSettings(**base)


def _same_result(a, b) -> None:
    assert np.array_equal(a.vector, b.vector)
    assert a.best_loss == b.best_loss
    for key in ("iter", "min", "mean", "best", "per_traj_min", "best_candidate_weighted", "sigma", "delay_probs"):
        assert [h[key] for h in a.history] == [h[key] for h in b.history], key
    assert [(u.run, u.loss) for u in a.runs] == [(u.run, u.loss) for u in b.runs]


def test_same_seed_same_bits_whatever_the_number_of_workers(synth_lake, ray_cluster):
    one = run_fit(synth_lake, _settings(), fit_id="det-1w", workers=1, progress=False)
    two = run_fit(synth_lake, _settings(chunk=None), fit_id="det-2w", workers=2, progress=False)  # auto chunks of 4
    local = run_fit(synth_lake, _settings(), fit_id="det-0w", workers=0, progress=False)
    _same_result(one, two)
    _same_result(one, local)
    other = run_fit(synth_lake, _settings(seed=12), fit_id="det-seed12", workers=0, progress=False)
    assert not np.array_equal(one.vector, other.vector)
    assert one.best_loss <= min(h["min"] for h in one.history)
    assert [u.role for u in one.runs] == ["train", "train", "holdout"]
    assert not work_dir(Lake(synth_lake), "det-1w").exists()  # staging area cleaned


def test_killing_an_actor_mid_fit_does_not_change_the_result(synth_lake, ray_cluster):
    reference = load_fit(synth_lake, "det-1w") if (Lake(synth_lake).fit_dir("det-1w")).exists() else \
        run_fit(synth_lake, _settings(), fit_id="kill-ref", workers=0, progress=False)
    killed = []

    def kill_one(gen, pool):
        if gen == 1:
            pid = pool.pids()[0]
            # mid-generation: kill while generation 2 is being evaluated
            threading.Timer(0.05, lambda: (os.kill(pid, signal.SIGKILL), killed.append(pid))).start()

    rec = run_fit(synth_lake, _settings(), fit_id="kill-actor", workers=2, progress=False, on_generation=kill_one)
    assert killed
    assert rec.extra["actor_replacements"] >= 1
    _same_result(rec, reference)


def test_partition_round_trips_through_twinlake_sql_and_exports(synth_lake, ray_cluster, tmp_path):
    rec = run_fit(synth_lake, _settings(generations=4, seed=3, refine_iterations=1), fit_id="sql-rt",
                  workers=0, progress=False)
    out = subprocess.run(
        TWINLAKE + ["sql", "--lake", str(synth_lake), "--format", "json",
                    "select * from fit_history where fit = 'sql-rt' order by iter"],
        capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    n = len(rows)  # 4 generations, 1 LM iteration, then up to 2 iterations per delay probe
    assert [r["iter"] for r in rows] == list(range(1, n + 1)) and 5 <= n <= 9
    assert [r["stage"] for r in rows] == ["cma"] * 4 + ["refine"] * (n - 4)
    assert all(b2 <= b1 for b1, b2 in zip([r["best"] for r in rows], [r["best"] for r in rows[1:]]))
    assert [r["best"] for r in rows] == [h["best"] for h in rec.history]
    assert rows[-1]["best"] <= rows[3]["best"] and rec.best_loss == rows[-1]["best"]
    assert all(len(r["per_traj_min"]) == 2 for r in rows)
    assert all(len(r["best_candidate_weighted"]) == 2 for r in rows[:4])
    con = connect(synth_lake)
    cur = con.execute(
        "select f.fit, f.best_loss, f.motor_delay_ms, r.run, r.role, r.run_sha256 "
        "from fits f join fit_runs r using (fit) where fit = 'sql-rt' order by r.role desc, r.run")
    joined = [dict(zip([d[0] for d in cur.description], row)) for row in cur.fetchall()]
    assert [(r["run"], r["role"], r["run_sha256"]) for r in joined] == [
        ("r1", "train", "sha-r1"), ("r2", "train", "sha-r2"), ("r3", "holdout", "sha-r3")]
    assert joined[0]["best_loss"] == rec.best_loss
    # exports (the real CLI, in-process): profile and FrankaTwin JSON read back to the same
    # parameters; MJCF has the 7 joints; an unknown fit is a one-line error
    runner = CliRunner()
    for fmt, name in (("profile", "p.json"), ("frankatwin", "sysid_best_params.json"), ("mjcf", "j.xml")):
        res = runner.invoke(app, ["fit", "export", "sql-rt", "--lake", str(synth_lake), "--format", fmt,
                                  "--out", str(tmp_path / name), "--force"])  # a 4-generation fit: not trusted
        assert res.exit_code == 0, res.output
    for name in ("p.json", "sysid_best_params.json"):
        assert np.array_equal(load_params(tmp_path / name).to_vector(), rec.vector)
    body = json.loads((tmp_path / "sysid_best_params.json").read_text())
    assert len(body["best_params_raw"]) == 29 and len(body["history"]) == n and len(body["bounds"]) == 29
    assert (tmp_path / "j.xml").read_text().count("<joint ") == 7
    shown = json.loads(runner.invoke(app, ["fit", "show", "sql-rt", "--lake", str(synth_lake), "--json"]).output)
    assert shown["params"]["motor_delay_ms"] == rec.params.motor_delay_ms and shown["history_rows"] == n and shown["generations"] == 4
    bad = runner.invoke(app, ["fit", "show", "nope", "--lake", str(synth_lake)])
    assert bad.exit_code == 2 and "fit 'nope'" in bad.output


def _cli_fit(lake: Path, fit_id: str, address: str) -> list[str]:
    return TWINLAKE + ["fit", "run", "--lake", str(lake), "--train", "r1", "--train", "r2",
                       "--holdout", "r3", "--params", "dynamic_ratio=0.6", "--population", "8",
                       "--generations", "8", "--seed", "5", "--max-seconds", "0.4", "--workers", "1", "--refine", "0",
                       "--address", address, "--id", fit_id, "--json"]


@pytest.mark.slow
def test_resume_after_sigkill_of_the_driver_gives_the_uninterrupted_result(synth_lake, ray_cluster):
    """`fit run`'s default (local) method: killed once its first stage is checkpointed."""
    lake = Lake(synth_lake)
    proc = subprocess.Popen(_cli_fit(synth_lake, "killed", ray_cluster), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    stage = work_dir(lake, "killed") / "local-5.pkl"
    deadline = time.monotonic() + 120
    checkpointed = None
    while time.monotonic() < deadline and proc.poll() is None:
        if stage.is_file():
            try:
                checkpointed = pickle.loads(stage.read_bytes())["stage"]
            except (EOFError, pickle.UnpicklingError):
                checkpointed = None
            if checkpointed is not None:
                break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert checkpointed in ("cheap", "full") and not lake.fit_dir("killed").exists()
    resumed = subprocess.run(TWINLAKE + ["fit", "run", "--lake", str(synth_lake), "--resume", "killed",
                                         "--workers", "1", "--address", ray_cluster, "--json"],
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["fit"] == "killed"
    settings = FitSettings(train=["r1", "r2"], holdout=["r3"], space=parse_space(["dynamic_ratio=0.6"]).to_json(),
                           population=8, generations=8, seed=5, max_duration_s=0.4)
    straight = run_fit(synth_lake, settings, fit_id="straight", workers=0, progress=False)
    _same_result(load_fit(synth_lake, "killed"), straight)


def test_small_recovery_of_two_joints(synth_lake):
    """Armature and viscous friction of J1, J2 free (others frozen at the truth): CMA-ES
    then LM recover them within 2 % from 2×1.2 s of noisy data."""
    truth = synth.TRUTH.to_vector()
    specs = [f"{name}={float(truth[i])!r}" for i, name in enumerate(PARAM_NAMES)
             if name not in ("armature_j1", "armature_j2", "mu_viscous_j1", "mu_viscous_j2")]
    rec = run_fit(synth_lake, _settings(space=parse_space([",".join(specs)]).to_json(), population=8,
                                        generations=3, max_duration_s=None, refine_iterations=6, holdout=[]),
                  fit_id="recover-2j", workers=0, progress=False)
    for name in ("armature_j1", "armature_j2", "mu_viscous_j1", "mu_viscous_j2"):
        i = PARAM_NAMES.index(name)
        assert abs(rec.vector[i] - truth[i]) <= 0.02 * truth[i], (name, rec.vector[i], truth[i])
    assert rec.params.motor_delay_ms == synth.TRUTH.motor_delay_ms
