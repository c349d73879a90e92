"""Synthetic recordings and replay inputs for tests/sim: SimFR3 driven tick by tick, as the daemon does."""

from __future__ import annotations

import numpy as np

from twinlake.sim import (DEFAULT_BOUNDS, HOME_Q, LAYOUT, params_matrix, DynamicsParams, JointImpedanceCommand, JointImpedanceConfig, ReplayInput,
                          SimFR3, replay_reference)


def target_trajectory(n_ticks: int, amplitude_rad: float = 0.15, freq_hz: float = 1.1) -> np.ndarray:
    """(n, 7) smooth multi-joint pre-EMA targets around home."""
    t = np.arange(n_ticks) * 1e-3
    phase = np.linspace(0.0, np.pi, 7)
    wave = np.sin(2 * np.pi * freq_hz * t[:, None] + phase) + 0.4 * np.sin(2 * np.pi * 2.3 * freq_hz * t[:, None])
    return HOME_Q + amplitude_rad * np.minimum(t[:, None] / 0.3, 1.0) * wave


def record_synthetic(params, n_ticks: int, noise_q: float = 0.0, noise_dq: float = 0.0, seed: int = 0,
                     config: JointImpedanceConfig | None = None, configured_load=None,
                     friction_law: str = "stribeck") -> dict[str, np.ndarray]:
    """Drive SimFR3 tick by tick (as the daemon does) and return canonical frame columns.

    Row k: measured (noisy) q_k, dq_k and the controller outputs computed from them.
    configured_load: the firmware's configured load (an EndLoad; none if None).
    """
    rng = np.random.default_rng(seed)
    extra = {} if configured_load is None else {"configured_load": configured_load}
    arm = SimFR3(params, friction_law=friction_law, **extra)
    config = config or JointImpedanceConfig()
    targets = target_trajectory(n_ticks)
    cols: dict[str, list] = {name: [] for name in ("q", "dq", "tau_cmd", "q_target", "q_target_filtered", "K", "D", "tau_J")}
    scalar: dict[str, list] = {"filter_alpha": [], "joint_use_friction": [], "joint_reset_count": [], "controller": []}
    for k in range(n_ticks):
        q_meas = arm.q + rng.normal(0.0, noise_q, 7) if noise_q else arm.q
        dq_meas = arm.dq + rng.normal(0.0, noise_dq, 7) if noise_dq else arm.dq
        out = arm.tick(q_meas, dq_meas, JointImpedanceCommand(targets[k], config))
        for name, value in (("q", q_meas), ("dq", dq_meas), ("tau_cmd", out.tau_cmd), ("q_target", out.q_target),
                            ("q_target_filtered", out.q_target_filtered), ("K", out.k_nm_per_rad),
                            ("D", out.d_nms_per_rad), ("tau_J", arm.tau_J())):
            cols[name].append(value)
        scalar["filter_alpha"].append(out.filter_alpha)
        scalar["joint_use_friction"].append(int(out.use_friction))
        scalar["joint_reset_count"].append(out.reset_count)
        scalar["controller"].append(out.controller)
        arm.physics_step()
    frame: dict[str, np.ndarray] = {"seq": np.arange(n_ticks, dtype=np.int64), "t_s": np.arange(n_ticks) * 1e-3}
    names = {"q": "q", "dq": "dq", "tau_cmd": "tau_cmd", "q_target": "q_target",
             "q_target_filtered": "q_target_filtered", "K": "K_joint", "D": "D_joint", "tau_J": "tau_J"}
    for key, prefix in names.items():
        block = np.array(cols[key])
        for j in range(7):
            frame[f"{prefix}{j + 1}"] = block[:, j]
    for key, values in scalar.items():
        frame[key] = np.array(values)
    return frame


def joint_input(n_ticks: int, q0=HOME_Q, use_ema=True) -> ReplayInput:
    cfg = JointImpedanceConfig()
    return ReplayInput(
        controller="joint_impedance", q0=np.array(q0), dq0=np.zeros(7), tau_prev0=np.zeros(7),
        tau_history=np.zeros((0, 7)), sample_ticks=np.arange(n_ticks), n_ticks=n_ticks,
        q_target=target_trajectory(n_ticks, amplitude_rad=0.3, freq_hz=0.6), use_ema=use_ema,
        k_nm_per_rad=np.tile(cfg.k_nm_per_rad, (n_ticks, 1)), d_nms_per_rad=np.tile(cfg.d_nms_per_rad, (n_ticks, 1)),
        filter_alpha=np.full(n_ticks, cfg.filter_alpha),
    )


def distinct_params(count: int, seed: int = 7) -> np.ndarray:
    """(count, n) parameter vectors: FrankaTwin's 29 drawn inside their bounds, the groups
    beyond them (the payload) nominal."""
    bounds = DEFAULT_BOUNDS[list(LAYOUT.frankatwin_indices)]
    lo, hi = bounds[:, 0], bounds[:, 1]
    params = lo + np.random.default_rng(seed).uniform(0.05, 0.95, size=(count, 29)) * (hi - lo)
    params[:, 28] = np.arange(count) * 2 % 5  # delays 0, 2, 4, 1, ...
    return params_matrix(params)


def cartesian_frames_50hz(model, n_rows: int) -> dict:
    """A FrankaTwin-like 50 Hz log: the target circles around the home flange pose."""
    ref = replay_reference(joint_input(1), DynamicsParams.nominal(), model)
    pos0, quat0 = ref.ee_pos[0], ref.ee_quat_xyzw[0]
    t = np.arange(n_rows) / 50.0
    cols = {"t_s": t}
    for j in range(7):
        cols[f"q{j + 1}"] = np.full(n_rows, HOME_Q[j])
        cols[f"dq{j + 1}"] = np.zeros(n_rows)
    for a, name in enumerate(("tgt_px", "tgt_py", "tgt_pz")):
        cols[name] = pos0[a] + 0.03 * np.sin(2 * np.pi * 0.8 * t + a)
    for a, name in enumerate(("tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw")):
        cols[name] = np.full(n_rows, quat0[a])
    return cols
