"""The truth of the independent test plant: its parameters, friction law and MuJoCo models.

Nothing here comes from `twinlake`: the FR3 MJCF is read as a data file from the
repository's `sim/models/fr3.xml` and edited with MuJoCo's own model-editing API
(`mujoco.MjSpec`), so the plant can disagree with the twin's simulation on purpose.

Two models are built from the same file:

* the **plant** (what the arm really is): gravity on (−9.81 m/s² along z), per-joint
  armature and viscous damping from `IndependentPlant`, MuJoCo's own joint friction
  (`frictionloss`) switched off, a payload body rigidly attached at the flange, and each
  link's mass and rotational inertia scaled by `link_mass_scale` (centre of mass kept: real
  links differ from any published model by several per cent);
* the **firmware model** (what the robot's firmware believes): the same arm without the
  payload, nominal link inertials, gravity on, no armature/damping/friction. The firmware
  computes its gravity and Coriolis compensation from it, so the payload's weight and
  inertia, and the links' differences from the file, are disturbances it does not know.

Friction law (applied by the loop through `qfrc_applied`, per joint i, q̇ in rad/s):

    τ_f,i(q̇, τ_m) = −(c_i(q̇) + k_i·|τ_m,i|)·tanh(q̇ / v_s,i) − b_i·q̇,
    c_i(q̇) = c⁺_i if q̇ ≥ 0 else c⁻_i

`k` (`coulomb_load_per_nm`, default 0) makes the Coulomb level grow with the torque the gear
transmits, τ_m = the motor torque applied in the step (delayed command + the firmware's
gravity): a harmonic drive's load-dependent friction.

`c⁺`, `c⁻` are the Coulomb levels [N·m] in the positive and negative direction, `v_s` the
tanh smoothing velocity [rad/s], `b` the viscous coefficient [N·m·s/rad]. The function is
continuous (tanh(0) = 0) and has no stiction: at rest it is zero. The viscous part is MuJoCo's
`dof_damping` (integrated implicitly by `implicitfast`); the Coulomb part is explicit, from
the velocity each 1 ms step starts from. This is the default, `friction_law="tanh"`.

`friction_law="stribeck"` is instead the twin's own law (written here again from its
documented form, docs/simulation.md; nothing imported), symmetric, with stiction:

    F_i(q̇) = μ_d,i + (μ_s,i − μ_d,i)·exp(−(q̇/v_s,i)²),   μ_s = c⁺ = c⁻,  μ_d = r_i·μ_s

with r = `dynamic_ratio` and v_s = `smoothing_velocity_rad_s`: MuJoCo's `frictionloss`
constraint holds the breakaway level μ_s (solved implicitly, so sticking is exact), and an
explicit torque (μ_s − μ_d)·(1 − exp(−(q̇/v_s)²))·sign(q̇) along the motion lowers the
sliding level to F(q̇). A plant with this law, no payload and the file's link masses is one
the twin's default 29 parameters can explain exactly ("explained plant",
bench/excitation_design.py --plant explained).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

JOINTS = 7
TICK_S = 0.001
"""The control period and physics step [s] (1 kHz)."""
GRAVITY_M_S2 = 9.81
FR3_MJCF = Path(__file__).resolve().parents[2] / "sim" / "models" / "fr3.xml"
"""twinlake's bundled FR3 model, read as data (never imported)."""
ARM_JOINTS = tuple(f"fr3_joint{j}" for j in range(1, JOINTS + 1))
FLANGE_SITE = "ee"
PAYLOAD_BODY = "plant_payload"

_PER_JOINT = ("armature_kgm2", "viscous_nms_rad", "coulomb_pos_nm", "coulomb_neg_nm",
              "smoothing_velocity_rad_s", "link_mass_scale", "coulomb_load_per_nm", "dynamic_ratio",
              "tau_j_offset_nm")
FRICTION_LAWS = ("tanh", "stribeck")
STRIBECK_SLOPE = 0.8578  # max of d/dx (1 − exp(−x²)) = √2·exp(−1/2): the relief's steepest slope × v_s
LINK_BODIES = tuple(f"fr3_link{j}" for j in range(1, JOINTS + 1))
"""The body each joint J1..J7 moves (its `link_mass_scale` entry scales it)."""


