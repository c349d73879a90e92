"""The FR3 MuJoCo model: our mesh-free MJCF, or a user's MJCF with its arm joints mapped.

Every model handed to the engines is normalised the same way: 1 ms step, zero gravity (the
firmware compensates gravity), the 7 arm joints named `fr3_joint1..7`, a site `ee` at the
flange (`0 0 0.107` on the body of joint 7) unless the file already has a site named `ee`,
at least replay_context.USERDATA_SLOTS userdata entries (for the population engine's
compiled loop), and a body `payload` fixed at the `ee` site's frame with no mass: the true
payload (DynamicsParams' payload groups, load.py) is written into its mass, centre of mass
and inertia per candidate; massless, it leaves the dynamics bit for bit as without it. The FR3's numbers (joint limits, home pose, flange offset) live in fr3.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import mujoco
import numpy as np

from ..fr3 import FLANGE_OFFSET_M, HOME_Q, JOINT_COUNT, Q_MAX, Q_MIN, TIMESTEP_S
from ..kernels.replay_context import USERDATA_SLOTS

PAYLOAD_BODY = "payload"
FR3_MODEL_PATH = Path(__file__).resolve().parents[1] / "models" / "fr3.xml"


@dataclass(frozen=True)
class ArmIndex:
    """Where the arm lives in a model: qpos/dof addresses (7,) of J1..J7 and the `ee` site id."""

    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    jnt_ids: np.ndarray
    ee_site: int
    payload_body: int  # the massless body at the flange that carries the true payload (−1: none)


def _match_joints(spec: mujoco.MjSpec, path: Path, joint_map: Mapping[int, str] | None) -> list:
    joints = list(spec.joints)
    by_name = {j.name: j for j in joints}
    found = []
    for i in range(1, JOINT_COUNT + 1):
        if joint_map is not None:
            name = joint_map.get(i, joint_map.get(str(i)) if isinstance(joint_map, dict) else None)
            if name not in by_name:
                raise ValueError(f"{path}: joint map J{i} -> {name!r}: no such joint in the model")
            found.append(by_name[name])
            continue
        hits = [j for j in joints if re.search(rf"joint_?{i}$", j.name or "")]
        if len(hits) != 1:
            names = [j.name for j in hits]
            raise ValueError(
                f"{path}: expected exactly one joint named '*joint{i}', found {names or 'none'};"
                " pass an explicit joint map"
            )
        found.append(hits[0])
    for i, joint in enumerate(found, start=1):
        if joint.type != mujoco.mjtJoint.mjJNT_HINGE:
            raise ValueError(f"{path}: joint {joint.name!r} (J{i}) must be a hinge")
    return found


def load_model(path: str | Path | None = None, joint_map: Mapping[int, str] | None = None) -> mujoco.MjModel:
    """Load and normalise an FR3 model (ours when `path` is None).

    `joint_map` maps 1..7 to joint names of a user MJCF; without it joints are matched by
    names ending in `joint1`..`joint7`. Raises ValueError naming the file on a mismatch.
    """
    path = Path(path) if path is not None else FR3_MODEL_PATH
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except (ValueError, FileNotFoundError) as exc:
        raise ValueError(f"{path}: cannot load MJCF ({str(exc).splitlines()[0]})") from None
    joints = _match_joints(spec, path, joint_map)
    other_names = {j.name for j in spec.joints} - {j.name for j in joints}
    for i, joint in enumerate(joints, start=1):
        canonical = f"fr3_joint{i}"
        if joint.name != canonical and canonical in other_names:
            raise ValueError(f"{path}: joint name {canonical!r} is taken by a non-arm joint")
        joint.name = canonical
    spec.option.timestep = TIMESTEP_S
    spec.option.gravity = [0.0, 0.0, 0.0]
    if spec.option.integrator == mujoco.mjtIntegrator.mjINT_RK4:
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    # userdata slots for the population engine's compiled control callback (replay_context.py);
    # userdata is never read by the physics
    spec.nuserdata = max(spec.nuserdata, USERDATA_SLOTS)
    if "ee" not in {s.name for s in spec.sites}:
        flange_body = joints[-1].parent
        flange_body.add_site(name="ee", pos=list(FLANGE_OFFSET_M))
    if PAYLOAD_BODY not in {b.name for b in spec.bodies}:
        ee = spec.site("ee")
        ee.parent.add_body(name=PAYLOAD_BODY, pos=list(ee.pos), quat=list(ee.quat), explicitinertial=True,
                           mass=0.0, ipos=[0.0, 0.0, 0.0], inertia=[0.0, 0.0, 0.0])
    try:
        return spec.compile()
    except ValueError as exc:
        raise ValueError(f"{path}: cannot compile MJCF ({' '.join(str(exc).split())})") from None


def arm_index(model: mujoco.MjModel) -> ArmIndex:
    """Addresses of `fr3_joint1..7` and site `ee` in a model returned by load_model."""
    jnt = np.array([model.joint(f"fr3_joint{i}").id for i in range(1, JOINT_COUNT + 1)])
    return ArmIndex(
        qpos_adr=model.jnt_qposadr[jnt].copy(),
        dof_adr=model.jnt_dofadr[jnt].copy(),
        jnt_ids=jnt,
        ee_site=int(model.site("ee").id),
        payload_body=_body_id(model, PAYLOAD_BODY),
    )


def _body_id(model: mujoco.MjModel, name: str) -> int:
    """A body's id, −1 when the model has none of that name (a model not from load_model)."""
    try:
        return int(model.body(name).id)
    except KeyError:
        return -1


__all__ = ["ArmIndex", "FR3_MODEL_PATH", "PAYLOAD_BODY", "HOME_Q", "JOINT_COUNT", "Q_MAX", "Q_MIN", "TIMESTEP_S", "arm_index", "load_model"]
