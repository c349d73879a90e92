"""Where a replay fit's local search starts when the user names another fit (`fit run
--start-from FIT`): that fit's parameter vector, and from a torque-route fit with `+links` the
link masses and payload whose weight matches the one it identified.

The torque route identifies each link's whole inertial θ (mass, first moments, inertia) with
the payload merged into link 7, and only the base parameters of them: a link's own mass is
regrouped into its parent's (the prior holds the rest), so θ's masses are not the start. What
it does identify well is the arm's weight at every configuration. The replay expresses a link
by one mass scale s_j (its centre of mass kept, twinlake.sim.arm_model.links) and the tool by the payload
(mass, centre of mass in the flange frame), and both enter the weight linearly:

    g(q) = g_model(q) + Σ_{j ≤ 6} (s_j − 1)·G_j(q) + m·A(q) + B(q)·(m·c)

so the start is the least-squares match of g(q) to the torque fit's weight at the configurations
the replay fit will see (its training runs; a torque fit's weight away from its own data is its
prior's, not the arm's). Link 7's scale stays 1: its weight and a payload's differ only in where
they sit. A start, not an estimate: the search moves all of them.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..errors import SettingError
from ...sim.arm_model.params import LAYOUT

CONFIGURATIONS = 96
"""How many recorded configurations the weights are matched over (evenly spaced in time)."""

LINK_PRIOR = 0.05
"""Weight of the prior holding the link scales at 1, relative to the largest link column."""


def start_vector(record, q_rad: np.ndarray | None = None, model_path: str | None = None) -> np.ndarray:
    """(LAYOUT.size,) the start of a replay fit at fit `record` (a FitRecord); q_rad (N, 7) the
    configurations to match a +links torque fit's weight at (`recorded_configurations`);
    model_path: the replay fit's MJCF (`--model`; None: the bundled FR3), whose links the
    scales multiply."""
    from .model_export import link_thetas, model_xml

    vector = np.asarray(record.vector, dtype=np.float64).copy()
    if link_thetas(record) is None:
        return vector
    if q_rad is None or len(q_rad) == 0:
        raise SettingError("train", None, f"fit {record.fit_id}: a +links torque fit starts a replay fit only "
                           "at recorded configurations (the replay fit's training runs)")
    identified = mujoco.MjModel.from_xml_string(model_xml(record))
    scales, mass_kg, com_m = weight_match(identified, np.asarray(q_rad, dtype=np.float64), sensor_offsets_nm(record),
                                          model_path)
    vector[LAYOUT.slice("link_mass_scale")] = scales
    vector[LAYOUT.index("payload_mass")] = mass_kg
    for axis, value in zip("xyz", com_m):
        vector[LAYOUT.index(f"payload_com_{axis}")] = value
    return vector


def sensor_offsets_nm(record) -> np.ndarray:
    """(7,) the constant torque offsets a measured-torque fit identified beside the weight (near
    one pose the two trade against each other, so the weight to match is their sum); zeros when
    the fit has none."""
    import json

    beta = {b["name"]: b["value"] for b in json.loads(record.extra.get("torque_json") or "{}").get("beta", [])}
    return np.array([beta.get(f"tau_offset_j{j}", 0.0) for j in range(1, 8)], dtype=np.float64)


def recorded_configurations(lake, selectors: list[str], count: int = CONFIGURATIONS) -> np.ndarray:
    """(≤ count, 7) joint positions [rad] evenly spaced over the clean intervals `selectors`
    (`[ROBOT/]RUN[:INTERVAL]`) name in `lake`."""
    from ...catalog import interval_frames, parse_selector

    parts = []
    for text in selectors:
        sel = parse_selector(text)
        frames = interval_frames(lake, sel.run, sel.interval_index, robot=sel.robot).frames
        parts.append(np.column_stack([frames.column(f"q{j}").to_numpy() for j in range(1, 8)]))
    q = np.concatenate(parts) if parts else np.empty((0, 7))
    q = q[np.isfinite(q).all(axis=1)]
    return q[np.linspace(0, len(q) - 1, min(count, len(q))).astype(int)] if len(q) else q


def weight_match(identified: mujoco.MjModel, q: np.ndarray, offset_nm: np.ndarray | None = None,
                 model_path: str | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """Link scales (7,), payload mass [kg] and centre of mass (3,) [m, flange frame] whose weight
    on the replay's model (`model_path`, None: the bundled FR3) best matches `identified`'s (a model with gravity on) plus `offset_nm`
    (7,) at the configurations q (N, 7) [rad], within the parameters' bounds. That
    model's weight and its columns are point masses' weights (sim.links.gravity_torque) at one
    kinematics pass per configuration."""
    from ...sim import load_model
    from ...sim.arm_model.links import gravity_torque, link_chain
    from ...sim.arm_model.model import arm_index

    nominal = load_model(model_path)
    arm = arm_index(nominal)
    chain = link_chain(nominal, arm)
    xipos, xanchor, xaxis, site_pos, site_mat = _kinematics(nominal, arm, chain, q)
    n = len(q)

    def weight(masses, centres, joints):  # the torque [N·m] holding point masses still, (N, 7)
        return -gravity_torque(np.broadcast_to(masses, (n, len(joints))), centres, np.asarray(joints), xanchor, xaxis)

    base = weight(chain.mass_kg, xipos, chain.joints)
    columns = [weight(chain.mass_kg[k:k + 1], xipos[:, k:k + 1], chain.joints[k:k + 1])
               for k in (int(np.flatnonzero(chain.link_of_body == j)[0]) for j in range(6))]
    at_flange = weight([1.0], site_pos[:, None], [7])
    columns.append(at_flange)
    for axis in range(3):  # the weight is linear in m·c: a unit mass one metre along the flange's axis
        columns.append(weight([1.0], (site_pos + site_mat[:, :, axis])[:, None], [7]) - at_flange)
    target = _weight(identified, q) + (0.0 if offset_nm is None else offset_nm)
    design = np.stack([c.ravel() for c in columns], axis=1)
    return _bounded_match(design, (target - base).ravel())


def _kinematics(model: mujoco.MjModel, arm, chain, q: np.ndarray) -> tuple[np.ndarray, ...]:
    """At each configuration of q (N, 7): the chain's centres of mass (N, B, 3), the arm's joint
    anchors and axes (N, 7, 3), the flange's position (N, 3) and orientation (N, 3, 3)."""
    data = mujoco.MjData(model)
    out = (np.empty((len(q), chain.body_ids.size, 3)), np.empty((len(q), 7, 3)), np.empty((len(q), 7, 3)),
           np.empty((len(q), 3)), np.empty((len(q), 3, 3)))
    for i, row in enumerate(q):
        data.qpos[arm.qpos_adr] = row
        mujoco.mj_kinematics(model, data)
        out[0][i], out[1][i], out[2][i] = data.xipos[chain.body_ids], data.xanchor[arm.jnt_ids], data.xaxis[arm.jnt_ids]
        out[3][i], out[4][i] = data.site_xpos[arm.ee_site], data.site_xmat[arm.ee_site].reshape(3, 3)
    return out


