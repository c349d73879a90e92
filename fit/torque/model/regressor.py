"""The rigid-body joint-torque regressor of the project's FR3 model, with gravity on.

τ_rigid(q, q̇, q̈) = Y(q, q̇, q̈) · θ, where θ (10 per body) are each link's inertial parameters
in Pinocchio's order [m, m·cx, m·cy, m·cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] (centre of mass
times mass and the inertia about the body frame's origin, in the body frame) and Y is
Pinocchio's `computeJointTorqueRegressor` (package `pin`). The kinematics and inertials come
from the same MJCF the twin loads (`sim/models/fr3.xml` by default) through Pinocchio's MJCF
parser, with the parser's joint armature set to 0 (rotor inertia is not a rigid-body term;
the commanded route adds it as its own parameter). Gravity is −9.81 m/s² along base z
although the twin's MJCF has gravity 0: the firmware compensates gravity on the real arm, the
torque sensors do not. tests/fit/test_torque_regressor.py checks Y·θ against MuJoCo's
`mj_inverse` on the same model with gravity on.

A payload rigidly fixed at the flange moves with link 7, so its columns are link 7's; its
parameters in the flange frame (`ee` site: position and orientation on link 7) map linearly
to link-7-frame parameters (`payload_theta`, `payload_from_theta`).

Shapes: Y (T, 7, 10·7); θ (70,) for the seven links J1..J7.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ModelError

GRAVITY_M_S2 = 9.81

BODY_PARAMS = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")
LINKS = 7


@dataclass
class RigidBodyModel:
    """Pinocchio's model of the arm (gravity on, no armature), the links' nominal θ (70,),
    and the flange frame on link 7: rotation (3, 3) and position (3,) [m]."""

    model: object
    data: object
    theta_nominal: np.ndarray
    flange_rotation: np.ndarray
    flange_position_m: np.ndarray

    @classmethod
    def load(cls, mjcf: str | Path | None = None) -> "RigidBodyModel":
        """From an MJCF (the bundled FR3 when None); ValueError naming the file when Pinocchio
        cannot read it or it is not a 7-joint chain."""
        import mujoco
        import pinocchio as pin

        from ....sim.arm_model.model import FR3_MODEL_PATH, arm_index, load_model

        path = Path(mjcf) if mjcf is not None else FR3_MODEL_PATH
        try:
            model = pin.buildModelFromMJCF(str(path))
        except Exception as exc:  # pinocchio raises its own exception types
            raise ModelError(f"{path}: Pinocchio cannot read this MJCF ({exc})") from None
        if model.nv != LINKS:
            raise ModelError(f"{path}: Pinocchio sees {model.nv} joints, expected {LINKS} (the arm only)")
        model.armature[:] = 0.0
        model.gravity.linear[:] = [0.0, 0.0, -GRAVITY_M_S2]
        theta = np.concatenate([model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)])
        mj = load_model(path)
        arm = arm_index(mj)
        link7 = mj.jnt_bodyid[arm.jnt_ids[-1]]
        if mj.site_bodyid[arm.ee_site] != link7:
            raise ModelError(f"{path}: the flange site 'ee' is not on joint 7's body")
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, mj.site_quat[arm.ee_site])
        return cls(model, model.createData(), theta, rot.reshape(3, 3), mj.site_pos[arm.ee_site].copy())

    def regressor(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, gravity: bool = True) -> np.ndarray:
        """Y (T, 7, 70) at the samples q, dq, ddq (T, 7); without `gravity` the velocity and
        acceleration terms only."""
        import pinocchio as pin

        g = self.model.gravity.linear.copy()
        if not gravity:
            self.model.gravity.linear[:] = 0.0
        try:
            out = np.empty((len(q), LINKS, 10 * LINKS))
            for t in range(len(q)):
                out[t] = pin.computeJointTorqueRegressor(self.model, self.data, q[t], dq[t], ddq[t])
        finally:
            self.model.gravity.linear[:] = g
        return out

    def inertia_diagonal(self, q: np.ndarray) -> np.ndarray:
        """(T, 7) [kg·m²] the diagonal of the nominal links' joint-space inertia M(q) (no armature)
        at the configurations q (T, 7)."""
        import pinocchio as pin

        return np.array([np.diag(pin.crba(self.model, self.data, qt)) for qt in q]).reshape(len(q), LINKS)

    def gravity_torque(self, q: np.ndarray, flange_theta: np.ndarray | None = None) -> np.ndarray:
        """(T, 7) [N·m] the nominal links' gravity torque, plus that of a link-7-frame θ (10,)
        on link 7 (a configured load) when given."""
        import pinocchio as pin

        model = self.model
        if flange_theta is not None and np.any(flange_theta != 0):
            model = pin.Model(self.model)
            theta = self.theta_nominal[60:70] + np.asarray(flange_theta, dtype=np.float64)
            model.inertias[LINKS] = pin.Inertia.FromDynamicParameters(theta)
        data = model.createData()
        return np.array([pin.computeGeneralizedGravity(model, data, qt) for qt in q])

    def payload_theta(self, mass_kg: float, com_m, inertia_kgm2) -> np.ndarray:
        """Link-7-frame θ (10,) of a flange payload: mass [kg], CoM (3,) [m] in the flange
        frame, inertia about the CoM in the flange frame, (3,) diagonal or (3, 3) [kg·m²]."""
        inertia = np.asarray(inertia_kgm2, dtype=np.float64)
        inertia = np.diag(inertia) if inertia.shape == (3,) else inertia
        r, p = self.flange_rotation, self.flange_position_m
        c = p + r @ np.asarray(com_m, dtype=np.float64)
        i_c = r @ inertia @ r.T
        i_o = i_c + mass_kg * (c @ c * np.eye(3) - np.outer(c, c))
        return np.array([mass_kg, *(mass_kg * c), i_o[0, 0], i_o[0, 1], i_o[1, 1], i_o[0, 2], i_o[1, 2], i_o[2, 2]])

    def payload_from_theta(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(mass [kg], CoM (3,) [m] flange frame, inertia about the CoM (3, 3) flange frame)
        of a link-7-frame θ (10,); the CoM is NaN without mass."""
        m = float(theta[0])
        c = theta[1:4] / m if m > 0 else np.full(3, np.nan)
        i_o = inertia_matrix(theta)
        i_c = i_o - m * (c @ c * np.eye(3) - np.outer(c, c)) if m > 0 else i_o
        r, p = self.flange_rotation, self.flange_position_m
        return m, r.T @ (c - p), r.T @ i_c @ r


def inertia_matrix(theta: np.ndarray) -> np.ndarray:
    """The (3, 3) inertia about the body origin of a θ (10,) in Pinocchio's order."""
    ixx, ixy, iyy, ixz, iyz, izz = theta[4:10]
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def body_parameter_names(body: str) -> list[str]:
    """`<body>_m`, `<body>_mcx`, ... in Pinocchio's order."""
    return [f"{body}_{p}" for p in BODY_PARAMS]


__all__ = ["BODY_PARAMS", "GRAVITY_M_S2", "LINKS", "RigidBodyModel", "body_parameter_names", "inertia_matrix"]
