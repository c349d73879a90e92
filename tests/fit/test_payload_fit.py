"""A fit with the true payload free recovers its mass, replaying each run with the configured
load its metadata states, and records that load with the fit."""

from __future__ import annotations

import pytest

import synth
from twinlake.fit.core.objective import build_data
from twinlake.fit.records.record import load_fit
from twinlake.fit.run import FitSettings, run_fit
from twinlake.fit.core.space import parse_space
from twinlake.sim import PARAM_NAMES
from twinlake.sim.arm_model.load import EndLoad

TRUE_MASS_KG = 0.8
CONFIGURED = EndLoad(0.3, (0.0, 0.0, 0.02))


@pytest.fixture(scope="module")
def payload_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("payloadlake")
    truth = synth.TRUTH.with_payload(EndLoad(TRUE_MASS_KG))
    frame = synth.record(truth, 1000, seed=5, configured_load=CONFIGURED)
    synth.publish_run(root, "demo", "p1", frame, metadata={"configured_load": CONFIGURED.to_json()})
    return root


def _frozen_truth(*free: str) -> list[str]:
    truth = synth.TRUTH.to_vector()
    return [",".join(f"{n}={float(truth[i])!r}" for i, n in enumerate(PARAM_NAMES) if n not in free and i < 29)]


def test_the_configured_load_comes_from_the_run_metadata_or_the_override(payload_lake):
    assert build_data(payload_lake, ["p1"]).inputs[0].configured_load == CONFIGURED
    override = EndLoad(1.0)
    assert build_data(payload_lake, ["p1"], configured_load=override).inputs[0].configured_load == override


def test_a_fit_with_the_payload_free_recovers_its_mass(payload_lake):
    space = parse_space([*_frozen_truth(), "payload_mass=0:2"])
    assert space.free_names == ["payload_mass"]
    settings = FitSettings(train=["p1"], holdout=[], space=space.to_json(), population=8, generations=4, seed=3,
                           refine_iterations=6)
    rec = run_fit(payload_lake, settings, fit_id="payload-mass", workers=0, progress=False)
    assert abs(rec.params.payload_mass - TRUE_MASS_KG) <= 0.01 * TRUE_MASS_KG, rec.params.payload_mass
    stored = load_fit(payload_lake, "payload-mass")
    assert stored.configured_loads == {"demo/p1:0": CONFIGURED.to_json()}
    assert stored.params.payload_mass == rec.params.payload_mass
    _exports_carry_the_payload(stored, payload_lake)
    # told the wrong configured load (none), the same search lands elsewhere
    wrong = FitSettings(**{**settings.__dict__, "configured_load": EndLoad().to_json()})
    off = run_fit(payload_lake, wrong, fit_id="payload-mass-wrong", workers=0, progress=False)
    assert abs(off.params.payload_mass - TRUE_MASS_KG) > 0.1
    assert load_fit(payload_lake, "payload-mass-wrong").configured_loads["demo/p1:0"]["mass_kg"] == 0.0


def _exports_carry_the_payload(rec, tmp) -> None:
    import json

    import mujoco

    from twinlake.fit.reports.export import export_fit
    from twinlake.sim import FR3_MODEL_PATH, load_params

    profile = export_fit(rec, "profile", tmp / "p.json")
    assert load_params(profile).payload_mass == rec.params.payload_mass
    ft = json.loads(export_fit(rec, "frankatwin", tmp / "sysid_best_params.json").read_text())
    assert len(ft["best_params_raw"]) == 29 and "payload_mass" not in ft["best_params_decoded"]
    snippet = export_fit(rec, "mjcf", tmp / "j.xml").read_text()
    body = snippet[snippet.index('<body name="payload"'):snippet.index("</body>") + len("</body>")]
    xml = FR3_MODEL_PATH.read_text()
    anchor = '<body name="fr3_link7" pos="0.088 0 0" quat="1 1 0 0">'
    model = mujoco.MjModel.from_xml_string(xml.replace(anchor, anchor + body))
    assert abs(model.body("payload").mass[0] - rec.params.payload_mass) < 1e-5
