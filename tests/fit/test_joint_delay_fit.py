"""Per-joint motor delays in a fit: `+joint-delay` and `motor_delay_offset_ms_jN=LO:HI` in the
parameter space, the CMA-ES categorical offsets, the local-first search recovering every
joint's delay of a twinlake-own recording, and the exports saying what FrankaTwin's file cannot hold."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import synth
from twinlake.fit.replay.search import MixedSearch
from twinlake.fit.core.space import ParameterSpace, parse_space
from twinlake.sim import LAYOUT, PARAM_NAMES

OFFSETS = np.array([0, 0, 1, 0, -1, 0, 0])  # with the shared 2 ms: joints 3 and 5 at 3 and 1 ms
OFFSET_NAMES = LAYOUT.group("motor_delay_offset_ms").names
FREE = ("armature_j1", "mu_viscous_j3")


def test_the_default_space_holds_every_joint_at_the_shared_delay():
    space = parse_space([])
    assert space.free_offset_joints == [] and space.base_offsets.tolist() == [0] * 7
    assert not set(OFFSET_NAMES) & set(space.free_names)
    full = space.decode(np.full((2, len(space.free_indices)), 0.5), np.array([1, 3]))
    assert np.all(LAYOUT.take(full, "motor_delay_offset_ms") == 0.0)


def test_the_preset_and_a_joint_spec_free_the_offsets():
    space = parse_space(["+joint-delay"])
    assert space.free_offset_joints == list(range(7))
    assert all(space.offset_choices(j).tolist() == [-2, -1, 0, 1, 2] for j in range(7))
    assert space.free_names[-7:] == list(OFFSET_NAMES) and len(space.free_indices) == 28
    one = parse_space(["motor_delay_offset_ms_j3=-1:1"])
    assert one.free_offset_joints == [2] and one.offset_choices(2).tolist() == [-1, 0, 1]
    shifted = parse_space(["motor_delay_offset_ms_j3=1:2"])  # 0 not allowed: the nearest whole ms
    assert shifted.base_offsets.tolist() == [0, 0, 1, 0, 0, 0, 0]
    frozen = parse_space(["+joint-delay", "motor_delay_offset_ms_j5=-1"])
    assert frozen.free_offset_joints == [0, 1, 2, 3, 5, 6] and frozen.base_offsets[4] == -1
    back = ParameterSpace.from_json(json.loads(json.dumps(one.to_json())))
    assert back.free_offset_joints == [2] and np.array_equal(back.bounds, one.bounds)
    fixed = space.with_offsets(OFFSETS)
    assert fixed.free_offset_joints == [] and fixed.base_offsets.tolist() == OFFSETS.tolist()
    assert fixed.free_indices.tolist() == space.free_indices.tolist()


@pytest.mark.parametrize("spec, words", [
    ("motor_delay_offset_ms_j3=-3:1", "motor_delay_offset_ms_j3: expected whole ms within -2..2, got -3:1"),
    ("motor_delay_offset_ms_j3=0.2:0.8", "motor_delay_offset_ms_j3: expected whole ms within -2..2, got 0.2:0.8"),
    ("motor_delay_offset_ms=1.5", "motor_delay_offset_ms_j1: expected a whole number of ms in -2..2, got 1.5"),
    ("motor_delay_offset_ms_j8=0", "unknown parameter selector 'motor_delay_offset_ms_j8'"),
    ("+joint-delays", "unknown preset '+joint-delays': expected one of +payload, +asymmetry, +bias, +joint-delay,"),
])
def test_bad_offset_specs_are_named(spec, words):
    with pytest.raises(ValueError) as err:
        parse_space([spec])
    assert words in str(err.value)


def test_cma_draws_each_free_offset_as_a_categorical_and_resumes_exactly():
    free = parse_space(["+joint-delay", "motor_delay_offset_ms_j7=0"])
    search = MixedSearch(free, population=10, seed=3)
    plain = MixedSearch(parse_space([]), population=10, seed=3)
    prop, base = search.ask(), plain.ask()
    # the continuous draw and the shared delays are those of a search without free offsets
    assert np.array_equal(prop.z, base.z) and np.array_equal(prop.delays, base.delays)
    assert prop.offsets.shape == (10, 7) and np.all(prop.offsets[:, 6] == 0)
    for j in range(6):  # stratified: every offset twice in 10
        assert sorted(np.bincount(prop.offsets[:, j] + 2, minlength=5).tolist()) == [2] * 5
    assert np.array_equal(LAYOUT.take(prop.params, "motor_delay_offset_ms"), prop.offsets)
    losses = np.abs(prop.offsets[:, 2] - 1) + 0.01 * np.arange(10)  # joint 3 best at +1
    search.tell(prop, losses)
    assert int(np.argmax(search.offset_probs[2])) == 3  # offset +1
    clone = MixedSearch.from_state(search.state())
    a, b = search.ask(), clone.ask()
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.params, b.params)


def _space_spec() -> list[str]:
    """Every continuous parameter but FREE frozen at the truth; the shared delay searched."""
    truth = synth.TRUTH.to_vector()
    frozen = [f"{n}={float(truth[i])!r}" for i, n in enumerate(PARAM_NAMES[:28]) if n not in FREE]
    return [",".join(frozen), "+joint-delay"]


@pytest.fixture(scope="module")
def joint_delay_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("jointdelaylake")
    truth = dataclasses.replace(synth.TRUTH, motor_delay_offset_ms=OFFSETS)
    assert truth.joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    for i, run in enumerate(("d1", "d2"), start=1):
        synth.publish_run(root, "demo", run, synth.record(truth, 1500, seed=10 + i))
    return root


@pytest.mark.slow  # ~26 s on 2 busy cores
def test_a_local_fit_recovers_every_joints_delay(joint_delay_lake, tmp_path):
    from twinlake.fit.reports.export import export_fit, export_notes
    from twinlake.fit.records.record import load_fit
    from twinlake.fit.run import FitSettings, run_fit
    from twinlake.sim import load_params

    space = parse_space(_space_spec())
    assert space.free_names == [*FREE, "motor_delay_ms", *OFFSET_NAMES]
    settings = FitSettings(train=["d1", "d2"], holdout=[], space=space.to_json(), seed=1, starts=2, cheap_s=1.0,
                           population=6, generations=2, refine_iterations=3)
    rec = run_fit(joint_delay_lake, settings, fit_id="joint-delay", workers=0, progress=False)
    assert rec.params.motor_delay_ms == 2
    assert rec.params.motor_delay_offset_ms.tolist() == OFFSETS.tolist()
    assert rec.params.joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    stored = load_fit(joint_delay_lake, "joint-delay")
    assert stored.params.joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    # the profile carries the offsets; FrankaTwin's file cannot, and the export says so
    assert load_params(export_fit(stored, "profile", tmp_path / "p.json")).joint_delay_ms.tolist() == [2, 2, 3, 2, 1, 2, 2]
    ft = json.loads(export_fit(stored, "frankatwin", tmp_path / "sysid_best_params.json").read_text())
    assert ft["best_params_decoded"]["motor_delay_steps"] == 2 and len(ft["best_params_raw"]) == 29
    assert "per-joint motor delays [2, 2, 3, 2, 1, 2, 2] ms" in ft["twinlake_not_exported"]
    notes = export_notes(stored, "frankatwin")
    assert len(notes) == 1 and "cannot hold per-joint motor delays" in notes[0]
    assert "J3 3 ms" in export_fit(stored, "mjcf", tmp_path / "j.xml").read_text()
    _the_posterior_keeps_the_offsets(stored)
    _the_commands_say_it(joint_delay_lake, tmp_path)


def _the_posterior_keeps_the_offsets(rec) -> None:
    from twinlake.campaign.sampling import posterior
    from twinlake.fit.reports.export import randomization_doc

    doc = randomization_doc(rec)
    entries = {p["name"]: p for p in doc["parameters"]}
    assert [entries[n]["distribution"] for n in OFFSET_NAMES] == ["fixed"] * 7
    assert doc["delay"]["name"] == "motor_delay_ms" and doc["delay"]["value"] == 2
    drawn = posterior(doc).draw(5, 0)
    assert LAYOUT.take(drawn, "motor_delay_offset_ms").tolist() == OFFSETS.tolist()


def _the_commands_say_it(lake, tmp_path) -> None:
    from typer.testing import CliRunner

    from twinlake.cli import app

    shown = CliRunner().invoke(app, ["fit", "show", "joint-delay", "--lake", str(lake)])
    assert shown.exit_code == 0, shown.output
    assert "motor delay: 2 ms (per joint J1..J7: 2, 2, 3, 2, 1, 2, 2 ms)" in shown.output
    as_json = json.loads(CliRunner().invoke(app, ["fit", "show", "joint-delay", "--json", "--lake", str(lake)]).output)
    assert [as_json["params"][n] for n in OFFSET_NAMES] == OFFSETS.tolist()
    out = tmp_path / "ft.json"
    res = CliRunner().invoke(app, ["fit", "export", "joint-delay", "--format", "frankatwin", "--out", str(out),
                                   "--lake", str(lake)])
    assert res.exit_code == 0 and out.is_file()
    assert "note: FrankaTwin's sysid_best_params.json cannot hold per-joint motor delays" in res.stderr


def test_a_fit_written_before_the_offsets_existed_loads_with_offsets_0(tmp_path):
    import pyarrow.parquet as pq

    from twinlake.fit.records.record import FitRecord, load_fit, publish_fit

    rec = FitRecord(fit_id="old", fit_source="twinlake", created_utc="2026-01-01T00:00:00Z", status="done",
                    best_loss=1.0, params=synth.TRUTH, seed=1, settings={}, history=[], runs=[])
    path = publish_fit(tmp_path, rec)
    table = pq.read_table(path / "fit.parquet")
    pq.write_table(table.drop(list(OFFSET_NAMES)), path / "fit.parquet")  # as an older twinlake wrote it
    old = load_fit(tmp_path, "old")
    assert old.params.motor_delay_offset_ms.tolist() == [0.0] * 7 and old.params.motor_delay_ms == 2
    assert np.array_equal(old.params.mu_static, synth.TRUTH.mu_static)
