"""joint_sysid_recording/v1: export from a real lake run, standalone validation, refusals."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import formats_fixtures as ff
import numpy as np
import pytest

from twinlake.catalog import Lake
from twinlake.ingest.bundles import bundle_validate
from twinlake.ingest.bundles.export import ExportRefused, export_bundle
from twinlake.ingest import ingest_paths
from twinlake.ingest.registry import ReadOptions


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle")
    ff.write_csv_v2(root, "ji_run", n=400)
    ff.write_csv_v2(root, "gapped", n=400, gap_after=250, idle_ticks=40)
    lk = Lake(root / "lake")
    outcomes = list(ingest_paths(lk, [root / "ji_run.csv", root / "gapped.csv"],
                                 ReadOptions(robot="fr3")))
    assert [o.status for o in outcomes] == ["published", "published"], outcomes
    return lk, root


def test_export_round_trips_the_recording_and_validates(lake, tmp_path):
    lk, root = lake
    out, lines = export_bundle(lk, "ji_run", tmp_path / "b")
    assert bundle_validate.validate_bundle(out).ok
    meta = json.loads((out / "metadata.json").read_text())
    raw = np.loadtxt(root / "ji_run.csv", delimiter=",", skiprows=1)
    header = (root / "ji_run.csv").read_text().split("\n", 1)[0].split(",")
    got = np.loadtxt(out / "samples.csv", delimiter=",", skiprows=1)
    names = (out / "samples.csv").read_text().split("\n", 1)[0].split(",")
    # explicit mapping: CSV v2 suffix i is bundle suffix i+1; values unchanged (%.12g source)
    for v2, bundle in (("q0", "q1"), ("dq6", "dq7"), ("tau_J3", "tau_J4"), ("tau_cmd0", "tau_cmd1"),
                       ("q_target_filtered2", "q_target_filtered3"), ("K_joint4", "K_joint5"),
                       ("seq", "seq"), ("t_s", "t_s"), ("robot_time_s", "robot_time_s"),
                       ("ee_qw", "ee_qw"), ("control_period_s", "control_period_s")):
        np.testing.assert_array_equal(got[:, names.index(bundle)], raw[:, header.index(v2)],
                                      err_msg=bundle)
    assert meta["controller"]["K_joint"] == [600.0, 600, 600, 600, 250, 150, 50]
    assert meta["controller"]["filter_alpha"] == 0.05 and meta["controller"]["use_friction"] is False
    assert meta["joint_mapping"][0] == {"joint": "J1", "bundle_suffix": 1,
                                        "fr3_stack_csv_v2_suffix": 0, "frankatwin_suffix": 1,
                                        "sim_joint": "fr3_joint1"}
    raw_names = {r["name"] for r in meta["source"]["raw_files"]}
    assert "ji_run.csv" in raw_names
    assert meta["samples"]["rows"] == 400 and meta["payload"]["mass_kg"] is None
    assert "## Checks before export" in (out / "report.md").read_text()
    # deterministic: same lake, same bytes
    out2, _ = export_bundle(lk, "ji_run", tmp_path / "b2")
    for name in ("samples.csv", "metadata.json"):
        assert (out / name).read_bytes() == (out2 / name).read_bytes()


def test_gapped_run_is_refused_with_reasons_unless_interval(lake, tmp_path):
    lk, _ = lake
    with pytest.raises(ExportRefused) as err:
        export_bundle(lk, "fr3/gapped", tmp_path / "x")
    text = str(err.value)
    assert "gapped" in text and "not joint impedance" in text and "--interval" in text
    assert not (tmp_path / "x").exists()
    out, _ = export_bundle(lk, "gapped", tmp_path / "i", interval=1)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["selection"]["seq_first"] == 40 and meta["selection"]["seq_last"] == 250
    assert meta["selection"]["run_problems_waived"]
    assert bundle_validate.validate_bundle(out).ok
    with pytest.raises(ExportRefused, match="not joint impedance"):
        export_bundle(lk, "gapped", tmp_path / "i0", interval=0)  # the idle stretch
    with pytest.raises(ExportRefused, match="no clean interval 9"):
        export_bundle(lk, "gapped", tmp_path / "i9", interval=9)


def test_validator_catches_tampering(lake, tmp_path):
    lk, _ = lake
    out, _ = export_bundle(lk, "ji_run", tmp_path / "b")
    lines = (out / "samples.csv").read_text().splitlines()
    del lines[100]  # drop a tick: a gap and a hash mismatch
    (out / "samples.csv").write_text("\n".join(lines) + "\n")
    rep = bundle_validate.validate_bundle(out)
    failed = {name for name, ok, _ in rep.checks if not ok}
    assert {"samples.csv sha256", "seq monotonic, no gaps", "row count"} <= failed
    meta = json.loads((out / "metadata.json").read_text())
    meta["samples"]["columns"][4]["unit"] = "deg"
    (out / "metadata.json").write_text(json.dumps(meta))
    rep = bundle_validate.validate_bundle(out)
    assert not dict((n, ok) for n, ok, _ in rep.checks)["column units"]


def test_validator_is_standalone_and_cli_exit_codes(lake, tmp_path):
    source = Path(bundle_validate.__file__).read_text()
    imported = {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else
                (n.module or "").split(".")[0] for n in ast.walk(ast.parse(source))
                if isinstance(n, (ast.Import, ast.ImportFrom))}
    assert imported <= {"__future__", "hashlib", "io", "json", "re", "sys", "dataclasses",
                        "pathlib", "numpy", "pyarrow"}
    lk, _ = lake
    out, _ = export_bundle(lk, "ji_run", tmp_path / "b")
    copy = tmp_path / "bundle_validate.py"
    copy.write_text(source)  # a consumer copies the one file
    ok = subprocess.run([sys.executable, str(copy), str(out)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip().endswith(f"VALID: {out}")
    (out / "report.md").unlink()
    bad = subprocess.run([sys.executable, str(copy), str(out), "--json"], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and json.loads(bad.stdout)["ok"] is False


def test_validator_reports_malformed_metadata_without_a_traceback(lake, tmp_path):
    lk, _ = lake
    out, _ = export_bundle(lk, "ji_run", tmp_path / "b")
    meta = json.loads((out / "metadata.json").read_text())
    meta["samples"] = "oops"
    (out / "metadata.json").write_text(json.dumps(meta))
    rep = bundle_validate.validate_bundle(out)
    assert not rep.ok and any(not ok for _, ok, _ in rep.checks)
    assert bundle_validate.main([str(tmp_path / "missing")]) == 1
