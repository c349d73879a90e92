"""The parameter registry `LAYOUT` (sim/arm_model/params.py, sim/arm_model/layout.py): its vector layout, round trips
between named values, vectors, (P, n) matrices and JSON blocks, and a layout with one more
group (what the next parameters will need)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from twinlake.sim import LAYOUT, DynamicsParams, ParameterGroup, ParameterLayout, load_params, save_profile


def _distinct(delay: int = 3) -> DynamicsParams:
    return DynamicsParams(
        armature=np.linspace(0.1, 0.4, 7), mu_static=np.linspace(0.5, 1.7, 7),
        dynamic_ratio=np.linspace(0.3, 0.9, 7), mu_viscous=np.linspace(0.2, 3.0, 7), motor_delay_ms=delay,
    )


def test_layout_is_frankatwins_29_in_its_order():
    assert [(g.name, g.size, g.unit) for g in LAYOUT.groups] == [
        ("armature", 7, "kg·m²"), ("mu_static", 7, "N·m"), ("dynamic_ratio", 7, "-"),
        ("mu_viscous", 7, "N·m·s/rad"), ("motor_delay_ms", 1, "ms"), ("payload_mass", 1, "kg"),
        ("payload_com_x", 1, "m"), ("payload_com_y", 1, "m"), ("payload_com_z", 1, "m"),
        ("payload_ixx", 1, "kg·m²"), ("payload_iyy", 1, "kg·m²"), ("payload_izz", 1, "kg·m²"),
        ("coulomb_asymmetry", 7, "N·m"), ("tau_bias", 7, "N·m"), ("sigmoid_phi2", 7, "s/rad"),
        ("sigmoid_phi3", 7, "rad/s"), ("motor_delay_offset_ms", 7, "ms"), ("link_mass_scale", 7, "-"),
        ("coulomb_load_per_nm", 7, "-")]
    assert LAYOUT.size == 85 and len(LAYOUT.names) == 85 and LAYOUT.bounds.shape == (85, 2)
    # FrankaTwin's 29 keep their places; the groups beyond are frozen at nominal by default
    assert LAYOUT.frankatwin_indices == tuple(range(29))
    assert LAYOUT.default_frozen == {i: 50.0 if 50 <= i < 57 else 1.0 if 71 <= i < 78 else 0.0 for i in range(29, 85)}
    assert [LAYOUT.slice(g) for g in ("armature", "mu_static", "dynamic_ratio", "mu_viscous")] == [
        slice(0, 7), slice(7, 14), slice(14, 21), slice(21, 28)]
    assert LAYOUT.index("motor_delay_ms") == LAYOUT.index("delay") == 28
    assert LAYOUT.integer_indices == (28, *range(64, 71))  # the delay and its per-joint offsets
    assert LAYOUT.bounds[LAYOUT.slice("armature")].tolist() == [[0.0, 0.5]] * 7
    assert LAYOUT.bounds[28].tolist() == [0.0, 4.0]
    assert not LAYOUT.bounds.flags.writeable and not LAYOUT.nominal.flags.writeable


def test_groups_tile_the_vector_and_dynamics_params_has_one_field_per_group():
    covered = [i for g in LAYOUT.groups for i in range(LAYOUT.slice(g.name).start, LAYOUT.slice(g.name).stop)]
    assert covered == list(range(LAYOUT.size))
    assert [LAYOUT.names[i] for i in covered] == [n for g in LAYOUT.groups for n in g.names]
    assert [f.name for f in dataclasses.fields(DynamicsParams)] == [g.name for g in LAYOUT.groups]
    for name in LAYOUT.names:
        assert name in LAYOUT.group_of(name).names
        assert LAYOUT.units[LAYOUT.index(name)] == LAYOUT.group_of(name).unit
        group, joint = LAYOUT.group_of(name), LAYOUT.joint_of(name)
        assert (joint is None) == (not group.per_joint)
        assert joint is None or group.names[joint - 1] == name
    assert LAYOUT.joint_of("mu_static_j3") == 3 and LAYOUT.joint_of("motor_delay_ms") is None
    with pytest.raises(ValueError, match="unknown parameter"):
        LAYOUT.joint_of("mu_static_j8")


def test_vector_matrix_and_named_round_trips():
    a, b = _distinct(3), _distinct(1)
    b.mu_viscous = b.mu_viscous[::-1].copy()
    v = a.to_vector()
    assert np.array_equal(v, LAYOUT.vector(a))
    assert np.array_equal(v, LAYOUT.vector({g.name: getattr(a, g.name) for g in LAYOUT.groups}))
    for g in LAYOUT.groups:
        assert np.array_equal(np.atleast_1d(LAYOUT.take(v, g.name)), np.atleast_1d(getattr(a, g.name)))
    back = DynamicsParams(**LAYOUT.split(v))
    assert np.array_equal(back.to_vector(), v)
    matrix = np.stack([a.to_vector(), b.to_vector()])
    parts = LAYOUT.split(matrix)
    assert parts["mu_static"].shape == (2, 7) and parts["motor_delay_ms"].shape == (2,)
    assert parts["motor_delay_ms"].tolist() == [3.0, 1.0]
    assert np.array_equal(parts["mu_viscous"][1], b.mu_viscous)
    assert np.shares_memory(parts["armature"], matrix)  # views, not copies
    with pytest.raises(ValueError, match="expected 85 values in the last axis"):
        LAYOUT.split(np.zeros((2, 28)))


def test_nominal_is_the_registry_nominal_and_inside_the_bounds():
    nominal = DynamicsParams.nominal()
    assert np.array_equal(nominal.to_vector(), LAYOUT.nominal)
    assert nominal.armature.tolist() == [0.195] * 4 + [0.074] * 3
    assert np.all((LAYOUT.nominal >= LAYOUT.bounds[:, 0]) & (LAYOUT.nominal <= LAYOUT.bounds[:, 1]))
    nominal.armature[0] = 0.3  # a writable copy, never the registry's array
    assert LAYOUT.nominal[0] == 0.195


def test_frankatwin_and_profile_blocks_round_trip(tmp_path):
    p = _distinct(2)
    block = LAYOUT.frankatwin_block(p)
    assert list(block) == ["armature", "mu_static", "dynamic_ratio", "mu_dynamic", "mu_viscous", "motor_delay_steps"]
    assert block["motor_delay_steps"] == 2 and block["mu_dynamic"] == p.mu_dynamic.tolist()
    assert np.array_equal(DynamicsParams(**LAYOUT.from_block(block, frankatwin=True)).to_vector(), p.to_vector())
    named = LAYOUT.named(p)
    assert list(named) == [g.name for g in LAYOUT.groups] and named["motor_delay_ms"] == 2
    assert np.array_equal(DynamicsParams(**LAYOUT.from_block(named, frankatwin=False)).to_vector(), p.to_vector())
    assert LAYOUT.frankatwin_indices == tuple(range(29))
    doc = json.loads(save_profile(p, tmp_path / "p.json").read_text())
    assert doc["params"] == named and doc["best_params_decoded"] == block
    assert list(doc["vector"]) == list(LAYOUT.names)


def test_dynamic_ratio_is_derived_from_mu_dynamic_when_only_that_is_given(tmp_path):
    block = LAYOUT.frankatwin_block(_distinct())
    del block["dynamic_ratio"]
    block["mu_static"][6] = 0.0  # no breakaway level: ratio 1, as FrankaTwin's import rule
    ratio = LAYOUT.block_value(block, "dynamic_ratio", frankatwin=True)
    np.testing.assert_allclose(ratio[:6], np.linspace(0.3, 0.9, 7)[:6], rtol=1e-15)
    assert ratio[6] == 1.0
    block["mu_dynamic"] = [0.5, 0.5]
    with pytest.raises(ValueError, match="mu_dynamic: expected 7 numbers"):
        LAYOUT.block_value(block, "dynamic_ratio", frankatwin=True)
    path = tmp_path / "sysid_best_params.json"
    path.write_text(json.dumps({"best_params_decoded": block}))
    with pytest.raises(ValueError, match=r"sysid_best_params.json: mu_dynamic: expected 7 numbers"):
        load_params(path)
    block["mu_dynamic"] = None
    with pytest.raises(ValueError, match="missing field.s. dynamic_ratio"):
        LAYOUT.from_block(block, frankatwin=True)


def test_selectors_name_groups_joints_and_parameters():
    assert LAYOUT.select("mu_static") == list(range(7, 14))
    assert LAYOUT.select("j2") == [1, 8, 15, 22]
    assert LAYOUT.select("mu_viscous_j3") == [23]
    assert LAYOUT.select("delay") == LAYOUT.select("motor_delay_steps") == [28]
    with pytest.raises(ValueError, match=r"expected a group \(armature, mu_static, dynamic_ratio, mu_viscous, "
                                         r"coulomb_asymmetry, tau_bias, sigmoid_phi2, sigmoid_phi3, motor_delay_offset_ms, link_mass_scale, "
                                         r"coulomb_load_per_nm\), a joint \(j1..j7\), a name such as "
                                         r"mu_static_j3, or one of motor_delay_ms, payload_mass, "):
        LAYOUT.select("armatur")
    with pytest.raises(ValueError, match="unknown parameter 'j8'"):
        LAYOUT.index("j8")


def test_the_delay_is_whole_ticks_clamped_to_its_bounds_and_must_be_finite():
    group = LAYOUT.group("delay")
    assert [group.coerce(v) for v in (2.4, 2.6, -1.0, 9.0)] == [2, 3, 0, 4]
    with pytest.raises(ValueError, match="motor_delay_ms: expected finite values"):
        DynamicsParams.from_vector(np.r_[_distinct().to_vector()[:28], np.nan])


def _with_payload() -> ParameterLayout:
    """LAYOUT plus one scalar group FrankaTwin does not have (as a payload mass will be)."""
    payload = ParameterGroup("payload_mass_kg", "kg", (0.0, 3.0), (0.0,), None, per_joint=False,
                             aliases=("payload",))
    frankatwin = [g for g in LAYOUT.groups if g.frankatwin_key]  # FrankaTwin's 29, delay last
    return ParameterLayout([*frankatwin[:-1], payload, frankatwin[-1]])


def test_a_new_group_is_one_entry_and_every_index_follows():
    layout = _with_payload()
    assert layout.size == 30 and layout.names[28] == "payload_mass_kg"
    assert layout.index("motor_delay_ms") == 29 and layout.integer_indices == (29,)
    assert layout.select("payload") == [28] and layout.select("j1") == [0, 7, 14, 21]
    assert layout.bounds[28].tolist() == [0.0, 3.0]
    assert layout.frankatwin_indices == tuple(range(28)) + (29,)
    values = {g.name: LAYOUT.vector(_distinct())[LAYOUT.slice(g.name)] for g in LAYOUT.groups}
    values["payload_mass_kg"] = 1.25
    v = layout.vector(values)
    assert v[28] == 1.25 and v[29] == 3.0 and layout.take(v[None], "payload_mass_kg").tolist() == [1.25]
    # a FrankaTwin block has no payload: reading it gives the nominal value, writing it leaves it out
    block = LAYOUT.frankatwin_block(_distinct())
    assert layout.from_block(block, frankatwin=True)["payload_mass_kg"] == 0.0
    with pytest.raises(ValueError, match="missing field.s. payload_mass_kg"):
        layout.from_block(LAYOUT.named(_distinct()), frankatwin=False)


def test_a_layout_rejects_duplicate_names_and_wrong_nominals():
    with pytest.raises(ValueError, match="'armature' is used twice"):
        ParameterLayout([LAYOUT.groups[0], LAYOUT.groups[0]])
    with pytest.raises(ValueError, match="nominal has 2 values, expected 7"):
        ParameterGroup("x", "-", (0.0, 1.0), (0.0, 1.0), None)
    with pytest.raises(ValueError, match="unknown parameter group 'armatur'"):
        LAYOUT.group("armatur")
