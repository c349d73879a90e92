"""Plug-in controllers (`--controller module:callable`): a joint-target policy in Python, run
per episode on one simulated arm (`twinlake.sim.SimFR3`) under fr3_stack's joint impedance.

The interface. `module:callable` names a factory; it is called once per episode with the
episode's config dict and returns a controller object with two methods:

    reset(state: ControllerState) -> None      once, with the first state (tick 0)
    step(state: ControllerState) -> q_target   every 1 kHz tick: a (7,) joint target [rad]

`ControllerState` carries `tick`, `t_s`, the measured `q` [rad], `dq` [rad/s] (7,) and
`reference_rad` (7,), the campaign's reference target in force at that tick. The target goes
through the joint impedance with the episode's gains (EMA, K, D, slew limiter), exactly as a
client's `jointImpedance` command does. An exception raised by the factory, `reset` or `step`
ends that episode with outcome `controller_exception` (traceback in `failure`); a target that
is not 7 finite numbers ends it with `controller_nonfinite_output`. Either way the samples up
to that tick are kept and scored, and the campaign goes on.

A factory is imported (and a bad name reported) before any episode runs: `load_factory`.
SimFR3 simulates the model's links without load-dependent friction, so a fit that varies either
(`+links`, `+load-friction`) is refused before any episode too: `check_plugin_parameters`.
"""

from __future__ import annotations

import importlib
import time
import traceback
from dataclasses import dataclass

import numpy as np

from ..sim import DynamicsParams, JointImpedanceCommand, JointImpedanceConfig, SimFR3

from .outcome import CONTROLLER_EXCEPTION, CONTROLLER_NONFINITE


@dataclass
class ControllerState:
    """What a plug-in sees at one tick: tick index, time [s], measured q [rad], dq [rad/s] (7,),
    the reference target in force [rad] (7,)."""

    tick: int
    t_s: float
    q: np.ndarray
    dq: np.ndarray
    reference_rad: np.ndarray


class ReferenceFollower:
    """The simplest plug-in: send the campaign's reference (what the built-in path does);
    `twinlake.campaign.plugin:ReferenceFollower`."""

    def __init__(self, config: dict | None = None) -> None:
        self.config = config

    def reset(self, state: ControllerState) -> None:
        pass

    def step(self, state: ControllerState) -> np.ndarray:
        return state.reference_rad


def load_factory(spec: str):
    """The callable named by `module:callable`; ValueError saying what is wrong otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--controller {spec!r}: expected MODULE:CALLABLE (e.g. mypkg.policy:make)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001  any import failure is the user's to see
        raise ValueError(f"--controller {spec!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from None
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"--controller {spec!r}: module {module_name!r} has no attribute {attr!r}")
    if not callable(obj):
        raise ValueError(f"--controller {spec!r}: {attr!r} is not callable")
    return obj


@dataclass
class PluginRun:
    """One plug-in episode: (k, 7) arrays of the k ticks simulated, the failure (None if it ran
    to the end) and its outcome override (None: score decides)."""

    q_target: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    failure: dict | None
    outcome: str | None
    controller_s: float


LINK_GROUPS = ("link_mass_scale", "coulomb_load_per_nm")
"""Parameter groups SimFR3 holds at the model's value (1 and 0: sim/arm_model/links.py)."""


def check_plugin_parameters(distribution, fit_vector: np.ndarray) -> None:
    """ValueError naming the parameters a plug-in episode cannot simulate: link mass scales other
    than 1 or load-dependent friction other than 0, at the fit or in any draw of `distribution`
    (a sampling.ParameterDistribution)."""
    from ..sim.arm_model.params import LAYOUT

    joint = set(distribution.joint.indices) if distribution.joint is not None else set()
    bad = []
    for group in LINK_GROUPS:
        for i in LAYOUT.select(group):
            m = distribution.marginals[i]
            varies = i in joint or m.kind != "fixed"
            if varies or fit_vector[i] != LAYOUT.nominal[i] or m.value != LAYOUT.nominal[i]:
                bad.append(LAYOUT.names[i])
    if bad:
        raise ValueError(f"--controller: plug-in episodes run on SimFR3, which simulates the model's links "
                         f"without load-dependent friction; this fit sets or varies {', '.join(bad[:4])}"
                         f"{' …' if len(bad) > 4 else ''} (+links / +load-friction): run the campaign with the "
                         "built-in joint impedance (no --controller), which replays them")


def _fail(category: str, tick: int, message: str | None = None) -> dict:
    return {"category": category, "tick": int(tick), "t_s": tick * 1e-3,
            "traceback": message if message is not None else traceback.format_exc()}


def run_plugin_episode(factory, config: dict, params: np.ndarray, reference_ticks: np.ndarray,
                       gains, model=None) -> PluginRun:
    """Simulate one episode of `factory`'s controller on the arm `params` (n,) for the (T, 7)
    reference ticks; gains a GainSet."""
    n = reference_ticks.shape[0]
    q_log, dq_log, tau_log, tgt_log = (np.full((n, 7), np.nan) for _ in range(4))
    sim = SimFR3(DynamicsParams.from_vector(params), model=model, q0=reference_ticks[0])
    cfg = JointImpedanceConfig(np.array(gains.kp_nm_per_rad), np.array(gains.kd_nms_per_rad), gains.filter_alpha, False)
    ctrl_s, failure, outcome, k = 0.0, None, None, 0
    try:
        started = time.perf_counter()
        controller = factory(config)
        controller.reset(ControllerState(0, 0.0, sim.q.copy(), sim.dq.copy(), reference_ticks[0].copy()))
        ctrl_s += time.perf_counter() - started
    except Exception:  # noqa: BLE001  the plug-in's failure is the episode's outcome
        return PluginRun(tgt_log[:0], q_log[:0], dq_log[:0], tau_log[:0], _fail(CONTROLLER_EXCEPTION, 0),
                         CONTROLLER_EXCEPTION, ctrl_s)
    for k in range(n):
        q, dq = sim.q.copy(), sim.dq.copy()
        started = time.perf_counter()
        try:
            target = controller.step(ControllerState(k, k * 1e-3, q, dq, reference_ticks[k].copy()))
        except Exception:  # noqa: BLE001
            failure, outcome = _fail(CONTROLLER_EXCEPTION, k), CONTROLLER_EXCEPTION
            break
        ctrl_s += time.perf_counter() - started
        try:
            target = np.asarray(target, dtype=np.float64).reshape(7)
        except (TypeError, ValueError) as exc:
            failure, outcome = _fail(CONTROLLER_NONFINITE, k, f"step returned {type(target).__name__}: {exc}"), CONTROLLER_NONFINITE
            break
        if not np.isfinite(target).all():
            failure = _fail(CONTROLLER_NONFINITE, k, f"step returned a non-finite target {target.tolist()}")
            outcome = CONTROLLER_NONFINITE
            break
        q_log[k], dq_log[k], tgt_log[k] = q, dq, target
        tau_log[k] = sim.control(q, dq, JointImpedanceCommand(target, cfg))
        sim.physics_step()
    else:
        k = n
    return PluginRun(tgt_log[:k], q_log[:k], dq_log[:k], tau_log[:k], failure, outcome, ctrl_s)


__all__ = ["LINK_GROUPS", "ControllerState", "PluginRun", "ReferenceFollower", "check_plugin_parameters", "load_factory",
           "run_plugin_episode"]