@dataclass(frozen=True)
class IndependentPlant:
    """The truth of one test arm. Per-joint fields are 7 values, J1..J7.

    armature_kgm2: rotor inertia added to each joint [kg·m²].
    viscous_nms_rad: viscous friction b [N·m·s/rad].
    coulomb_pos_nm / coulomb_neg_nm: Coulomb level c⁺ (q̇ > 0) / c⁻ (q̇ < 0) [N·m], ≥ 0.
    smoothing_velocity_rad_s: tanh smoothing velocity v_s [rad/s], > 0.
    motor_delay_ms: whole 1 ms ticks between a commanded torque and its application (≥ 0).
    payload_mass_kg: mass rigidly fixed at the flange [kg] (0: no payload).
    payload_com_m: its centre of mass in the flange frame [m], (3,).
    payload_radius_m: its inertia is a uniform sphere's, 0.4·m·r² about each axis [m].
    noise_q_rad / noise_dq_rad_s / noise_tau_j_nm: white Gaussian measurement noise σ.
    seed: the noise generator's seed (numpy `default_rng`).
    link_mass_scale: each link's (fr3_link1..7) mass and inertia about its centre of mass
        relative to the MJCF's, > 0 (1: the file's); the firmware keeps the file's.
    coulomb_load_per_nm: k, the Coulomb level's growth per N·m of transmitted torque [-], ≥ 0.
    friction_law: "tanh" (the default, above) or "stribeck" (the twin's law: breakaway
        c⁺ = c⁻, sliding level dynamic_ratio × it, Stribeck velocity smoothing_velocity_rad_s;
        k must be 0).
    dynamic_ratio: μ_d / μ_s per joint under "stribeck", in [0, 1] (unused by "tanh").
    tau_j_offset_nm: each torque sensor's constant offset, added to the recorded tau_J [N·m].
    ring_torque_nm / ring_hz / ring_decay_s / ring_start_s / ring_axis: a flexible tool's
        ringing, a damped oscillating torque at the flange A·exp(−t'/τ)·sin(2π f t'),
        t' = t − ring_start_s ≥ 0 (recorded time [s]), about `ring_axis` (3,) of the flange
        frame (normalised); A = 0: none. The arm feels it as an external torque, so tau_J
        carries −Jᵀ of it.
    """

    armature_kgm2: tuple[float, ...] = (0.21, 0.20, 0.17, 0.16, 0.085, 0.080, 0.065)
    viscous_nms_rad: tuple[float, ...] = (0.30, 0.28, 0.25, 0.22, 0.12, 0.10, 0.08)
    coulomb_pos_nm: tuple[float, ...] = (0.90, 1.00, 0.75, 0.80, 0.45, 0.35, 0.22)
    coulomb_neg_nm: tuple[float, ...] = (0.70, 0.80, 0.90, 0.60, 0.35, 0.42, 0.18)
    smoothing_velocity_rad_s: tuple[float, ...] = (0.03,) * JOINTS
    motor_delay_ms: int = 2
    payload_mass_kg: float = 1.2
    payload_com_m: tuple[float, ...] = (0.01, -0.015, 0.055)
    payload_radius_m: float = 0.05
    noise_q_rad: float = 2e-5
    noise_dq_rad_s: float = 5e-4
    noise_tau_j_nm: float = 0.05
    seed: int = 0
    link_mass_scale: tuple[float, ...] = (1.0,) * JOINTS
    coulomb_load_per_nm: tuple[float, ...] = (0.0,) * JOINTS
    friction_law: str = "tanh"
    dynamic_ratio: tuple[float, ...] = (1.0,) * JOINTS
    tau_j_offset_nm: tuple[float, ...] = (0.0,) * JOINTS
    ring_torque_nm: float = 0.0
    ring_hz: float = 7.0
    ring_decay_s: float = 1.5
    ring_start_s: float = 0.0
    ring_axis: tuple[float, ...] = (1.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        for name in _PER_JOINT:
            object.__setattr__(self, name, _floats(name, getattr(self, name), JOINTS))
        object.__setattr__(self, "payload_com_m", _floats("payload_com_m", self.payload_com_m, 3))
        object.__setattr__(self, "ring_axis", _floats("ring_axis", self.ring_axis, 3))
        if not np.any(self.ring_axis):
            raise ValueError("IndependentPlant.ring_axis: expected a non-zero axis")
        for name in ("payload_mass_kg", "payload_radius_m", "noise_q_rad", "noise_dq_rad_s",
                     "noise_tau_j_nm", "ring_torque_nm", "ring_hz", "ring_decay_s", "ring_start_s"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"IndependentPlant.{name}: expected a finite number >= 0, got {value}")
            object.__setattr__(self, name, value)
        if min(self.link_mass_scale) <= 0:
            raise ValueError(f"IndependentPlant.link_mass_scale: expected values > 0, got {self.link_mass_scale}")
        for name in ("armature_kgm2", "viscous_nms_rad", "coulomb_pos_nm", "coulomb_neg_nm",
                     "coulomb_load_per_nm"):
            if min(getattr(self, name)) < 0:
                raise ValueError(f"IndependentPlant.{name}: expected values >= 0, got {getattr(self, name)}")
        if min(self.smoothing_velocity_rad_s) <= 0:
            raise ValueError("IndependentPlant.smoothing_velocity_rad_s: expected values > 0, "
                             f"got {self.smoothing_velocity_rad_s}")
        if isinstance(self.motor_delay_ms, bool) or int(self.motor_delay_ms) != self.motor_delay_ms \
                or self.motor_delay_ms < 0:
            raise ValueError("IndependentPlant.motor_delay_ms: expected a whole number of 1 ms ticks "
                             f">= 0, got {self.motor_delay_ms!r}")
        object.__setattr__(self, "motor_delay_ms", int(self.motor_delay_ms))
        if self.payload_mass_kg > 0 and self.payload_radius_m <= 0:
            raise ValueError("IndependentPlant.payload_radius_m: expected > 0 with a payload mass")
        self._check_stribeck()
        self._check_explicit_stability()

    def _check_stribeck(self) -> None:
        if self.friction_law not in FRICTION_LAWS:
            raise ValueError(f"IndependentPlant.friction_law: expected one of {', '.join(FRICTION_LAWS)}, "
                             f"got {self.friction_law!r}")
        if not all(0.0 <= r <= 1.0 for r in self.dynamic_ratio):
            raise ValueError(f"IndependentPlant.dynamic_ratio: expected values in [0, 1], got {self.dynamic_ratio}")
        if self.friction_law != "stribeck":
            return
        if self.coulomb_pos_nm != self.coulomb_neg_nm:
            raise ValueError("IndependentPlant: the stribeck law is symmetric; expected coulomb_pos_nm == "
                             f"coulomb_neg_nm, got {self.coulomb_pos_nm} and {self.coulomb_neg_nm}")
        if any(self.coulomb_load_per_nm):
            raise ValueError("IndependentPlant: the stribeck law has no load-dependent level; expected "
                             f"coulomb_load_per_nm 0, got {self.coulomb_load_per_nm}")

    def _check_explicit_stability(self) -> None:
        """The explicit friction term acts like a damping near rest (tanh: c/v_s; stribeck's
        relief: up to −0.86·(μ_s − μ_d)/v_s); refuse values the 1 ms step cannot integrate
        (|slope|·dt must stay well below the joint's rotor inertia)."""
        if self.friction_law == "stribeck":
            slope = STRIBECK_SLOPE * self.coulomb_pos * (1.0 - np.asarray(self.dynamic_ratio)) / self.smoothing_velocity
        else:
            slope = np.maximum(self.coulomb_pos, self.coulomb_neg) / self.smoothing_velocity
        ratio = slope * TICK_S / np.maximum(self.armature, 1e-12)
        if np.any(ratio > 0.5):
            j = int(np.argmax(ratio)) + 1
            raise ValueError(f"IndependentPlant: joint {j}'s Coulomb level / smoothing velocity "
                             f"({slope[j - 1]:.4g} N·m·s/rad) is too steep for an explicit 1 ms step "
                             f"with armature {self.armature[j - 1]:.4g} kg·m²; raise "
                             "smoothing_velocity_rad_s or armature_kgm2")

    def ring_nm(self, t_s: float) -> float:
        """The tool's ringing torque amplitude at recorded time t_s [s] (signed) [N·m]."""
        dt = t_s - self.ring_start_s
        if self.ring_torque_nm == 0.0 or dt < 0:
            return 0.0
        decay = math.exp(-dt / self.ring_decay_s) if self.ring_decay_s > 0 else 0.0
        return self.ring_torque_nm * decay * math.sin(2.0 * math.pi * self.ring_hz * dt)

    @property
    def armature(self) -> np.ndarray:
        return np.asarray(self.armature_kgm2)

    @property
    def viscous(self) -> np.ndarray:
        return np.asarray(self.viscous_nms_rad)

    @property
    def coulomb_pos(self) -> np.ndarray:
        return np.asarray(self.coulomb_pos_nm)

    @property
    def coulomb_neg(self) -> np.ndarray:
        return np.asarray(self.coulomb_neg_nm)

    @property
    def smoothing_velocity(self) -> np.ndarray:
        return np.asarray(self.smoothing_velocity_rad_s)

    @property
    def delay_ticks(self) -> int:
        return self.motor_delay_ms

    def replace(self, **changes) -> "IndependentPlant":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def _floats(name: str, values, size: int) -> tuple[float, ...]:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 1 and size > 1:
        arr = np.repeat(arr, size)
    if arr.size != size or not np.all(np.isfinite(arr)):
        raise ValueError(f"IndependentPlant.{name}: expected {size} finite numbers, got {values!r}")
    return tuple(float(x) for x in arr)


def coulomb_torque_nm(plant: IndependentPlant, dq_rad_s: np.ndarray,
                      motor_torque_nm: np.ndarray | float = 0.0) -> np.ndarray:
    """The smoothed asymmetric Coulomb torque −(c(q̇) + k·|τ_m|)·tanh(q̇/v_s) [N·m], shape of
    `dq_rad_s` (…, 7); τ_m the transmitted motor torque [N·m] (broadcast)."""
    dq = np.asarray(dq_rad_s, dtype=float)
    level = np.where(dq >= 0.0, plant.coulomb_pos, plant.coulomb_neg)
    level = level + np.asarray(plant.coulomb_load_per_nm) * np.abs(motor_torque_nm)
    return -level * np.tanh(dq / plant.smoothing_velocity)


def stribeck_relief_nm(plant: IndependentPlant, dq_rad_s: np.ndarray) -> np.ndarray:
    """The stribeck law's explicit torque along the motion, (μ_s − μ_d)·(1 − exp(−(q̇/v_s)²))·sign(q̇)
    [N·m], shape of `dq_rad_s` (…, 7); the frictionloss constraint adds −μ_s·sign(q̇) in motion."""
    dq = np.asarray(dq_rad_s, dtype=float)
    drop = plant.coulomb_pos * (1.0 - np.asarray(plant.dynamic_ratio))
    return drop * -np.expm1(-(dq / plant.smoothing_velocity) ** 2) * np.sign(dq)


def friction_torque_nm(plant: IndependentPlant, dq_rad_s: np.ndarray,
                       motor_torque_nm: np.ndarray | float = 0.0) -> np.ndarray:
    """The whole friction law in motion (q̇ ≠ 0) [N·m], (…, 7): tanh, τ_f(q̇, τ_m) = Coulomb
    part − b·q̇; stribeck, −F(q̇)·sign(q̇) − b·q̇ (at rest the constraint holds up to μ_s: 0 here)."""
    dq = np.asarray(dq_rad_s, dtype=float)
    if plant.friction_law == "stribeck":
        return -plant.coulomb_pos * np.sign(dq) + stribeck_relief_nm(plant, dq) - plant.viscous * dq
    return coulomb_torque_nm(plant, dq, motor_torque_nm) - plant.viscous * dq


@dataclass(frozen=True)
class PlantModels:
    """The compiled plant and firmware models and the arm's addresses in both.

    qpos_adr / dof_adr: (7,) int arrays, J1..J7 (the same in both models).
    flange_site: the `ee` site id in the firmware model (the measured O_T_EE frame).
    """

    plant: mujoco.MjModel
    firmware: mujoco.MjModel
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    flange_site: int


def build_models(plant: IndependentPlant, model_path: str | Path | None = None) -> PlantModels:
    """Compile the plant (payload, armature, damping, gravity; MuJoCo's joint friction only as
    the stribeck law's breakaway level) and the payload-free firmware model from the MJCF file
    (default: twinlake's `sim/models/fr3.xml`)."""
    path = Path(model_path) if model_path is not None else FR3_MJCF
    if not path.is_file():
        raise FileNotFoundError(f"{path}: FR3 MJCF not found")
    plant_spec = _spec(path)
    for j, name in enumerate(ARM_JOINTS):
        joint = plant_spec.joint(name)
        joint.armature = plant.armature_kgm2[j]
        joint.damping = [plant.viscous_nms_rad[j], 0.0, 0.0]  # linear term only
        if plant.friction_law == "stribeck":
            joint.frictionloss = plant.coulomb_pos_nm[j]  # the breakaway level, an implicit constraint
    if plant.payload_mass_kg > 0:
        _add_payload(plant_spec, plant, path)
    _scale_links(plant_spec, plant.link_mass_scale, path)
    plant_model = plant_spec.compile()
    firmware_spec = _spec(path)
    for name in ARM_JOINTS:
        joint = firmware_spec.joint(name)
        joint.armature = 0.0
        joint.damping = [0.0, 0.0, 0.0]
    firmware_model = firmware_spec.compile()
    qpos_adr, dof_adr = _addresses(plant_model, path)
    fw_qpos, fw_dof = _addresses(firmware_model, path)
    if not (np.array_equal(qpos_adr, fw_qpos) and np.array_equal(dof_adr, fw_dof)):
        raise ValueError(f"{path}: the payload changed the arm's joint addresses")
    site = mujoco.mj_name2id(firmware_model, mujoco.mjtObj.mjOBJ_SITE, FLANGE_SITE)
    if site < 0:
        raise ValueError(f"{path}: no site '{FLANGE_SITE}' at the flange")
    return PlantModels(plant_model, firmware_model, qpos_adr, dof_adr, site)


def _spec(path: Path) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(path))
    spec.option.timestep = TICK_S
    spec.option.gravity = [0.0, 0.0, -GRAVITY_M_S2]
    for name in ARM_JOINTS:
        joint = spec.joint(name)
        if joint is None:
            raise ValueError(f"{path}: no joint '{name}'")
        joint.frictionloss = 0.0
    return spec


