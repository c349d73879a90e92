"""The torque route: identify the twin's (commanded torque) or the rigid body's (measured
torque) parameters from recorded joint torques by weighted least squares, as an ordinary fit
record (method = torque). See README.md and docs/fitting.md, "The torque route"."""

from .route import PRESETS, TorqueFitSettings, fit_torque

__all__ = ["PRESETS", "TorqueFitSettings", "fit_torque"]
