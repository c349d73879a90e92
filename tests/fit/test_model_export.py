"""`fit export --format model`: the whole FR3 MJCF as a fit identified it. A torque fit with
`+links` on the independent plant's link-side torques writes every link's inertial; MuJoCo
loads the file, its rigid-body inverse dynamics is the fit's (Pinocchio's Y·θ at the fitted θ,
so the frames and conventions survived the conversion), link 7 carries the plant's payload,
and the twin replays a recorded run on it. A payload fit writes the payload body instead."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest
from typer.testing import CliRunner

import torque_runs
from twinlake.catalog import connect
from twinlake.catalog.selection import run_frames
from twinlake.cli import app
from twinlake.fit.records.model_export import link_thetas
from twinlake.fit.records.record import load_fit
from twinlake.fit.torque import TorqueFitSettings, fit_torque
from twinlake.fit.torque.model.regressor import RigidBodyModel
from twinlake.sim.arm_model.model import FR3_MODEL_PATH, PAYLOAD_BODY, load_model


def run_frames_q(lake: Path, run: str) -> np.ndarray:
    """(T, 7) recorded joint positions of plant run `run`, every 10th tick."""
    con = connect(lake)
    try:
        table = run_frames(con, "plant", run)
    finally:
        con.close()
    return np.column_stack([table.column(f"q{j}").to_numpy() for j in range(1, 8)])[::10]


@pytest.fixture(scope="module")
def plant_lake(tmp_path_factory) -> tuple[Path, object]:
    """Two 6 s plant runs; fits 'links' (+links) and 'tool' (the payload) on run a's tau_J."""
    lake, plant = torque_runs.plant_runs(tmp_path_factory.mktemp("mx"), "plant", ("a", "b"), seconds=6.0)
    for fit_id, params in (("links", ["+links"]), ("tool", [])):
        fit_torque(lake, TorqueFitSettings(train=["plant/a"], torque="measured", friction_law="tanh", params=params),
                   fit_id=fit_id)
    return lake, plant


def _gravity_nm(model: mujoco.MjModel, q: np.ndarray) -> np.ndarray:
    """(T, 7) MuJoCo's gravity torque of `model` (gravity on) at the configurations q (T, 7)."""
    data = mujoco.MjData(model)
    out = np.empty_like(q)
    for t in range(len(q)):
        data.qpos[:7], data.qvel[:] = q[t], 0.0
        mujoco.mj_forward(model, data)
        out[t] = data.qfrc_bias[:7]
    return out


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _export(lake: Path, fit_id: str, out: Path, fmt: str = "model") -> Path:
    res = _cli("fit", "export", fit_id, "--lake", str(lake), "--format", fmt, "--out", str(out))
    assert res.exit_code == 0, res.output
    return out


