"""SimFR3: one simulated FR3 stepped tick by tick, as the fr3_stack daemon's RT callback runs.

Used by the daemon's real-time loop and by the offline recorder: they add measurement noise
to `q`/`dq`, call `tick()` (controller) and then `physics_step()` (plant), or
`step_recorded()` for both. The physics and the control law are the same code the replay
engines use (plant.Plant, kernels.*).

One tick costs one MuJoCo split step: the controller's first call of a tick runs `mj_step1`
(position/velocity stages at the true state: `qfrc_bias` = C(q,dq)·dq and the flange pose),
`physics_step` runs `mj_step2`. The Coriolis feed-forward is therefore C at the simulated
true state, as in the replay engines (not at the noisy measured state: the difference is of
the order of the velocity noise times ∂C/∂dq, ~1e-4 N·m; `measured_coriolis=True` restores
the measured-state term at the cost of one more kinematics pass per tick). With a true payload
other than the configured load, the feed-forward is the firmware's: qfrc_bias with the
configured load's velocity-product torque in place of the payload's (Plant.feedforward,
load_dynamics.py). `control()` is `tick()` without
the TickOutput copies; `step_recorded()` is the recorders' hot loop,
`run_recorded()` many such ticks in one compiled call (arm_loop.py), `apply_command()` a
command between them, `run_commanded()` many ticks with their commands known up front (the
offline recorder's whole reference) in one compiled call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from .arm_model.controllers import JOINT_SLEW_NM_PER_TICK, JointImpedanceConfig, mat_to_quat_xyzw, slew_limit_inplace
from .kernels.arm_loop import (CMD_ALPHA, CMD_D, CMD_FRICTION, CMD_K, CMD_MODE, CMD_Q, COMMAND_WIDTH, ST_ALPHA, ST_ALPHA_Q,
                       ST_D, ST_FRICTION, ST_K, ST_KEEP, ST_MODE, ST_Q, ST_RESETS, STATE_WIDTH, run_commanded_ticks,
                       run_recorded_ticks, step_functions, take_command)
from .kernels.tick import add_joint_extras, arm_step, joint_impedance_tick, warm_up
from .arm_model.model import HOME_Q, load_model
from .arm_model.load import NO_LOAD, EndLoad
from .arm_model.params import DynamicsParams
from .arm_model.plant import Plant

CONTROLLER_IDLE = 0  # fr3_stack ControllerType enum (GravityCompensation)
CONTROLLER_CARTESIAN = 1
CONTROLLER_JOINT_IMPEDANCE = 2


@dataclass
class JointImpedanceCommand:
    """A jointImpedance command: pre-EMA target q [rad] (7,) and the full config it carries."""

    q_target: np.ndarray
    config: JointImpedanceConfig = field(default_factory=JointImpedanceConfig)

    def __post_init__(self) -> None:
        arr = np.asarray(self.q_target, dtype=np.float64).reshape(-1)
        if arr.shape != (7,):
            raise ValueError(f"qTarget: expected length 7, got {arr.size}")
        self.q_target = arr


@dataclass
class IdleCommand:
    """An idle command: gravity compensation only (the sim plant has no gravity, so τ = 0)."""

    use_friction: bool = False


def command_row(command, out: np.ndarray | None = None) -> np.ndarray:
    """A sim command as the compiled loop's row (arm_loop.COMMAND_WIDTH,), into `out` if given:
    controller, q_target, K, D, α, use_friction (an IdleCommand: controller 0, the rest zero)."""
    row = np.zeros(COMMAND_WIDTH) if out is None else out
    if isinstance(command, JointImpedanceCommand):
        cfg = command.config
        row[CMD_MODE] = CONTROLLER_JOINT_IMPEDANCE
        row[CMD_Q:CMD_Q + 7], row[CMD_K:CMD_K + 7], row[CMD_D:CMD_D + 7] = command.q_target, cfg.k_nm_per_rad, cfg.d_nms_per_rad
        row[CMD_ALPHA], row[CMD_FRICTION] = cfg.filter_alpha, float(cfg.use_friction)
    elif isinstance(command, IdleCommand):
        row[:] = 0.0
        row[CMD_MODE] = CONTROLLER_IDLE
    else:
        raise TypeError(f"unsupported command {type(command).__name__}")
    return row


@dataclass
class TickOutput:
    """Everything one CSV v2 row needs from the controller of one tick (arrays (7,))."""

    tau_cmd: np.ndarray  # after the 1 N·m/tick slew limiter [N·m]
    q_target: np.ndarray  # pre-EMA joint target [rad] (zeros unless joint impedance)
    q_target_filtered: np.ndarray  # this tick's EMA output [rad]
    k_nm_per_rad: np.ndarray
    d_nms_per_rad: np.ndarray
    filter_alpha: float
    use_friction: bool
    reset_count: int  # lifetime count of switches into joint impedance
    controller: int  # ControllerType enum: 0 idle, 2 joint impedance
    joint_target_valid: int  # 1 only under joint impedance


class SimFR3:
    """One simulated arm: plant (true params) plus fr3_stack's joint impedance controller state.

    `params`: the arm's true DynamicsParams; `model`: an MjModel from load_model (ours if
    None); `q0`: initial joint position [rad] (home if None), at rest, τ_prev = 0.
    `measured_coriolis`: evaluate C(q,dq)·dq at the measured state (as franka::Model::coriolis
    does on the robot) with an extra kinematics pass per tick, instead of the tick's mj_step1
    bias at the true state (the default; they differ only by the measurement noise's effect).
    The true payload is `params`' payload groups (`params.with_payload(EndLoad(...))`);
    `configured_load` is the load the firmware's gravity compensation assumes (none by default);
    `friction_law` the plant's friction law (plant.FRICTION_LAWS; FrankaTwin's Stribeck law by default).
    """

    def __init__(self, params: DynamicsParams, model: mujoco.MjModel | None = None, q0=None,
                 measured_coriolis: bool = False, configured_load: EndLoad = NO_LOAD,
                 friction_law: str = "stribeck"):
        self.params = params
        self.measured_coriolis = bool(measured_coriolis)
        model = load_model() if model is None else model
        q0 = HOME_Q if q0 is None else np.asarray(q0, dtype=np.float64)
        self.plant = Plant(model, params, q0, np.zeros(7), np.zeros(7), configured_load=configured_load,
                           friction_law=friction_law)
        if self.plant.linked:  # its compiled tick loops (arm_loop.py) carry no links' torque
            raise ValueError("SimFR3 simulates the model's links without load-dependent friction: "
                             "link_mass_scale must be 1 and coulomb_load_per_nm 0 (the population engine and "
                             "replay_reference replay other links)")
        warm_up()  # numba's one-time start-up here, not in the first tick of a real-time loop
        take_command(np.zeros(COMMAND_WIDTH), np.zeros(7), np.zeros(7), np.zeros(STATE_WIDTH))  # idle, on scratch: loads it
        self._scratch = mujoco.MjData(self.plant.model)
        self._bias = np.zeros(self.plant.model.nv)
        self.mode = CONTROLLER_IDLE
        self.config = JointImpedanceConfig()
        self.q_target = np.zeros(7)
        self.ema = np.zeros(7)
        self.reset_count = 0
        self.tau_prev = np.zeros(7)  # this tick's slew-limited command, updated in place
        self._keep = 1.0  # 1 − α of the active config
        self._alpha_target = np.zeros(7)  # α·q_target, formed once per command
        self._tau_prev_row = self.tau_prev.reshape(1, 7)  # the kernel's (1, 7) view
        self._zeros = np.zeros(7)
        self._tau_j = np.zeros(7)
        self._staged = False  # mj_step1 done for this tick
        d, dofs = self.plant.data, self.plant.dofs
        self._views = (d.qpos[self.plant.qadr], d.qvel[dofs], d.qfrc_bias[dofs], d.qfrc_applied[dofs],
                       d.qfrc_passive[dofs], d.qfrc_constraint[dofs]) \
            if isinstance(dofs, slice) and isinstance(self.plant.qadr, slice) else None  # live views

    @property
    def tau_cmd(self) -> np.ndarray:
        """The last tick's commanded torque after the slew limiter [N·m], (7,) (live buffer)."""
        return self.tau_prev

    @property
    def q(self) -> np.ndarray:
        """True joint position [rad], (7,)."""
        return self.plant.q

    @property
    def dq(self) -> np.ndarray:
        """True joint velocity [rad/s], (7,)."""
        return self.plant.dq

    @property
    def time_s(self) -> float:
        """Simulated time since start [s]."""
        return float(self.plant.data.time)

    def _kinematics_at(self, q, dq) -> mujoco.MjData:
        s, arm = self._scratch, self.plant.arm
        s.qpos[:] = self.plant.data.qpos
        s.qvel[:] = self.plant.data.qvel
        s.qpos[arm.qpos_adr] = q
        s.qvel[arm.dof_adr] = dq
        mujoco.mj_kinematics(self.plant.model, s)
        return s

    def coriolis(self, q, dq) -> np.ndarray:
        """C(q,dq)·dq [N·m] at a (measured) state, as franka::Model::coriolis, (7,).

        MuJoCo's recursive Newton-Euler without accelerations (gravity is off), the same
        function that fills qfrc_bias in the replay engines.
        """
        m, s = self.plant.model, self._kinematics_at(q, dq)
        mujoco.mj_comPos(m, s)
        mujoco.mj_comVel(m, s)
        mujoco.mj_rne(m, s, 0, self._bias)
        if self.plant.coriolis_loaded:  # the firmware's model: the configured load, not the payload
            return self.plant.feedforward(s, self._bias)[0].copy()
        return self._bias[self.plant.arm.dof_adr].copy()

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Flange pose at the true state: position [m] (3,), quaternion xyzw (4,), base frame."""
        s = self._kinematics_at(self.q, self.dq)
        site = self.plant.arm.ee_site
        return s.site_xpos[site].copy(), mat_to_quat_xyzw(s.site_xmat[site].reshape(3, 3))

    def tau_J(self) -> np.ndarray:
        """Link-side torque of the last step [N·m], (7,): delayed motor torque minus joint friction.

        It is what a link-side sensor of a gravity-free arm reads (the real tau_J also carries
        gravity, which this plant does not simulate); zeros before the first physics step.
        """
        return self._tau_j.copy()

    def measured(self, offsets: np.ndarray, out: np.ndarray) -> np.ndarray:
        """[q | dq | tau_J] (21,) at the true state plus `offsets` (21,), into `out` (21,)."""
        if self._views is None:
            np.add(np.concatenate([self.plant.q, self.plant.dq, self._tau_j]), offsets, out=out)
            return out
        qpos, qvel = self._views[0], self._views[1]
        np.add(qpos, offsets[0:7], out=out[0:7])
        np.add(qvel, offsets[7:14], out=out[7:14])
        np.add(self._tau_j, offsets[14:21], out=out[14:21])
        return out

    def _apply(self, command, q_meas: np.ndarray) -> None:
        if command is None:
            return
        state = self.controller_state()
        take_command(command_row(command), q_meas, self.ema, state)  # the one definition (arm_loop)
        self._set_controller_state(state, command.config if isinstance(command, JointImpedanceCommand) else None)

    def controller_state(self) -> np.ndarray:
        """The controller's state besides the EMA as a row (arm_loop.STATE_WIDTH,): mode, reset
        count, 1 − α, α, use_friction, q_target, α·q_target, K, D."""
        cfg = self.config
        return np.concatenate(([float(self.mode), float(self.reset_count), self._keep, cfg.filter_alpha,
                                float(cfg.use_friction)], self.q_target, self._alpha_target, cfg.k_nm_per_rad,
                               cfg.d_nms_per_rad))

    def _set_controller_state(self, state: np.ndarray, config: JointImpedanceConfig | None = None) -> None:
        """Take `state` (a row as controller_state's) back; `config`: the command's own object."""
        self.mode, self.reset_count = int(state[ST_MODE]), int(state[ST_RESETS])
        if self.mode == CONTROLLER_JOINT_IMPEDANCE:
            self.q_target = state[ST_Q:ST_Q + 7].copy()
            self.config = config if config is not None else JointImpedanceConfig(
                state[ST_K:ST_K + 7].copy(), state[ST_D:ST_D + 7].copy(), float(state[ST_ALPHA]),
                bool(state[ST_FRICTION]))
            self._keep = float(state[ST_KEEP])
            self._alpha_target = state[ST_ALPHA_Q:ST_ALPHA_Q + 7].copy()

    def control(self, q_meas: np.ndarray, dq_meas: np.ndarray, command=None) -> np.ndarray:
        """One controller tick (command → EMA → torque → slew) on measured q, dq (7,) float64.

        Returns the commanded torque [N·m] (7,): a live buffer, overwritten by the next tick.
        """
        if command is not None:
            self._apply(command, q_meas)
        self.stage()
        cor = self.coriolis(q_meas, dq_meas) if self.measured_coriolis else self._true_coriolis()
        if self.mode == CONTROLLER_JOINT_IMPEDANCE:
            cfg, ema = self.config, self.ema
            ema *= self._keep  # ema ← (1 − α)·ema + α·q_target
            ema += self._alpha_target
            joint_impedance_tick(q_meas.reshape(1, 7), dq_meas.reshape(1, 7), ema, cfg.k_nm_per_rad,
                                 cfg.d_nms_per_rad, cor.reshape(1, 7), cfg.use_friction, self._tau_prev_row)
        else:  # idle: a zero command through the slew limiter
            self._zeros.fill(0.0)
            slew_limit_inplace(self._zeros, self.tau_prev, JOINT_SLEW_NM_PER_TICK)
        return self.tau_prev

    def _true_coriolis(self) -> np.ndarray:
        """The firmware's Coriolis feed-forward at the true state (valid after stage()), (7,),
        without a copy where it can: the live qfrc_bias view, or the configured load's
        feed-forward buffer when the loads differ (Plant.coriolis chooses the same, copied)."""
        if self.plant.coriolis_loaded:
            return self.plant.feedforward()[0]
        return self._views[2] if self._views is not None else self.plant.coriolis()

    def stage(self) -> None:
        """This tick's mj_step1 (once per tick): qfrc_bias = C(q,dq)·dq and the flange pose at
        the true state. control() and physics_step() call it when needed."""
        if not self._staged:
            self.plant.begin_tick()
            self._staged = True

    def step_recorded(self, offsets: np.ndarray, measured: np.ndarray, tau_out: np.ndarray,
                      ema_out: np.ndarray, command=None) -> None:
        """A recorder's whole tick: `measured(offsets, measured)`, `control()` on the measured
        q, dq, the command into tau_out (7,) and the EMA (zeros when idle) into ema_out (7,),
        then `physics_step()`. Without a command (and with the Coriolis term at the true state)
        it is one compiled call (kernels.arm_step) between the two halves of the MuJoCo step."""
        if command is not None or self.measured_coriolis or self._views is None:
            meas = self.measured(offsets, measured)
            tau_out[:] = self.control(meas[0:7], meas[7:14], command)
            ema_out[:] = self.ema if self.mode == CONTROLLER_JOINT_IMPEDANCE else 0.0
            self.physics_step()
            return
        self.stage()
        plant, views, cfg = self.plant, self._views, self.config
        delay = plant.delay
        arm_step(views[0], views[1], self._tau_j, offsets, measured, self._true_coriolis(),
                 self.mode == CONTROLLER_JOINT_IMPEDANCE, self.ema, self._keep, self._alpha_target,
                 cfg.k_nm_per_rad, cfg.d_nms_per_rad, cfg.use_friction, self.tau_prev,
                 delay.ring, delay.tick, delay.delays, plant.friction.coef, views[3], tau_out, ema_out, delay.law)
        if plant.loaded:
            plant.add_load_torque(views[3].reshape(1, 7))
        if plant.extra:
            add_joint_extras(views[1].reshape(1, 7), plant.extras, views[3].reshape(1, 7))
        delay.tick += 1
        mujoco.mj_step2(plant.model, plant.data)
        self._staged = False
        self._store_link_torque()

    def apply_command(self, command, q_meas: np.ndarray) -> None:
        """A command as a tick's controller takes it before its law, on that tick's measured q
        (7,): a switch into joint impedance resets the EMA to q_meas and counts a reset; the
        target and config take effect. Then `run_recorded` runs the tick (as `step_recorded`
        with the command would)."""
        self._apply(command, np.asarray(q_meas, dtype=np.float64))

    def run_recorded(self, offsets: np.ndarray, measured: np.ndarray, tau_out: np.ndarray, ema_out: np.ndarray,
                     ee_pos_out: np.ndarray, ee_xmat_out: np.ndarray) -> None:
        """n = len(offsets) ticks of `step_recorded` without a command, each also storing the
        flange pose of its true state (position (3,), rotation matrix (9,) row-major) into
        ee_pos_out[i], ee_xmat_out[i]; offsets, measured (n, 21), tau_out, ema_out (n, 7) as
        step_recorded's per tick. One compiled call for all n (arm_loop.run_recorded_ticks, the
        same bits) when it can run; tick by tick otherwise."""
        functions = step_functions()
        if functions is None or self.measured_coriolis or self._views is None or self._staged:
            d, site = self.plant.data, self.plant.arm.ee_site
            for i in range(len(offsets)):
                self.stage()
                ee_pos_out[i], ee_xmat_out[i] = d.site_xpos[site], d.site_xmat[site]
                self.step_recorded(offsets[i], measured[i], tau_out[i], ema_out[i])
            return
        plant, views, cfg, d = self.plant, self._views, self.config, self.plant.data
        delay = plant.delay
        delay.tick = run_recorded_ticks(
            functions[0], functions[1], plant.model._address, d._address, offsets, measured, tau_out, ema_out,
            ee_pos_out, ee_xmat_out, views[0], views[1], self._tau_j, views[2], views[3], views[4], views[5],
            d.site_xpos[None], d.site_xmat[None], d.xanchor[None], d.xaxis[None], plant.arm.ee_site, plant._jnt_ids,
            self.mode == CONTROLLER_JOINT_IMPEDANCE, self.ema, self._keep, self._alpha_target, cfg.k_nm_per_rad,
            cfg.d_nms_per_rad, cfg.use_friction, self.tau_prev, delay.ring, delay.tick, delay.delays,
            plant.friction.coef, delay.law, plant.load, plant.loaded, plant.extras, plant.extra,
            plant.inertia_rows, plant._feedforward)

    def runs_compiled(self) -> bool:
        """Whether `run_commanded` (and `run_recorded` in one call) can run now: MuJoCo's step
        functions found, the Coriolis term at the true state, no tick half done."""
        return step_functions() is not None and not self.measured_coriolis and self._views is not None \
            and not self._staged

    def run_commanded(self, first_tick: int, cmd_ticks: np.ndarray, cmd_rows: np.ndarray, cursor: int, last: int,
                      states_out: np.ndarray, versions: np.ndarray, offsets: np.ndarray, measured: np.ndarray,
                      tau_out: np.ndarray, ema_out: np.ndarray, ee_pos_out: np.ndarray,
                      ee_xmat_out: np.ndarray) -> tuple[int, int] | None:
        """n = len(offsets) ticks numbered first_tick.. as `run_recorded`, with the commands
        cmd_rows (C, COMMAND_WIDTH) (`command_row`) due at cmd_ticks (C,) int64 taken at their
        ticks as `apply_command` takes them (latest wins), from index `cursor` on; all in one
        compiled call (arm_loop.run_commanded_ticks). states_out (C, STATE_WIDTH) ← each taken
        command's controller state, versions (n,) int64 ← the command in force per tick
        (`last` before the first one taken here). Returns the new (cursor, last), or None (nothing
        run) when the compiled loop cannot run (run tick by tick then)."""
        if not self.runs_compiled():
            return None
        functions, plant, views, d = step_functions(), self.plant, self._views, self.plant.data
        delay, state = plant.delay, self.controller_state()
        delay.tick, cursor, last = run_commanded_ticks(
            functions[0], functions[1], plant.model._address, d._address, first_tick, cmd_ticks, cmd_rows, cursor,
            last, state, states_out, versions, offsets, measured, tau_out, ema_out, ee_pos_out, ee_xmat_out,
            views[0], views[1], self._tau_j, views[2], views[3], views[4], views[5], d.site_xpos[None],
            d.site_xmat[None], d.xanchor[None], d.xaxis[None], plant.arm.ee_site, plant._jnt_ids, self.ema,
            self.tau_prev, delay.ring, delay.tick, delay.delays, plant.friction.coef, delay.law, plant.load,
            plant.loaded, plant.extras, plant.extra, plant.inertia_rows, plant._feedforward)
        self._set_controller_state(state)
        return cursor, last

    def tick(self, q_meas, dq_meas, command=None) -> TickOutput:
        """One controller tick in fr3_stack's order: command (reset on mode change) → EMA → torque → slew."""
        q_meas = np.asarray(q_meas, dtype=np.float64)
        dq_meas = np.asarray(dq_meas, dtype=np.float64)
        tau = self.control(q_meas, dq_meas, command)
        cfg = self.config
        joint = self.mode == CONTROLLER_JOINT_IMPEDANCE
        return TickOutput(
            tau_cmd=tau.copy(),
            q_target=self.q_target.copy() if joint else np.zeros(7),
            q_target_filtered=self.ema.copy() if joint else np.zeros(7),
            k_nm_per_rad=cfg.k_nm_per_rad.copy() if joint else np.zeros(7),
            d_nms_per_rad=cfg.d_nms_per_rad.copy() if joint else np.zeros(7),
            filter_alpha=cfg.filter_alpha if joint else 0.0,
            use_friction=cfg.use_friction if joint else False,
            reset_count=self.reset_count,
            controller=self.mode,
            joint_target_valid=int(joint),
        )

    def physics_step(self) -> None:
        """Advance the plant 1 ms with the delayed commanded torque of the last tick + friction."""
        self.stage()
        self.plant.end_tick(self._tau_prev_row)
        self._staged = False
        self._store_link_torque()

    def _store_link_torque(self) -> None:
        """tau_J of the step just taken, as Plant.link_torque: applied + passive + constraint."""
        if self._views is None:
            self._tau_j[:] = self.plant.link_torque()
        else:
            np.add(self._views[3], self._views[4], out=self._tau_j)
            self._tau_j += self._views[5]


__all__ = [
    "CONTROLLER_CARTESIAN",
    "CONTROLLER_IDLE",
    "CONTROLLER_JOINT_IMPEDANCE",
    "IdleCommand",
    "JointImpedanceCommand",
    "SimFR3",
    "TickOutput",
]
