"""`twinlake excite --design`: the real command on a short segment, bounds respected,
predictions stored, and the design beats fr3_stack's documented multisine under the surrogate."""

import json

from typer.testing import CliRunner

from twinlake.cli import app


def test_design_respects_bounds_and_stores_predictions(tmp_path):
    out = tmp_path / "designed"
    result = CliRunner().invoke(app, ["excite", "--design", "--seconds", "8", "--ramp", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "metadata.json").read_text())
    design = meta["design"]
    assert len(design["predicted_half_width_rel"]) == 28
    assert design["predicted_worst_rel"] < design["baseline_predicted_worst_rel"]
    peaks = meta["reference_peaks"]
    assert max(peaks["velocity_rad_s"]) <= 0.1 and max(peaks["acceleration_rad_s2"]) <= 0.3
    assert max(peaks["jerk_rad_s3"]) <= 2.0
    assert max(peaks["offset_rad"]) <= max(design["bounds"]["position_rad"]) + 1e-12
    assert len(meta["plan"]["tone_table"]) == 7
