"""twinlake.sim: the FR3 MuJoCo model, dynamics parameters, matched controllers, replay engines.

Public face (see sim/README.md):
  model:        FR3_MODEL_PATH, load_model, Q_MIN, Q_MAX, JOINT_COUNT, HOME_Q
  parameters:   DynamicsParams, PARAM_NAMES, DEFAULT_BOUNDS, load_params, save_profile,
                to_frankatwin_decoded, DEMO_PROFILE_PATH
  controllers:  JointImpedanceConfig, CartesianGains
  one arm:      SimFR3, JointImpedanceCommand, IdleCommand, TickOutput
  replay:       ReplayInput, ReplayResult, replay_reference, PopulationEngine, PopulationResult
"""

from pathlib import Path

from .arm import (
    CONTROLLER_CARTESIAN,
    CONTROLLER_IDLE,
    CONTROLLER_JOINT_IMPEDANCE,
    IdleCommand,
    JointImpedanceCommand,
    SimFR3,
    TickOutput,
)
from .controllers import CartesianGains, JointImpedanceConfig
from .model import FR3_MODEL_PATH, HOME_Q, JOINT_COUNT, Q_MAX, Q_MIN, load_model
from .params import (
    DEFAULT_BOUNDS,
    MAX_DELAY_MS,
    PARAM_COUNT,
    PARAM_NAMES,
    PROFILE_SCHEMA,
    DynamicsParams,
    load_params,
    save_profile,
    to_frankatwin_decoded,
)
from .population import PopulationEngine, PopulationResult
from .replay import ReplayResult, replay_reference
from .replay_input import CARTESIAN_IMPEDANCE, JOINT_IMPEDANCE, TIME_BASE_ZOH, ReplayInput

DEMO_PROFILE_PATH = Path(__file__).resolve().parent / "profiles" / "demo_robot.json"

__all__ = [
    "CARTESIAN_IMPEDANCE",
    "CONTROLLER_CARTESIAN",
    "CONTROLLER_IDLE",
    "CONTROLLER_JOINT_IMPEDANCE",
    "CartesianGains",
    "DEFAULT_BOUNDS",
    "DEMO_PROFILE_PATH",
    "DynamicsParams",
    "FR3_MODEL_PATH",
    "HOME_Q",
    "IdleCommand",
    "JOINT_COUNT",
    "JOINT_IMPEDANCE",
    "JointImpedanceCommand",
    "JointImpedanceConfig",
    "MAX_DELAY_MS",
    "PARAM_COUNT",
    "PARAM_NAMES",
    "PROFILE_SCHEMA",
    "PopulationEngine",
    "PopulationResult",
    "Q_MAX",
    "Q_MIN",
    "ReplayInput",
    "ReplayResult",
    "SimFR3",
    "TIME_BASE_ZOH",
    "TickOutput",
    "load_model",
    "load_params",
    "replay_reference",
    "save_profile",
    "to_frankatwin_decoded",
]
