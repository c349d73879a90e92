"""A whole MJCF model of the arm as a fit identified it (`fit export --format model`).

The bundled FR3 model (sim/models/fr3.xml) with, from the fit:

- each arm joint's `armature`, `damping` (= mu_viscous) and `frictionloss` (= mu_dynamic);
- each link's `<inertial>` when the fit identified the links (a torque fit with `+links`: the
  seven link-frame θ of its β, `link<i>_m`, `link<i>_mcx`, …, Pinocchio's order, inertia about
  the body frame's origin), written as MuJoCo wants it: mass, centre of mass `pos` and the
  `fullinertia` about the centre of mass, in the body frame;
- otherwise a fitted payload (mass > 0) as a `payload` body inside `fr3_link7` at the flange;
- gravity on (0 0 −9.81 m/s²): the model is the arm's rigid body as the torque sensors see it.
  The twin itself simulates with gravity off, because the firmware compensates it; a user who
  loads this model in a simulator without that compensation wants the arm's own gravity.

Static friction, the motor delay and the friction law's shape have no MJCF attribute; the
header comment gives them. A body the fit left at its nominal values keeps the bundled
inertial. Every link inertial written is physically consistent (the torque route constrains θ
so: mass > 0, positive-definite inertia meeting the triangle inequalities), so MuJoCo loads it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import ModelError
from .record import FitRecord
from ...sim.fr3 import FLANGE_OFFSET_M
from ...sim.arm_model.model import FR3_MODEL_PATH

GRAVITY_M_S2 = 9.81
LINK_BODY = "fr3_link{}"
THETA_KEYS = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")


def link_thetas(rec: FitRecord) -> np.ndarray | None:
    """(7, 10) the identified links' θ (Pinocchio's order) of a torque fit with `+links`, else None."""
    raw = rec.extra.get("torque_json")
    if not raw:
        return None
    beta = {b["name"]: b["value"] for b in json.loads(raw).get("beta", [])}
    if "link1_m" not in beta:
        return None
    return np.array([[beta[f"link{i}_{k}"] for k in THETA_KEYS] for i in range(1, 8)], dtype=np.float64)


def inertial_attributes(theta: np.ndarray) -> dict[str, str]:
    """MJCF `<inertial>` attributes of one body's θ (10,): mass [kg], pos = centre of mass [m]
    and fullinertia = "Ixx Iyy Izz Ixy Ixz Iyz" about it [kg·m²], all in the body frame.
    ValueError when θ is not a body MuJoCo can load (mass ≤ 0 or inertia not positive definite)."""
    m = float(theta[0])
    if not m > 0:
        raise ModelError(f"body mass {m:g} kg: expected > 0")
    c = theta[1:4] / m
    ixx, ixy, iyy, ixz, iyz, izz = theta[4:10]
    i_o = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=np.float64)
    i_c = i_o - m * (c @ c * np.eye(3) - np.outer(c, c))
    if np.linalg.eigvalsh(i_c).min() <= 0:
        raise ModelError(f"inertia about the centre of mass {i_c.round(9).tolist()} kg·m²: not positive definite")
    full = (i_c[0, 0], i_c[1, 1], i_c[2, 2], i_c[0, 1], i_c[0, 2], i_c[1, 2])
    return {"pos": " ".join(f"{v:.9g}" for v in c), "mass": f"{m:.9g}", "fullinertia": " ".join(f"{v:.9g}" for v in full)}


def model_xml(rec: FitRecord) -> str:
    """The bundled FR3 MJCF with the fit's joints, links or payload, and gravity on (text)."""
    root = ET.parse(FR3_MODEL_PATH).getroot()
    p = rec.params
    option = root.find("option")
    if option is None:
        option = ET.SubElement(root, "option")
        root.remove(option)
        root.insert(0, option)
    option.set("gravity", f"0 0 {-GRAVITY_M_S2:g}")
    bodies = {b.get("name"): b for b in root.iter("body")}
    joints = {j.get("name"): j for j in root.iter("joint")}
    for j in range(7):
        joint = joints[f"fr3_joint{j + 1}"]
        joint.set("armature", f"{p.armature[j]:.9g}")
        joint.set("damping", f"{p.mu_viscous[j]:.9g}")
        joint.set("frictionloss", f"{p.mu_dynamic[j]:.9g}")
    thetas = link_thetas(rec)
    if thetas is not None:
        for i, theta in enumerate(thetas, start=1):
            body = bodies[LINK_BODY.format(i)]
            try:
                attrs = inertial_attributes(theta)
            except ValueError as exc:
                raise ModelError(f"fit {rec.fit_id}: link {i}: {exc}") from None
            for old in body.findall("inertial"):
                body.remove(old)
            body.insert(0, ET.Element("inertial", attrs))
    else:
        _scale_links(bodies, p.link_mass_scale)
    if thetas is None and p.payload.mass_kg > 0:
        load = p.payload
        payload = ET.SubElement(bodies[LINK_BODY.format(7)], "body",
                                {"name": "payload", "pos": " ".join(f"{v:g}" for v in FLANGE_OFFSET_M)})
        ET.SubElement(payload, "inertial", {"pos": " ".join(f"{v:.9g}" for v in load.com_m),
                                            "mass": f"{load.mass_kg:.9g}",
                                            "diaginertia": " ".join(f"{max(v, 1e-9):.9g}" for v in load.inertia_kgm2)})
    ET.indent(root, space="  ")
    header = (f"twinlake fit {rec.fit_id} ({rec.fit_source}, method {rec.extra.get('method', 'replay')}): "
              f"{'links identified' if thetas is not None else _links_note(p.link_mass_scale)}"
              f"{', payload body' if thetas is None and p.payload.mass_kg > 0 else ''}; gravity on. "
              f"Not expressible in MJCF: mu_static [N m] = {[round(float(v), 6) for v in p.mu_static]}, "
              f"motor delay {p.motor_delay_ms} ms, friction law {rec.friction_law}"
              f"{_load_friction_note(p.coulomb_load_per_nm)}.")
    return f"<!-- {header} -->\n" + ET.tostring(root, encoding="unicode") + "\n"


def _scale_links(bodies: dict, scales: np.ndarray) -> None:
    """A replay fit's `link_mass_scale` (+links): each link's mass and principal inertia times
    its scale, centre of mass and axes kept (twinlake.sim.arm_model.links)."""
    for i, scale in enumerate(scales, start=1):
        if scale == 1.0:
            continue
        inertial = bodies[LINK_BODY.format(i)].find("inertial")
        inertial.set("mass", f"{float(inertial.get('mass')) * scale:.9g}")
        for key in ("diaginertia", "fullinertia"):
            if inertial.get(key) is not None:
                inertial.set(key, " ".join(f"{float(v) * scale:.9g}" for v in inertial.get(key).split()))


def _links_note(scales: np.ndarray) -> str:
    if np.all(scales == 1.0):
        return "nominal links"
    return "link masses scaled " + " ".join(f"{v:.4g}" for v in scales)


def _load_friction_note(k: np.ndarray) -> str:
    if not np.any(k != 0.0):
        return ""
    return f", load-dependent Coulomb friction k [-] = {[round(float(v), 6) for v in k]} (not in MJCF)"


__all__ = ["inertial_attributes", "link_thetas", "model_xml"]