def _scale_links(spec: mujoco.MjSpec, scale: tuple[float, ...], path: Path) -> None:
    """Each link body's mass and inertia times its scale (centre of mass and axes kept)."""
    for name, factor in zip(LINK_BODIES, scale):
        if factor == 1.0:
            continue
        body = spec.body(name)
        if body is None:
            raise ValueError(f"{path}: no body '{name}' to scale")
        body.mass = body.mass * factor
        body.inertia = [v * factor for v in body.inertia]
        body.explicitinertial = True


def _add_payload(spec: mujoco.MjSpec, plant: IndependentPlant, path: Path) -> None:
    """A rigid body at the flange frame (the `ee` site's pose on its body), CoM at
    `payload_com_m` in that frame, inertia of a uniform sphere."""
    site = spec.site(FLANGE_SITE)
    if site is None:
        raise ValueError(f"{path}: no site '{FLANGE_SITE}' to attach the payload to")
    inertia = 0.4 * plant.payload_mass_kg * plant.payload_radius_m ** 2
    site.parent.add_body(name=PAYLOAD_BODY, pos=list(site.pos), quat=list(site.quat),
                         mass=plant.payload_mass_kg, ipos=list(plant.payload_com_m),
                         inertia=[inertia] * 3, explicitinertial=True)


def _addresses(model: mujoco.MjModel, path: Path) -> tuple[np.ndarray, np.ndarray]:
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in ARM_JOINTS]
    if min(ids) < 0:
        raise ValueError(f"{path}: missing one of {ARM_JOINTS}")
    return (np.array([model.jnt_qposadr[i] for i in ids]), np.array([model.jnt_dofadr[i] for i in ids]))
