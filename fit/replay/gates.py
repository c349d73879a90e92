"""The local result's gates: is a local-search optimum accepted? The noise floor the recording
leaves (`floor_loss`), the gates that judge the full-data loss against it and the starts'
agreement (`gates`), and the one line that states every decision taken (`gate_verdict`, the
fit's `local_gates`). The search that acts on them is fit/replay/local_search.py.
"""

from __future__ import annotations

import numpy as np

from ..core.noise_floor import estimate_noise_floor

AGREE_REL = 0.05  # starts whose cheap loss is within this of the best agree
FLOOR_GATE = 2.0  # full loss / floor loss above this: the local result is not accepted


def floor_loss(data) -> tuple[float | None, str]:
    """The loss (fit/core/objective.py's units) the measurement noise alone leaves on `data`: per
    interval mean_j σq_j² / q_scale² + mean_j σdq_j² / dq_scale², weighted like the loss; and
    why it cannot be measured ('' when it can)."""
    parts = []
    for inp in data.inputs:
        nf = estimate_noise_floor([inp.q_ref], [inp.dq_ref])
        if not nf.measurable or nf.dq_rad_s is None or not np.all(np.isfinite(nf.dq_rad_s)):
            return None, nf.reason or "velocity noise not measurable"
        parts.append(np.mean(nf.q_rad ** 2) / data.scales.q_rad ** 2
                     + np.mean(nf.dq_rad_s ** 2) / data.scales.dq_rad_s ** 2)
    w = data.weights
    return float(np.dot(parts, w) / w.sum()), ""


def gates(start_losses: np.ndarray, full_loss: float, floor: float | None, floor_reason: str
          ) -> tuple[list[str], list[str]]:
    """(the failed gates' reasons, the passed decisions): the failed list is empty when the
    local result is accepted. At the noise floor the result is accepted whatever the other starts
    did (their disagreement is then noted, not judged); with no measurable floor the starts'
    agreement decides; above the floor the result is not accepted."""
    losses = np.asarray(start_losses)
    agree = int(np.sum(losses <= losses.min() * (1.0 + AGREE_REL)))
    disagree = len(losses) >= 2 and agree < 2
    starts = f"{agree} of {len(losses)} starts within {AGREE_REL:.0%} of the best cheap loss"
    if floor is not None and full_loss <= FLOOR_GATE * floor:
        notes = [f"at the noise floor: loss {full_loss:.4g} is {full_loss / floor:.2f}× the floor's {floor:.4g} "
                 f"(gate {FLOOR_GATE:g}×)"]
        return [], notes + ([f"{starts}: other basins cannot be lower than the floor"] if disagree else [])
    failed = [f"starts disagree: only {starts}"] if disagree else []
    if floor is None:
        return failed, ([] if disagree else [f"starts agree: {starts}"]) + \
            [f"noise-floor gate not applied: {floor_reason}"]
    return [f"loss {full_loss:.4g} is {full_loss / floor:.1f}× the noise floor's {floor:.4g} "
            f"(gate {FLOOR_GATE:g}×)"] + failed, []


def gate_verdict(failed: list[str], notes: list[str], floor: float | None, cma_note: str | None = None,
                 loss: float | None = None) -> str:
    """One line, every decision in it: 'accepted: <why>' or 'fallback to cma: <failed gates>;
    <exploration>; <why CMA-ES stopped>; <a model question?>' ('not accepted: ...' when the
    exploration is off). The words are the search's, about its local result; whether the fit
    can be trusted is the fit's verdict (fit/trust/verdict.py), which reads this line too.
    `failed`: the gates that failed; `notes`: the search's notes; `floor`: the noise floor's
    loss (`floor_loss`, None when not measurable); `loss`: the CMA-ES fallback's."""
    parts = list(failed) + list(notes)
    if not failed:
        return "accepted: " + "; ".join(parts) if parts else "accepted"
    if cma_note is None:
        return "not accepted: " + "; ".join(parts) + "; exploration off (explore_s 0)"
    if floor is not None and loss is not None and loss > FLOOR_GATE * floor:
        cma_note += (f"; a model question, not a search question: the loss stays {loss / floor:.1f}× the noise "
                     f"floor (the adequacy line names the likely missing effect)")
    return "fallback to cma: " + "; ".join(parts + [cma_note])


__all__ = ["AGREE_REL", "FLOOR_GATE", "floor_loss", "gate_verdict", "gates"]
