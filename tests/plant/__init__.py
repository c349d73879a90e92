"""An independent FR3 test plant: records fr3_stack CSV v2 runs from a reference.csv with a
truth the twin does not share (its own MuJoCo loop, friction law, firmware law and CSV
writer; nothing imported from twinlake). See README.md."""

from .csv_v2 import COLUMNS, write_csv_v2
from .firmware import DEFAULT_FILTER_ALPHA, DEFAULT_KD, DEFAULT_KP
from .independent import (
    FR3_MJCF,
    IndependentPlant,
    PlantModels,
    build_models,
    coulomb_torque_nm,
    friction_torque_nm,
    stribeck_relief_nm,
)
from .payload_run import HOME_Q, MOVED_Q, TOOL, payload_run_reference, tool_plant
from .pc_logger import LIBFRANKA_COLUMNS, PcLog, PcLogger, pc_log, write_csv
from .recorder import PlantRecording, read_reference, record, write_reference

__all__ = [
    "COLUMNS", "HOME_Q", "LIBFRANKA_COLUMNS", "MOVED_Q", "TOOL", "payload_run_reference", "tool_plant", "PcLog", "PcLogger", "pc_log", "write_csv",
    "DEFAULT_FILTER_ALPHA", "DEFAULT_KD", "DEFAULT_KP", "FR3_MJCF",
    "IndependentPlant", "PlantModels", "PlantRecording", "build_models", "coulomb_torque_nm",
    "friction_torque_nm", "read_reference", "stribeck_relief_nm", "record", "write_csv_v2", "write_reference",
]
