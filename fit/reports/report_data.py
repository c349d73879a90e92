"""The data `twinlake fit report` shows (built from the lake by report_lake.py, or directly in
tests): the parameters with their intervals, the held-out replays, and the rest of the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..core.noise_floor import NoiseFloor


@dataclass(frozen=True)
class HeldOutTrace:
    """One held-out replay: times (N,), real and simulated joint positions (N,7) [rad], and the
    noise floor stored with its validation (None: not stored; the report then estimates it)."""

    label: str
    t_s: np.ndarray
    q_real_rad: np.ndarray
    q_fitted_rad: np.ndarray
    q_nominal_rad: np.ndarray | None = None
    noise_floor: NoiseFloor | None = None


@dataclass(frozen=True)
class ParamRow:
    """One parameter: value, 95 % interval (None when not computed), nominal, bounds, flags."""

    name: str
    value: float
    nominal: float
    lower_bound: float
    upper_bound: float
    ci_low: float | None = None
    ci_high: float | None = None
    flags: tuple[str, ...] = ()
    seed_min: float | None = None  # spread of the optima over several seeds
    seed_max: float | None = None
    free: bool = True  # searched by the fit (False: frozen at its value)
    status: str = ""  # its status in words (fit/core/parameter_status.py), e.g. "≥ 0 (at a bound)"

    @property
    def half_width_rel(self) -> float | None:
        """The realised relative 95 % half-width (design_check.relative_half_width); None
        without an interval."""
        from ..records.design_check import relative_half_width

        return relative_half_width(self.ci_low, self.ci_high, self.value, self.lower_bound, self.upper_bound)


@dataclass
class ReportData:
    """Everything the page shows; built from the lake by the CLI (report_lake.py), or directly in tests."""

    fit_id: str
    summary: dict[str, Any]
    params: list[ParamRow]
    history: list[dict[str, Any]] = field(default_factory=list)
    held_out: list[HeldOutTrace] = field(default_factory=list)
    validations: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    adequacy: list[tuple[str, bool | None]] = field(default_factory=list)  # (line, passed or None)
    covariance: dict | None = None  # the stored covariance block (names, matrix, method), None: not stored
    designs: dict[str, dict] = field(default_factory=dict)  # train run → its metadata's `design` section
    verdict: tuple[str, list[str]] | None = None  # (level, reasons most important first), shown first