def test_links_fit_exports_a_model_whose_inverse_dynamics_is_the_fits(plant_lake, tmp_path):
    lake, _plant = plant_lake
    rec = load_fit(lake, "links")
    thetas = link_thetas(rec)
    assert thetas is not None and thetas.shape == (7, 10)
    path = _export(lake, "links", tmp_path / "links.fr3.xml")
    model = mujoco.MjModel.from_xml_path(str(path))  # MuJoCo loads every identified body
    assert tuple(model.opt.gravity) == (0.0, 0.0, -9.81)
    masses = [float(model.body(f"fr3_link{i}").mass[0]) for i in range(1, 8)]
    assert masses == pytest.approx(thetas[:, 0].tolist(), rel=1e-8)
    nominal = RigidBodyModel.load()
    # gravity identifies the links' first moments, not each mass, and over a run's small range of
    # poses a constant part of it trades with the per-joint sensor offsets (2.2 N·m on J2 here): in
    # MuJoCo, the identified links' gravity torque over run b's poses, about each joint's mean, is
    # the payload fit's (the plant's own links and tool): measured 0.007 N·m RMS, the bundled arm 0.197
    q = run_frames_q(lake, "b")
    tool = mujoco.MjModel.from_xml_path(str(_export(lake, "tool", tmp_path / "tool.fr3.xml")))
    bundled = mujoco.MjModel.from_xml_string(FR3_MODEL_PATH.read_text().replace('gravity="0 0 0"', 'gravity="0 0 -9.81"'))
    g_links, g_tool, g_bundled = (_gravity_nm(m, q) for m in (model, tool, bundled))
    rms = lambda e: float(np.sqrt(np.mean((e - e.mean(axis=0)) ** 2)))  # noqa: E731  (about each joint's mean)
    assert rms(g_links - g_tool) < 0.1 * rms(g_bundled - g_tool), (rms(g_links - g_tool), rms(g_bundled - g_tool))
    assert [float(model.dof_armature[i]) for i in range(7)] == pytest.approx(rec.params.armature.tolist())
    # MuJoCo's rigid body (no armature, damping or friction) against Pinocchio's Y·θ at the fitted θ
    model.dof_armature[:] = 0.0
    model.dof_damping[:] = 0.0
    model.dof_frictionloss[:] = 0.0
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, (20, 7)) + np.array([0, 0, 0, -1.6, 0, 1.6, 0])
    dq, ddq = rng.normal(0, 0.5, (20, 7)), rng.normal(0, 2.0, (20, 7))
    expected = np.einsum("tjk,k->tj", nominal.regressor(q, dq, ddq), thetas.reshape(-1))
    got = np.empty_like(expected)
    for t in range(len(q)):
        data.qpos[:7], data.qvel[:7], data.qacc[:7] = q[t], dq[t], ddq[t]
        mujoco.mj_inverse(model, data)
        got[t] = data.qfrc_inverse[:7]
    assert np.abs(got - expected).max() < 1e-6 * max(1.0, np.abs(expected).max())
    assert np.abs(got - np.einsum("tjk,k->tj", nominal.regressor(q, dq, ddq), nominal.theta_nominal)).max() > 0.5

    # the twin loads it (gravity off, as the firmware compensates) and replays a recorded run on it
    profile = _export(lake, "links", tmp_path / "links.profile.json", "profile")
    res = _cli("sim", "replay", "plant/b", "--lake", str(lake), "--model", str(path), "--params", str(profile),
               "--out", str(tmp_path / "replay"), "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{"):])
    assert load_model(path).body("fr3_link7").mass[0] == pytest.approx(masses[6])
    rows = (tmp_path / "replay").glob("*.csv")
    assert any(rows) and summary, summary


def test_payload_fit_exports_a_model_with_the_payload_body(plant_lake, tmp_path):
    lake, plant = plant_lake
    rec = load_fit(lake, "tool")
    assert link_thetas(rec) is None
    path = _export(lake, "tool", tmp_path / "tool.fr3.xml")
    model = mujoco.MjModel.from_xml_path(str(path))
    assert model.body(PAYLOAD_BODY).mass[0] == pytest.approx(rec.params.payload_mass, rel=1e-8)
    assert rec.params.payload_mass == pytest.approx(plant.payload_mass_kg, rel=0.02)
    link7 = model.body("fr3_link7").id
    assert model.body(PAYLOAD_BODY).parentid[0] == link7
    text = path.read_text()
    assert "gravity on" in text and "mu_static" in text
    assert load_model(path).body(PAYLOAD_BODY).mass[0] == pytest.approx(rec.params.payload_mass)  # the twin's payload slot


