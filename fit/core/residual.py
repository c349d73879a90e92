"""A replay's residual and the structures found in it: `ResidualSegment` (one replayed clean
interval against its recording) and `Signature` (one structure of its residual with the share it
explains), the data that fit/trust/signatures.py computes and fit/trust/adequacy.py judges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_SHIFT_MS = 20.0
STILL_RAD_S = 5e-3  # |dq_sim| under this: no velocity sign
GRAVITY_STEP_S = 0.01  # the flange-mass torque is evaluated every 10 ms and interpolated
_HINTS = {
    "payload": "try freeing the payload (parameter spec `+payload`)",
    "bias": "check the joint offsets (calibration); the model has no position offset",
    "friction": "free or widen mu_static / dynamic_ratio of {joints}",
    "viscous": "free or widen mu_viscous of {joints}",
    "inertia": "free or widen armature of {joints}",
    "delay": "free or widen motor_delay_ms",
    "time_shift": "check the recording's time base (t_s, seq) against the control ticks",
}


@dataclass(frozen=True)
class ResidualSegment:
    """One replayed clean interval on S samples: times (S,) [s], recorded and simulated q (S, 7)
    [rad] and dq (S, 7) [rad/s], the sim's commanded torque (S, 7) [N·m], and the recorded joint
    stiffness K [N·m/rad] and damping D [N·m·s/rad] (S, 7) of each sample (None for a
    Cartesian-impedance interval)."""

    t_s: np.ndarray
    q_real_rad: np.ndarray
    q_sim_rad: np.ndarray
    dq_real_rad_s: np.ndarray | None
    dq_sim_rad_s: np.ndarray | None
    tau_sim_nm: np.ndarray | None = None
    k_nm_per_rad: np.ndarray | None = None
    d_nms_per_rad: np.ndarray | None = None

    @classmethod
    def from_replay(cls, inp, q_sim: np.ndarray, dq_sim: np.ndarray, tau_sim: np.ndarray | None = None
                    ) -> "ResidualSegment":
        """From a `twinlake.sim.ReplayInput` and one candidate's replay of it (S, 7) each."""
        t = inp.t_s if inp.t_s is not None else inp.sample_ticks * 1e-3
        at = lambda a: None if a is None else a[inp.sample_ticks]  # noqa: E731
        return cls(np.asarray(t, np.float64), inp.q_ref, np.asarray(q_sim), inp.dq_ref, np.asarray(dq_sim),
                   None if tau_sim is None else np.asarray(tau_sim), at(inp.k_nm_per_rad), at(inp.d_nms_per_rad))


@dataclass(frozen=True)
class Signature:
    """One residual structure: `explained` share of the power above the floor (0..1), the
    joints (1-based) it shows on, its fitted value(s) and what it means in words."""

    name: str
    explained: float
    joints: tuple[int, ...]
    values: dict[str, Any]
    text: str

    @property
    def hint(self) -> str:
        joints = "/".join(f"J{j}" for j in self.joints) or "the joints"
        return _HINTS[self.name].format(joints=joints)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "explained": self.explained, "joints": list(self.joints),
                "values": self.values, "text": self.text}