def _bounded_match(design: np.ndarray, miss: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Solve design·x ≈ miss for x = [s_1..s_6 − 1, m, m·c (3)] within the parameters' bounds,
    the link scales held towards 1 by a weak prior (near one pose a link's weight and the
    payload's are nearly the same column: the payload takes what it can explain)."""
    from scipy.optimize import lsq_linear

    s_lo, s_hi = LAYOUT.group("link_mass_scale").bounds
    m_lo, m_hi = LAYOUT.bounds[LAYOUT.index("payload_mass")]
    c_lo, c_hi = LAYOUT.bounds[LAYOUT.index("payload_com_x")]
    lower = np.r_[np.full(6, s_lo - 1.0), m_lo, np.full(3, c_lo * m_hi)]
    upper = np.r_[np.full(6, s_hi - 1.0), m_hi, np.full(3, c_hi * m_hi)]
    prior = np.zeros((6, design.shape[1]))
    prior[np.arange(6), np.arange(6)] = LINK_PRIOR * np.linalg.norm(design[:, :6], axis=0).max()
    x = lsq_linear(np.vstack([design, prior]), np.r_[miss, np.zeros(6)], bounds=(lower, upper)).x
    scales = np.r_[1.0 + x[:6], 1.0]
    mass_kg = float(x[6])
    com_m = np.clip(x[7:10] / mass_kg, c_lo, c_hi) if mass_kg > 0.05 else np.zeros(3)
    return scales, mass_kg, com_m


def _weight(model: mujoco.MjModel, q: np.ndarray) -> np.ndarray:
    """(N, 7) the torque [N·m] holding `model`'s arm still at each configuration of q (N, 7)."""
    data = mujoco.MjData(model)
    out = np.empty((len(q), 7))
    for i, row in enumerate(q):
        data.qpos[:7], data.qvel[:] = row, 0.0
        mujoco.mj_forward(model, data)
        out[i] = data.qfrc_bias[:7]
    return out


__all__ = ["CONFIGURATIONS", "LINK_PRIOR", "recorded_configurations", "sensor_offsets_nm", "start_vector", "weight_match"]
