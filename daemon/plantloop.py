"""One tick of the simulated robot as the daemon and the offline recorder both run it.

`RobotTicker` wraps `twinlake.sim.SimFR3` with measurement noise and fills a CSV v2 frame:
measure (true state + noise) → `SimFR3.control` (pending command, EMA, torque, slew) →
`physics_step` → frame. The EE pose is the flange pose at the tick's true state, read from
the plant's position stage of this step (mj_step1, which also gives the Coriolis term), so it
costs nothing.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..sim import DynamicsParams, IdleCommand, JointImpedanceCommand, JointImpedanceConfig, SimFR3
from ..sim.arm import command_row
from ..sim.kernels.arm_loop import COMMAND_WIDTH, STATE_WIDTH, ST_ALPHA, ST_D, ST_FRICTION, ST_K, ST_MODE, ST_Q, ST_RESETS

from . import csv_v2 as C
from .noise import NoiseConfig, NoiseSource
from .wire import CONTROLLER_IDLE, CONTROLLER_JOINT, DecodedCommand
from .wire import IdleCommand as WireIdle
from .wire import JointImpedanceCommand as WireJoint

TICK_S = 0.001
_EE_POS = slice(C.EE_POSE.start, C.EE_POSE.start + 3)
_EE_QUAT = slice(C.EE_POSE.start + 3, C.EE_POSE.stop)
_CONTROLLER, _VALID, _ALPHA = C.CONTROLLER.start, C.JOINT_TARGET_VALID.start, C.FILTER_ALPHA.start
_FRICTION, _RESETS = C.JOINT_USE_FRICTION.start, C.JOINT_RESET_COUNT.start
_ROBOT_TIME, _PERIOD = C.ROBOT_TIME_S.start, C.CONTROL_PERIOD_S.start


def quat_xyzw_from_mat(mat: np.ndarray) -> np.ndarray:
    """A rotation matrix (9,) or (3, 3) → unit quaternion (4,) xyzw with w ≥ 0."""
    wxyz = np.empty(4)
    mujoco.mju_mat2Quat(wxyz, np.ascontiguousarray(mat, dtype=np.float64).reshape(9))
    if wxyz[0] < 0:
        wxyz = -wxyz
    return wxyz[[1, 2, 3, 0]]


def quat_xyzw_from_mats(mats: np.ndarray) -> np.ndarray:
    """Rotation matrices (n, 9) → quaternions (n, 4) xyzw, w ≥ 0, vectorised (Shepperd)."""
    m = np.asarray(mats, dtype=np.float64).reshape(-1, 3, 3)
    diag = np.stack([m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], axis=1)
    tr = diag.sum(axis=1)
    cand = np.stack([1 + tr, 1 + 2 * diag[:, 0] - tr, 1 + 2 * diag[:, 1] - tr, 1 + 2 * diag[:, 2] - tr], axis=1)
    pick = np.argmax(cand, axis=1)  # the largest component is computed from the diagonal
    s = 2 * np.sqrt(np.maximum(cand[np.arange(len(m)), pick], 1e-300))
    w = np.empty(len(m)); x = np.empty(len(m)); y = np.empty(len(m)); z = np.empty(len(m))  # noqa: E702
    r = lambda i, j: m[:, i, j]  # noqa: E731
    for k, (ww, xx, yy, zz) in enumerate((
        (s / 4, (r(2, 1) - r(1, 2)) / s, (r(0, 2) - r(2, 0)) / s, (r(1, 0) - r(0, 1)) / s),
        ((r(2, 1) - r(1, 2)) / s, s / 4, (r(0, 1) + r(1, 0)) / s, (r(0, 2) + r(2, 0)) / s),
        ((r(0, 2) - r(2, 0)) / s, (r(0, 1) + r(1, 0)) / s, s / 4, (r(1, 2) + r(2, 1)) / s),
        ((r(1, 0) - r(0, 1)) / s, (r(0, 2) + r(2, 0)) / s, (r(1, 2) + r(2, 1)) / s, s / 4),
    )):
        sel = pick == k
        w[sel], x[sel], y[sel], z[sel] = ww[sel], xx[sel], yy[sel], zz[sel]
    q = np.stack([x, y, z, w], axis=1)
    q *= np.where(q[:, 3:4] < 0, -1.0, 1.0)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def sim_command(config):
    """A command's config (`wire.JointImpedanceCommand` or `wire.IdleCommand`) → the sim's
    command object (None for anything else).

    The one mapping from fr3_stack's command semantics to the plant, shared by the daemon (its
    decoded wire frames, `to_sim_command`) and the offline recorder (reference rows, which
    never touch the wire encoding)."""
    if isinstance(config, WireJoint):
        return JointImpedanceCommand(config.q_target, JointImpedanceConfig(config.k_joint, config.d_joint,
                                                                           config.filter_alpha, config.use_friction))
    if isinstance(config, WireIdle):
        return IdleCommand(config.use_friction)
    return None


def to_sim_command(cmd: DecodedCommand):
    """A decoded wire command → the sim's command object (None for controllers we lack)."""
    if (cmd.controller == CONTROLLER_JOINT and isinstance(cmd.config, WireJoint)) or \
            (cmd.controller == CONTROLLER_IDLE and isinstance(cmd.config, WireIdle)):
        return sim_command(cmd.config)
    return None


