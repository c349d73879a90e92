"""The Franka FR3 as the control stacks see it: joint limits, poses and controller constants.

The ground floor of sim: plain numbers, imported by the model, the numpy controllers and the
compiled kernels alike (it imports nothing of ours). Joint angles [rad], torques [N·m]; arrays
are (7,) for J1..J7 (HOME_Q, Q_MIN and Q_MAX read-only).

Sources: fr3_stack's daemon (`controllers_common.hpp`: joint limits, the joint-limit repulsion,
the slew limiter and the friction compensation of its joint impedance) and FrankaTwin's
`osc_shm.cpp` (the Cartesian law's torque clamp and slew rate).
"""

from __future__ import annotations

import numpy as np

JOINT_COUNT = 7
TIMESTEP_S = 0.001  # one control tick (the 1 kHz loop) and one physics step
FLANGE_OFFSET_M = (0.0, 0.0, 0.107)  # the flange on the body of joint 7
HOME_Q = np.array([0.0, 0.0, 0.0, -1.57079, 0.0, 1.57079, -0.7853])

# fr3_stack daemon joint limits (controllers_common.hpp) [rad]
Q_MIN = np.array([-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159])
Q_MAX = np.array([2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159])

# fr3_stack joint impedance
JOINT_LIMIT_MARGIN = 0.1  # fraction of the range (kJointLimitMargin)
JOINT_LIMIT_MAX_TAU_NM = 10.0  # repulsion cap (kJointLimitMaxTau)
JOINT_SLEW_NM_PER_TICK = 1.0  # kDeltaTauMax, per 1 kHz callback
FRICTION_FP1_NM = np.array([0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.2])
FRICTION_FP2_S_PER_RAD = 50.0
FRICTION_FP3_NMS_PER_RAD = 0.05

# the repulsion zone: its inner edges [rad] and its gain [N·m per rad of penetration]
_MARGIN_RAD = JOINT_LIMIT_MARGIN * (Q_MAX - Q_MIN)
REPULSION_LOWER_RAD = Q_MIN + _MARGIN_RAD
REPULSION_UPPER_RAD = Q_MAX - _MARGIN_RAD
REPULSION_GAIN_NM_PER_RAD = JOINT_LIMIT_MAX_TAU_NM / _MARGIN_RAD

# FrankaTwin Cartesian impedance
CART_TORQUE_LIMIT_NM = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])
CART_MAX_TORQUE_RATE_NM_S = 800.0

for _a in (HOME_Q, Q_MIN, Q_MAX):
    _a.setflags(write=False)

__all__ = ["CART_MAX_TORQUE_RATE_NM_S", "CART_TORQUE_LIMIT_NM", "FLANGE_OFFSET_M", "FRICTION_FP1_NM",
           "FRICTION_FP2_S_PER_RAD", "FRICTION_FP3_NMS_PER_RAD", "HOME_Q", "JOINT_COUNT", "JOINT_LIMIT_MARGIN",
           "JOINT_LIMIT_MAX_TAU_NM", "JOINT_SLEW_NM_PER_TICK", "Q_MAX", "Q_MIN", "REPULSION_GAIN_NM_PER_RAD",
           "REPULSION_LOWER_RAD", "REPULSION_UPPER_RAD", "TIMESTEP_S"]
