"""An independent, deliberately plain Python statement of the interval rules (docs/intervals.md),
tick by tick, used as the oracle the SQL is compared against on small synthetic runs."""

from __future__ import annotations

import math

from interval_synth import Recording

ALL_SPLITS = ("reset", "gain_change", "target_invalid", "nonfinite", "period_outlier")
JOINT_TARGETS = [f"q_target{j}" for j in range(1, 8)] + [f"q_target_filtered{j}" for j in range(1, 8)]
GAINS = [f"K_joint{j}" for j in range(1, 8)] + [f"D_joint{j}" for j in range(1, 8)]
CART_TARGETS = [f"tgt_{s}" for s in ("px", "py", "pz", "qx", "qy", "qz", "qw")]
TAU_CMD = [f"tau_cmd{j}" for j in range(1, 8)]


def _value(rec: Recording, name: str, i: int):
    """Column `name` at row i as a Python value; None when the source did not record it."""
    col = rec.cols.get(name)
    return None if col is None else col[i].item() if hasattr(col[i], "item") else col[i]


def _finite(v) -> bool:
    return v is not None and math.isfinite(float(v))


def _excluded(rec: Recording, i: int, splits) -> str | None:
    c = rec.cols
    seq = int(c["seq"][i])
    if any(a <= seq <= b for a, b in rec.recorded_gaps):
        return "recorded_gap"
    if "stale" in c and bool(c["stale"][i]):
        return "stale"
    ctrl = int(c["controller"][i])
    if "target_invalid" in splits and ctrl == 2 and int(c["joint_target_valid"][i]) == 0:
        return "target_invalid"
    if "nonfinite" not in splits:
        return None
    state = [c[f"{p}{j}"][i] for p in ("q", "dq") for j in range(1, 8)]
    if not all(_finite(v) for v in state):
        return "nonfinite"
    torque = [_value(rec, k, i) for k in TAU_CMD]  # null: not recorded, fine
    if not all(v is None or math.isfinite(float(v)) for v in torque):
        return "nonfinite"
    if ctrl == 2 and not all(_finite(c[k][i]) for k in JOINT_TARGETS):
        return "nonfinite"
    if ctrl != 2 and not all(_finite(c[k][i]) for k in CART_TARGETS if k in c):
        return "nonfinite"
    return None


def _config(rec: Recording, i: int):
    c = rec.cols
    if int(c["controller"][i]) != 2:
        return None
    keys = GAINS + ["filter_alpha", "joint_use_friction"]
    return tuple(float(c[k][i]) for k in keys)


def _boundary(rec: Recording, p: int, i: int, splits, period_s: float, tol_s: float,
              time_period_s: float | None) -> str | None:
    c = rec.cols
    sp, si = int(c["seq"][p]), int(c["seq"][i])
    if any(sp < b < si for _a, b in rec.recorded_gaps):
        return "recorded_gap"
    if si - sp != 1:
        return "seq_gap"
    dt = float(c["t_s"][i]) - float(c["t_s"][p])
    if dt < 0:
        return "clock_reversal"
    if dt == 0:
        return "time_repeat"
    if (time_period_s is not None and not rec.tick_counter and rec.tick_grid != "rebuilt"
            and float(c["t_s"][i]) - _t_ref(rec, p) > 1.5 * time_period_s):
        return "time_gap"
    if int(c["controller"][p]) != int(c["controller"][i]):
        return "mode_change"
    if "reset" in splits and _value(rec, "joint_reset_count", p) != _value(rec, "joint_reset_count", i):
        return "reset"
    if "gain_change" in splits and _config(rec, p) != _config(rec, i):
        return "gain_change"
    if "period_outlier" in splits and abs(float(c["control_period_s"][i]) - period_s) > tol_s:
        return "period_outlier"
    return None


def expected_intervals(rec: Recording, *, splits=ALL_SPLITS, period_s: float | None = None,
                       tol_s: float | None = None, min_duration_s: float = 0.0) -> list[dict]:
    """The intervals of one run as dicts (seq_first, seq_last, start/end reasons, ...). The
    time rules use `period_s` or the run's `tick_period_s` (none: off); period_outlier that
    period or 1 ms, ± `tol_s` (default half of it)."""
    time_period_s = period_s if period_s is not None else rec.tick_period_s
    period_s = 1e-3 if time_period_s is None else time_period_s
    tol_s = 0.5 * period_s if tol_s is None else tol_s
    if rec.fit_eligible is False:
        return []
    n = rec.n
    excl = [_excluded(rec, i, splits) for i in range(n)]
    b_in = [None if i == 0 else _boundary(rec, i - 1, i, splits, period_s, tol_s, time_period_s)
            for i in range(n)]
    out, start, start_reason = [], None, None
    for i in range(n):
        if excl[i] is not None:
            continue
        if start is None:
            start = i
            start_reason = "run_start" if i == 0 else (b_in[i] or excl[i - 1])
        nxt = i + 1
        end_reason = None
        if nxt == n:
            end_reason = "run_end"
        elif b_in[nxt] is not None:
            end_reason = b_in[nxt]
        elif excl[nxt] is not None:
            end_reason = excl[nxt]
        if end_reason is not None:
            row = _row(rec, len(out), start, i, start_reason, end_reason)
            row["ticks_lost_before"] = (None if start == 0 or b_in[start] is None
                                        else _lost(rec, start - 1, start, b_in[start],
                                                   time_period_s))
            row["ticks_lost_after"] = (_lost(rec, i, nxt, end_reason, time_period_s)
                                       if nxt < n and b_in[nxt] is not None else None)
            out.append(row)
            start = None
    return [r for r in out if r["duration_s"] >= min_duration_s]


def _t_ref(rec: Recording, p: int) -> float:
    """The time a step into row p + 1 is measured from: row p's, or row p − 1's when row p
    stepped back."""
    t = rec.cols["t_s"]
    return float(t[p - 1]) if p >= 1 and float(t[p]) < float(t[p - 1]) else float(t[p])


def _lost(rec: Recording, p: int, i: int, reason: str, period_s: float) -> int | None:
    """Ticks lost between rows p and i for a seq_gap / time_gap boundary, else None."""
    c = rec.cols
    if reason == "seq_gap":
        return int(c["seq"][i]) - int(c["seq"][p]) - 1
    if reason == "time_gap":
        return max(round((float(c["t_s"][i]) - _t_ref(rec, p)) / period_s) - 1, 1)
    return None


def _row(rec: Recording, index: int, a: int, b: int, start_reason: str, end_reason: str) -> dict:
    c = rec.cols
    ctrl = int(c["controller"][a])
    joint = ctrl == 2
    return {
        "interval_index": index,
        "seq_first": int(c["seq"][a]),
        "seq_last": int(c["seq"][b]),
        "frame_count": b - a + 1,
        "duration_s": float(c["t_s"][b]) - float(c["t_s"][a]),
        "controller": ctrl,
        "K_joint": [float(c[f"K_joint{j}"][a]) for j in range(1, 8)] if joint else None,
        "filter_alpha": float(c["filter_alpha"][a]) if joint else None,
        "start_reason": start_reason,
        "end_reason": end_reason,
    }
