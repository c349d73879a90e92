"""The torque route's building blocks against independent references: Pinocchio's regressor of
our MJCF against MuJoCo's inverse dynamics with gravity on, the payload's parameter map against
MuJoCo with a payload body, log-Cholesky round trips, and the Bartlett HAC sum against its
definition."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from twinlake.fit.torque.estimation.estimate import (from_log_cholesky, hac_long_run, is_physical, to_log_cholesky)
from twinlake.fit.torque.model.regressor import RigidBodyModel
from twinlake.sim.arm_model.model import FR3_MODEL_PATH, load_model


def _mujoco_inverse(model: mujoco.MjModel, q, dq, ddq) -> np.ndarray:
    data = mujoco.MjData(model)
    out = []
    for a, b, c in zip(q, dq, ddq):
        data.qpos[:7], data.qvel[:7], data.qacc[:7] = a, b, c
        mujoco.mj_inverse(model, data)
        out.append(data.qfrc_inverse[:7].copy())
    return np.array(out)


def _rigid_mujoco(payload=None) -> mujoco.MjModel:
    """Our model (load_model: `ee` site and `payload` body) with gravity on and no joint
    armature, damping, friction or constraints: the rigid body alone."""
    model = load_model()
    model.opt.gravity[:] = (0.0, 0.0, -9.81)
    model.dof_armature[:] = 0.0
    model.dof_damping[:] = 0.0
    model.dof_frictionloss[:] = 0.0
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    if payload is not None:
        body = model.body("payload").id
        model.body_mass[body], model.body_ipos[body], model.body_inertia[body] = payload
        mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


@pytest.fixture(scope="module")
def rigid() -> RigidBodyModel:
    return RigidBodyModel.load(FR3_MODEL_PATH)


def _states(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.5, 1.5, (n, 7)), rng.normal(0, 1.0, (n, 7)), rng.normal(0, 3.0, (n, 7))


def test_regressor_times_theta_is_mujoco_inverse_dynamics_with_gravity(rigid):
    q, dq, ddq = _states(20, 0)
    y = rigid.regressor(q, dq, ddq)
    assert y.shape == (20, 7, 70)
    reference = _mujoco_inverse(_rigid_mujoco(), q, dq, ddq)
    assert np.abs(y @ rigid.theta_nominal - reference).max() < 1e-9
    assert np.abs(reference).max() > 10  # gravity is on: tens of N·m
    gravity = rigid.gravity_torque(q)
    static = _mujoco_inverse(_rigid_mujoco(), q, np.zeros_like(q), np.zeros_like(q))
    assert np.abs(gravity - static).max() < 1e-9


def test_payload_columns_are_link7s_and_its_theta_maps_both_ways(rigid):
    mass, com, inertia = 1.3, np.array([0.02, -0.03, 0.05]), np.array([0.004, 0.006, 0.003])
    q, dq, ddq = _states(10, 1)
    y = rigid.regressor(q, dq, ddq)
    theta = rigid.payload_theta(mass, com, inertia)
    with_payload = _mujoco_inverse(_rigid_mujoco((mass, com, inertia)), q, dq, ddq)
    assert np.abs(y @ rigid.theta_nominal + y[:, :, 60:70] @ theta - with_payload).max() < 1e-9
    m, c, i = rigid.payload_from_theta(theta)
    assert m == pytest.approx(mass) and np.allclose(c, com) and np.allclose(i, np.diag(inertia))
    configured = rigid.gravity_torque(q, theta) - rigid.gravity_torque(q)
    assert np.abs(configured - rigid.regressor(q, 0 * q, 0 * q)[:, :, 60:70] @ theta).max() < 1e-9


def test_log_cholesky_round_trip_and_clipping(rigid):
    theta = rigid.theta_nominal[30:40]
    assert is_physical(theta)
    assert np.allclose(from_log_cholesky(to_log_cholesky(theta)), theta, rtol=1e-9, atol=1e-12)
    broken = theta.copy()
    broken[4] = -0.1  # Ixx < 0
    assert not is_physical(broken)
    assert is_physical(from_log_cholesky(to_log_cholesky(broken)))
    rng = np.random.default_rng(3)
    for _ in range(5):  # every coordinate vector is a physical body
        assert is_physical(from_log_cholesky(rng.normal(0, 1, 10)))


def test_bartlett_block_sum_is_the_kernel_weighted_autocovariance_sum():
    rng = np.random.default_rng(4)
    e = rng.normal(size=(2001, 2))
    g = np.vstack([e[:1], e[1:] + 0.8 * e[:-1]])  # MA(1)-correlated scores
    lag = 7
    t = len(g)
    direct = sum((1 - abs(k) / lag) * (g[max(k, 0):t + min(k, 0)].T @ g[max(-k, 0):t - max(k, 0)])
                 for k in range(-lag + 1, lag))
    block = hac_long_run([g], lag)
    assert np.abs(block - direct).max() < 0.01 * np.abs(direct).max()  # equal up to the segment edges
    white = g.T @ g
    assert block[0, 0] > 1.7 * white[0, 0]  # (1 + 0.8)² / (1 + 0.8²) ≈ 1.98 for MA(1); the sum sees it


def test_base_parameters_name_the_unidentifiable_combinations_and_hold_them_at_nominal():
    from twinlake.fit.torque.estimation.base_params import analyse

    rng = np.random.default_rng(0)
    a = rng.normal(size=(300, 3))
    cols = np.column_stack([a, a[:, 0] + a[:, 1], np.zeros(300)])  # ab = a + b; z never excited
    names = ["a", "b", "c", "ab", "z"]
    res = analyse(cols.T @ cols, names)
    assert res.rank == 3
    combos = [d["components"] for d in res.unidentifiable]
    assert {"z": 1.0} in combos
    pair = next(c for c in combos if "ab" in c)
    assert set(pair) == {"a", "b", "ab"} and pair["a"] == pytest.approx(pair["b"]) == pytest.approx(-pair["ab"])
    truth = np.array([1.0, 2.0, 3.0, 0.0, 0.0])
    y = cols @ truth
    nominal = np.array([0.0, 0.0, 0.0, 0.5, 7.0])  # the prior's centre
    n_mat = cols.T @ cols + res.prior
    beta = np.linalg.solve(n_mat, cols.T @ y + res.prior @ nominal)
    assert np.allclose(cols @ beta, y, atol=1e-6)  # the data are still fitted exactly
    assert beta[4] == pytest.approx(7.0)  # the never-excited column is held at its nominal
    null = np.array([-1.0, -1.0, 0.0, 1.0, 0.0]) / np.sqrt(3)  # the unidentifiable direction
    assert null @ beta == pytest.approx(null @ nominal, abs=1e-6)  # held at nominal along it
