"""The design's confirmation (twinlake/excitation_design/confirm.py): one replay Jacobian of a
design and the fit's own HAC rule predict the 95 % half-widths that the same rule gives on
another recording of that design (another noise draw) — the promise `excite --design` prints."""

from dataclasses import replace

import numpy as np

from twinlake.daemon.excitation import PREVIEW_ANCHOR_Q, Plan
from twinlake.excitation_design.confirm import confirm
from twinlake.fit.core.space import parse_space
from twinlake.sim.arm_model.params import DynamicsParams

PLAN = Plan(mode="multisine", joints=tuple(range(1, 8)), amplitude_deg=4.0, seconds=6.0, ramp=1.5, hold=0.5,
            tones=(0.3, 0.7, 1.3), seed=2, max_velocity=1.0, max_acceleration=10.0, max_jerk=100.0)


def test_confirmed_half_widths_hold_on_another_noise_draw(tmp_path):
    truth = replace(DynamicsParams.nominal(), dynamic_ratio=np.full(7, 0.7), motor_delay_ms=2)
    space = parse_space([])
    first = confirm(PLAN, PREVIEW_ANCHOR_Q, truth, space, noise_seed=1, workdir=tmp_path / "a")
    again = confirm(PLAN, PREVIEW_ANCHOR_Q, truth, space, noise_seed=2, workdir=tmp_path / "b")
    assert len(first.half_width_rel) == 28 and first.covariance["method"] == "hac_bartlett_andrews"
    assert first.covariance["bandwidth_ticks"] > 1  # the residuals are correlated: not the iid rule
    assert first.rows == 2 * 7 * first.covariance["ticks"]
    ratios = np.array([again.half_width_rel[n] / first.half_width_rel[n] for n in first.half_width_rel])
    assert np.all((ratios > 1 / 1.5) & (ratios < 1.5)), dict(zip(first.half_width_rel, ratios.round(2)))
    assert first.half_width_rel != again.half_width_rel  # two noise draws, two estimates
    assert (tmp_path / "a" / "designed.csv").is_file()
