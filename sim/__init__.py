"""twinlake.sim: the FR3 MuJoCo model, dynamics parameters, matched controllers, replay engines.

Public face (see sim/README.md):
  model:        FR3_MODEL_PATH, load_model, Q_MIN, Q_MAX, JOINT_COUNT, HOME_Q
  parameters:   LAYOUT (the parameter vector's groups, names, bounds, units), DynamicsParams,
                PARAM_NAMES, DEFAULT_BOUNDS, load_params, save_profile, to_frankatwin_decoded,
                DEMO_PROFILE_PATH, params_matrix
  loads:        EndLoad, NO_LOAD, parse_load, load_from_metadata (true payload, configured load)
  controllers:  JointImpedanceConfig, CartesianGains
  one arm:      SimFR3, JointImpedanceCommand, IdleCommand, TickOutput
  replay:       ReplayInput, ReplayResult, replay_reference, PopulationEngine, PopulationResult,
                ControllerNoise (seeded measurement noise in the replay's control loop)

The names are imported on first use (PEP 562, contracts/lazy.py), so that a user of the
parameters alone does not pay for MuJoCo or numba: `from twinlake.sim import SimFR3` works as before.
"""

from __future__ import annotations

from pathlib import Path

from ..contracts.lazy import lazy_exports

DEMO_PROFILE_PATH = Path(__file__).resolve().parent / "profiles" / "demo_robot.json"

_MODULES = {
    "arm": ("CONTROLLER_CARTESIAN", "CONTROLLER_IDLE", "CONTROLLER_JOINT_IMPEDANCE", "IdleCommand",
            "JointImpedanceCommand", "SimFR3", "TickOutput"),
    "arm_model.controllers": ("CartesianGains", "JointImpedanceConfig"),
    "arm_model.model": ("FR3_MODEL_PATH", "HOME_Q", "JOINT_COUNT", "Q_MAX", "Q_MIN", "load_model"),
    "arm_model.params": ("DEFAULT_BOUNDS", "LAYOUT", "MAX_DELAY_MS", "PARAM_COUNT", "PARAM_NAMES", "PROFILE_SCHEMA", "DynamicsParams",
               "ParameterGroup", "ParameterLayout", "load_params", "params_matrix", "save_profile",
               "to_frankatwin_decoded"),
    "arm_model.load": ("EndLoad", "NO_LOAD", "load_from_metadata", "parse_load"),
    "replay.controller_noise": ("ControllerNoise",),
    "replay.population": ("PopulationEngine", "PopulationResult"),
    "replay.reference": ("ReplayResult", "replay_reference"),
    "replay.replay_input": ("CARTESIAN_IMPEDANCE", "JOINT_IMPEDANCE", "TIME_BASE_ZOH", "ReplayInput"),
}
__getattr__, __dir__, _names = lazy_exports(__name__, globals(), _MODULES)
__all__ = sorted([*_names, "DEMO_PROFILE_PATH"])
