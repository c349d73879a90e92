"""The links as they are: the weight the firmware does not compensate (numpy, compiled and
MuJoCo's own gravity agree), the load-dependent Coulomb friction, and every engine replaying
them the same way (bit for bit)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from sim_recording import record_synthetic

from twinlake.sim import DEMO_PROFILE_PATH, DynamicsParams, PopulationEngine, ReplayInput, SimFR3, load_model, load_params
from twinlake.sim import replay_reference
from twinlake.sim.kernels.link_dynamics import add_link_torque
from twinlake.sim.arm_model.links import (firmware_gravity, firmware_row, link_chain, link_gravity_torque, link_rows,
                                load_friction_torque, set_link_bodies)
from twinlake.sim.arm_model.load import EndLoad
from twinlake.sim.arm_model.model import arm_index
from twinlake.sim.arm_model.params import LAYOUT

SCALES = (1.0, 1.08, 0.94, 1.06, 0.92, 1.05, 0.96)
CONFIGURED = EndLoad(0.4, (0.0, 0.01, 0.03))


def _matrix(scales, k) -> np.ndarray:
    v = DynamicsParams.nominal().to_vector()
    v[LAYOUT.slice("link_mass_scale")] = scales
    v[LAYOUT.slice("coulomb_load_per_nm")] = k
    return v[None]


def _gravity_bias(scales, q: np.ndarray, load: EndLoad = EndLoad()) -> tuple[np.ndarray, mujoco.MjData]:
    """MuJoCo's qfrc_bias at rest with gravity on: minus the weight's joint torque, of our model
    whose links carry `scales` and whose payload body carries `load`."""
    m = load_model()
    arm = arm_index(m)
    m.opt.gravity[:] = (0.0, 0.0, -9.81)
    set_link_bodies(m.body_mass[None], m.body_inertia[None], _matrix(scales, 0.0), link_chain(load_model(), arm))
    m.body_mass[arm.payload_body], m.body_ipos[arm.payload_body] = load.mass_kg, load.com_m
    d = mujoco.MjData(m)
    mujoco.mj_setConst(m, d)
    d.qpos[arm.qpos_adr] = q
    mujoco.mj_forward(m, d)
    return d.qfrc_bias[arm.dof_adr].copy(), d


def test_the_links_torque_is_the_weight_mujoco_gives_the_scaled_links_less_the_models(model):
    arm, chain = arm_index(model), link_chain(model, arm_index(model))
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(-1.5, 1.5, 7)
        scaled, d = _gravity_bias(SCALES, q)
        nominal, _ = _gravity_bias((1.0,) * 7, q)
        physics = -(scaled - nominal)  # the weight's torque the firmware (nominal) leaves over
        assert np.abs(physics).max() > 0.1  # a real torque, not a vacuous match
        rows = link_rows(_matrix(SCALES, 0.0), chain)
        readable = link_gravity_torque(rows, chain, d.xipos[chain.body_ids][None], d.xanchor[arm.jnt_ids][None],
                                       d.xaxis[arm.jnt_ids][None])[0]
        np.testing.assert_allclose(readable, physics, rtol=0, atol=1e-9)
        compiled = np.zeros((1, 7))
        add_link_torque(rows, chain.table, firmware_row(chain, EndLoad()), d.xipos[None], d.xanchor[None],
                        d.xaxis[None], d.site_xpos[None], d.site_xmat[None], arm.ee_site, arm.jnt_ids.astype(np.int64),
                        np.zeros((5, 1, 7)), 0, np.zeros((1, 7), dtype=np.int64), np.zeros((1, 7)), compiled)
        np.testing.assert_allclose(compiled[0], readable, rtol=0, atol=1e-12)


def test_the_firmware_compensates_the_models_links_and_the_configured_load(model):
    arm, chain = arm_index(model), link_chain(model, arm_index(model))
    q = np.random.default_rng(4).uniform(-1.5, 1.5, 7)
    bias, d = _gravity_bias((1.0,) * 7, q, CONFIGURED)
    hold = firmware_gravity(firmware_row(chain, CONFIGURED), chain, d.xipos[chain.body_ids][None],
                            d.site_xpos[arm.ee_site][None], d.site_xmat[arm.ee_site][None],
                            d.xanchor[arm.jnt_ids][None], d.xaxis[arm.jnt_ids][None])[0]
    np.testing.assert_allclose(hold, bias, rtol=0, atol=1e-9)  # the torque that holds the arm still


def test_load_dependent_friction_grows_with_the_transmitted_torque(model):
    """Compiled against numpy: −k·|τ_cmd(k − d) + firmware gravity|·tanh(q̇/v_t), per joint delay."""
    arm, chain = arm_index(model), link_chain(model, arm_index(model))
    rng = np.random.default_rng(8)
    q, dq = rng.uniform(-1.5, 1.5, 7), rng.uniform(-0.2, 0.2, (2, 7))
    _, d = _gravity_bias((1.0,) * 7, q)
    k = np.array([0.05, 0.0, 0.1, 0.02, 0.0, 0.08, 0.03])
    rows = np.concatenate([link_rows(_matrix(SCALES, k), chain), link_rows(_matrix((1.0,) * 7, 2 * k), chain)])
    ring = rng.normal(0.0, 5.0, (5, 2, 7))
    delays = rng.integers(0, 5, (2, 7))
    firmware = firmware_row(chain, CONFIGURED)
    kin = [np.repeat(a[None], 2, axis=0) for a in (d.xipos, d.xanchor, d.xaxis, d.site_xpos, d.site_xmat)]
    compiled = np.zeros((2, 7))
    add_link_torque(rows, chain.table, firmware, *kin[:3], kin[3], kin[4], arm.ee_site, arm.jnt_ids.astype(np.int64),
                    ring, 7, delays, dq, compiled)
    idx = [arm.jnt_ids] * 2
    hold = firmware_gravity(firmware, chain, kin[0][:, chain.body_ids], kin[3][:, arm.ee_site], kin[4][:, arm.ee_site],
                            kin[1][:, idx[0]], kin[2][:, idx[0]])
    delayed = ring[(7 - delays) % 5, np.arange(2)[:, None], np.arange(7)[None, :]]
    readable = load_friction_torque(rows[:, -7:], delayed + hold, dq) + link_gravity_torque(
        rows, chain, kin[0][:, chain.body_ids], kin[1][:, idx[0]], kin[2][:, idx[0]])
    assert np.abs(load_friction_torque(rows[:, -7:], delayed + hold, dq)).max() > 0.05
    np.testing.assert_allclose(compiled, readable, rtol=0, atol=1e-12)
    untouched = np.full((1, 7), 0.25)  # the model's links, no load friction: nothing added, bit for bit
    add_link_torque(link_rows(_matrix((1.0,) * 7, 0.0), chain), chain.table, firmware, *[a[:1] for a in kin[:3]],
                    kin[3][:1], kin[4][:1], arm.ee_site, arm.jnt_ids.astype(np.int64), ring[:, :1], 7, delays[:1],
                    dq[:1], untouched)
    assert np.array_equal(untouched, np.full((1, 7), 0.25))


def test_engines_agree_bit_for_bit_with_scaled_links_and_load_friction():
    truth = load_params(DEMO_PROFILE_PATH)
    frames = record_synthetic(truth, 900, configured_load=CONFIGURED)
    inp = ReplayInput.from_frames(frames, configured_load=CONFIGURED)
    base = truth.to_vector()
    matrix = np.repeat(base[None], 3, axis=0)
    matrix[0, LAYOUT.slice("link_mass_scale")] = SCALES
    matrix[1, LAYOUT.slice("coulomb_load_per_nm")] = 0.05
    matrix[2, LAYOUT.slice("link_mass_scale")] = SCALES[::-1]
    matrix[2, LAYOUT.slice("coulomb_load_per_nm")] = 0.1
    reference = np.stack([replay_reference(inp, DynamicsParams.from_vector(row)).q for row in matrix])
    plain = replay_reference(inp, truth).q
    assert min(np.abs(r - plain).max() for r in reference) > 1e-5  # each changes the replay
    for compiled in (True, False):
        with PopulationEngine([inp], nthread=2, compiled_loop=compiled) as engine:
            q = engine.run(np.vstack([matrix, base[None]]))[0].q
        assert np.array_equal(q[:3], reference), compiled
        assert np.array_equal(q[3], plain), compiled  # the model's links: bit for bit as before


def test_the_coriolis_of_scaled_links_is_what_the_twin_leaves_out(model):
    """The firmware feeds forward the model's C(q, q̇)·q̇; the twin's is the scaled links'. At
    fr3_stack's preflight speed (0.1 rad/s) the difference is below 1e-3 N·m (links.py says so)."""
    arm = arm_index(model)
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(20):
        q, dq = rng.uniform(-1.5, 1.5, 7), rng.choice([-0.1, 0.1], 7)
        biases = []
        for scales in (SCALES, (1.0,) * 7):
            m = load_model()
            set_link_bodies(m.body_mass[None], m.body_inertia[None], _matrix(scales, 0.0), link_chain(load_model(), arm))
            d = mujoco.MjData(m)
            mujoco.mj_setConst(m, d)
            d.qpos[arm.qpos_adr], d.qvel[arm.dof_adr] = q, dq
            mujoco.mj_forward(m, d)
            biases.append(d.qfrc_bias[arm.dof_adr].copy())
        worst = max(worst, float(np.abs(biases[0] - biases[1]).max()))
    assert 0.0 < worst < 1e-3  # 7e-4 N·m measured (2026-12-04), the torque sensor noise is ~0.05


def test_the_one_arm_simulation_refuses_links_it_cannot_carry():
    params = DynamicsParams.from_vector(_matrix(SCALES, 0.0)[0])
    with pytest.raises(ValueError, match="link_mass_scale must be 1"):
        SimFR3(params)