def test_a_torque_links_fit_starts_a_replay_fit_at_its_weight(plant_lake):
    """`fit run --start-from` a +links torque fit: the link scales and payload whose weight matches
    the fit's at the replay's recorded configurations. The plant's links are the model's and it
    carries a 1.2 kg tool: scales ≈ 1, the payload's mass within 2 % and its CoM within 5 mm."""
    from twinlake.fit.records.start import recorded_configurations, start_vector
    from twinlake.sim.arm_model.params import LAYOUT

    lake, plant = plant_lake
    q = recorded_configurations(lake, ["plant/b"])
    assert q.shape == (96, 7)
    start = start_vector(load_fit(lake, "links"), q)
    scales = start[LAYOUT.slice("link_mass_scale")]
    assert np.abs(scales - 1.0).max() < 0.02 and scales[6] == 1.0
    assert start[LAYOUT.index("payload_mass")] == pytest.approx(plant.payload_mass_kg, rel=0.02)
    com = [start[LAYOUT.index(f"payload_com_{a}")] for a in "xyz"]
    assert np.abs(np.subtract(com, plant.payload_com_m)).max() < 0.005
    with pytest.raises(ValueError, match="recorded configurations"):
        start_vector(load_fit(lake, "links"))
    tool = load_fit(lake, "tool")
    assert np.array_equal(start_vector(tool), tool.vector)  # no links identified: its own vector


def test_a_replay_links_fit_exports_scaled_link_bodies(plant_lake):
    """A fit with link_mass_scale ≠ 1 (+links in the replay) writes each link's mass and inertia
    scaled, centre of mass kept; the header names the scales and the load friction MJCF cannot hold."""
    import dataclasses

    from twinlake.fit.records.model_export import model_xml
    from twinlake.sim.arm_model.params import LAYOUT

    lake, _ = plant_lake
    tool = load_fit(lake, "tool")
    vector = tool.vector.copy()
    scales = np.array([1.0, 1.08, 0.94, 1.06, 0.92, 1.05, 0.96])
    vector[LAYOUT.slice("link_mass_scale")] = scales
    vector[LAYOUT.slice("coulomb_load_per_nm")] = 0.05
    rec = dataclasses.replace(tool, params=type(tool.params).from_vector(vector), extra={**tool.extra, "torque_json": ""})
    text = model_xml(rec)
    assert "link masses scaled 1 1.08 0.94" in text and "load-dependent Coulomb friction" in text
    exported = mujoco.MjModel.from_xml_string(text)
    bundled = mujoco.MjModel.from_xml_path(str(FR3_MODEL_PATH))
    for j in range(1, 8):
        a = mujoco.mj_name2id(exported, mujoco.mjtObj.mjOBJ_BODY, f"fr3_link{j}")
        b = mujoco.mj_name2id(bundled, mujoco.mjtObj.mjOBJ_BODY, f"fr3_link{j}")
        np.testing.assert_allclose(exported.body_mass[a], scales[j - 1] * bundled.body_mass[b], rtol=1e-8)
        np.testing.assert_allclose(exported.body_inertia[a], scales[j - 1] * bundled.body_inertia[b], rtol=1e-8)
        np.testing.assert_allclose(exported.body_ipos[a], bundled.body_ipos[b], atol=1e-12)


def test_the_start_scales_the_replay_models_own_links(tmp_path):
    """With `--model`, the link scales of `--start-from` are relative to that MJCF's links: an
    identified weight equal to the user's model (link 2 10 % heavier, link 4 10 % lighter than
    the bundled FR3) starts every scale at 1 and no payload; against the bundled model it does not."""
    from twinlake.fit.records.start import weight_match
    from twinlake.sim.arm_model.model import HOME_Q

    spec = mujoco.MjSpec.from_file(str(FR3_MODEL_PATH))
    spec.body("fr3_link2").mass *= 1.1
    spec.body("fr3_link4").mass *= 0.9
    path = tmp_path / "user.xml"
    path.write_text(spec.to_xml())
    identified = load_model(path)
    identified.opt.gravity[:] = (0.0, 0.0, -9.81)
    q = np.asarray(HOME_Q) + np.random.default_rng(0).uniform(-0.3, 0.3, (96, 7))
    scales, mass_kg, _ = weight_match(identified, q, model_path=str(path))
    np.testing.assert_allclose(scales, 1.0, atol=1e-9)
    assert abs(mass_kg) < 1e-9
    bundled, _, _ = weight_match(identified, q)
    assert np.abs(bundled - 1.0).max() > 0.02