class CommandTable:
    """Commands known up front (the offline recorder's reference): sim commands (C,) due at
    ticks (C,) int64, ascending, as rows (C, COMMAND_WIDTH) (`arm.command_row`); `cursor` the
    next not yet taken, `last` the one in force (−1: none), `states` (C, STATE_WIDTH) each
    taken command's controller state."""

    def __init__(self, ticks, commands) -> None:
        self.ticks = np.ascontiguousarray(ticks, dtype=np.int64)
        if self.ticks.shape != (len(commands),) or np.any(np.diff(self.ticks) < 0):
            raise ValueError(f"CommandTable: expected ascending ticks, one per command ({len(commands)}), "
                             f"got shape {self.ticks.shape}")
        self.rows = np.zeros((len(commands), COMMAND_WIDTH))
        for command, row in zip(commands, self.rows):
            command_row(command, row)
        self.states = np.zeros((len(self.ticks), STATE_WIDTH))
        self.cursor, self.last = 0, -1


_MEAS = slice(C.Q.start, C.TAU_J.stop)  # q | dq | tau_J: 21 contiguous columns
_TAU_CMD, _Q_FILTERED = C.TAU_CMD, C.Q_TARGET_FILTERED
assert C.DQ.start == C.Q.stop and C.TAU_J.start == C.DQ.stop
# columns that change only when a command arrives (the config block of a frame)
CONFIG_COLUMNS = np.r_[_CONTROLLER, _VALID, C.Q_TARGET.start:C.Q_TARGET.stop, C.K_JOINT.start:C.D_JOINT.stop,
                       _ALPHA, _FRICTION, _RESETS]


def config_columns(states: np.ndarray) -> np.ndarray:
    """Controller states (n, STATE_WIDTH) (`SimFR3.controller_state`) → a frame's config columns
    (n, len(CONFIG_COLUMNS)) in CONFIG_COLUMNS order: controller, joint_target_valid, q_target,
    K_joint, D_joint, filter_alpha, joint_use_friction, joint_reset_count; all but the controller
    zero unless joint impedance (fr3_stack ring_log_writer: the appended block is valid only then)."""
    states = np.asarray(states, dtype=np.float64)
    joint = states[:, ST_MODE] == CONTROLLER_JOINT
    out = np.zeros((len(states), len(CONFIG_COLUMNS)))
    out[:, 0] = states[:, ST_MODE]
    out[:, 1] = joint
    out[:, 2:9] = states[:, ST_Q:ST_Q + 7]
    out[:, 9:16] = states[:, ST_K:ST_K + 7]
    out[:, 16:23] = states[:, ST_D:ST_D + 7]
    out[:, 23], out[:, 24], out[:, 25] = states[:, ST_ALPHA], states[:, ST_FRICTION], states[:, ST_RESETS]
    out[~joint, 1:] = 0.0
    return out


class RobotTicker:
    """The plant (true params) + controller + noise; `step(command)` fills `self.frame`.

    `advance()` is the hot path both use: it writes only the columns that change every tick;
    the config columns (`CONFIG_COLUMNS`) are in `config_row`, renewed (and `config_version`
    incremented) whenever a command arrives.
    """

    def __init__(self, params: DynamicsParams, noise: NoiseConfig, seed: int, q0=None,
                 measured_coriolis: bool = False, configured_load=None, friction_law: str = "stribeck") -> None:
        # measured_coriolis: C(q,dq)·dq at the measured (noisy) state, as the real daemon's
        # franka::Model::coriolis in fr3_stack's control loop; costs one more kinematics pass (~18 µs) a tick.
        # The real-time daemon uses it; the offline recorder keeps the true state (differs by
        # ~1e-4 N·m, far below the torque noise) to run faster than real time.
        # params carry the true payload; configured_load (an EndLoad, none if None) is the load the
        # firmware's gravity compensation assumes (Desk / setLoad); friction_law the true plant's
        # (twinlake.sim.arm_model.plant.FRICTION_LAWS)
        self.sim = SimFR3(params, q0=q0, measured_coriolis=measured_coriolis, friction_law=friction_law,
                          **({} if configured_load is None else {"configured_load": configured_load}))
        self.noise = NoiseSource(noise, seed)
        self.frame = C.empty_frames(1)[0]
        self.tick_index = 0
        self.q_meas = self.sim.q
        self.dq_meas = self.sim.dq
        self._data = self.sim.plant.data
        self._site = self.sim.plant.arm.ee_site
        # live views of the flange pose rows of MjData (its buffers never move)
        self._ee_xpos, self._ee_xmat = self._data.site_xpos[self._site], self._data.site_xmat[self._site]
        self.config_row = C.empty_frames(1)[0]
        self.config_version = 0
        self._refresh_config()

    def _refresh_config(self) -> None:
        self.config_row[CONFIG_COLUMNS] = config_columns(self.sim.controller_state()[None])[0]
        self.config_version += 1

    def advance(self, command, row: np.ndarray, ee_xmat_out: np.ndarray) -> None:
        """One 1 ms tick: measure (true state + noise) → control → physics.

        Writes q, dq, tau_J (measured), tau_cmd, EE position and q_target_filtered into the
        80-value `row` and the EE rotation matrix (9,) into `ee_xmat_out`; other columns untouched.
        """
        sim = self.sim
        sim.stage()  # mj_step1: the flange pose of the tick's true state
        row[_EE_POS] = self._ee_xpos
        ee_xmat_out[:] = self._ee_xmat
        sim.step_recorded(self.noise.next_row(), row[_MEAS], row[_TAU_CMD], row[_Q_FILTERED], command)
        if command is not None:
            self._refresh_config()

    def take_command(self, command, offsets: np.ndarray) -> None:
        """A command taken at the start of the next tick, whose noise row is `offsets` (21,):
        applied on that tick's measured q (true q + noise) as `advance(command, ...)` applies
        it, the config columns renewed. `advance_many` then runs the tick."""
        self.sim.apply_command(command, self.sim.q + offsets[0:7])
        self._refresh_config()

    def advance_many(self, offsets: np.ndarray, rows: np.ndarray, ee_xmats_out: np.ndarray) -> None:
        """len(offsets) ticks of `advance` without commands, the noise rows given (n, 21): the
        same columns into rows (n, 80) and the EE rotation matrices into ee_xmats_out (n, 9),
        in one compiled call (SimFR3.run_recorded)."""
        self.sim.run_recorded(offsets, rows[:, _MEAS], rows[:, _TAU_CMD], rows[:, _Q_FILTERED], rows[:, _EE_POS],
                              ee_xmats_out)

    def advance_commanded(self, first_tick: int, commands: "CommandTable", offsets: np.ndarray, rows: np.ndarray,
                          ee_xmats_out: np.ndarray, versions: np.ndarray) -> bool:
        """len(offsets) ticks of `advance` numbered first_tick.., each taking its due command of
        `commands` as `advance(command, ...)` would, in one compiled call (SimFR3.run_commanded):
        the same columns into rows (n, 80), the EE rotation matrices into ee_xmats_out (n, 9),
        the command in force per tick into versions (n,) (an index into commands.states, whose
        config columns are `config_columns(commands.states)`). False (nothing run) when the
        compiled loop cannot run."""
        done = self.sim.run_commanded(first_tick, commands.ticks, commands.rows, commands.cursor, commands.last,
                                      commands.states, versions, offsets, rows[:, _MEAS], rows[:, _TAU_CMD],
                                      rows[:, _Q_FILTERED], rows[:, _EE_POS], ee_xmats_out)
        if done is None:
            return False
        commands.cursor, commands.last = done
        return True

    def step(self, command=None, control_period_s: float = TICK_S, out: np.ndarray | None = None,
             ee_xmat_out: np.ndarray | None = None) -> np.ndarray:
        """Run one 1 ms tick with an optional sim command and fill a frame (seq/t_s unset).

        `out`: the 80-value row to fill (default `self.frame`). With `ee_xmat_out` (9,) the EE
        rotation matrix is stored there and the quaternion columns are left for the caller to
        fill in batch (`quat_xyzw_from_mats`).
        """
        f = self.frame if out is None else out
        xmat = np.empty(9) if ee_xmat_out is None else ee_xmat_out
        self.advance(command, f, xmat)
        self.q_meas, self.dq_meas, self.tau_j_meas = f[C.Q].copy(), f[C.DQ].copy(), f[C.TAU_J].copy()
        f[CONFIG_COLUMNS] = self.config_row[CONFIG_COLUMNS]
        if ee_xmat_out is None:
            f[_EE_QUAT] = quat_xyzw_from_mat(xmat)
        f[_ROBOT_TIME] = self.tick_index * TICK_S
        f[_PERIOD] = control_period_s
        self.tick_index += 1
        return f

    @property
    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """EE position [m] (3,) and quaternion xyzw (4,) of the last frame."""
        return self.frame[_EE_POS].copy(), self.frame[_EE_QUAT].copy()
