"""The compiled loop (the tick as MuJoCo's control callback) against the per-tick loop."""

import ctypes

import mujoco
import numpy as np
import pytest

from sim_recording import cartesian_frames_50hz, distinct_params, joint_input
from twinlake.sim import CartesianGains, DynamicsParams, PopulationEngine, ReplayInput, load_model, replay_reference
from twinlake.sim.kernels import callback
from twinlake.sim.arm_model.model import FR3_MODEL_PATH, HOME_Q, arm_index


def both_loops(model, inputs, nthread=2):
    compiled = PopulationEngine(inputs, model=model, nthread=nthread)
    per_tick = PopulationEngine(inputs, model=model, nthread=nthread, compiled_loop=False)
    return compiled, per_tick


@pytest.mark.parametrize("use_ema", [True, False])
def test_compiled_loop_equals_the_per_tick_loop_bit_for_bit(model, use_ema):
    inp = joint_input(1500, use_ema=use_ema)
    inp.use_friction = np.arange(1500) % 700 < 350  # friction compensation on and off
    inp.tau_history = np.linspace(-1.0, 1.0, 4 * 7).reshape(4, 7)  # commands before tick 0
    params = distinct_params(5)  # delays 0, 2, 4, 1, 3
    compiled, per_tick = both_loops(model, [inp])
    assert compiled.compiled_loop_error is None and per_tick.compiled_loop_error == "turned off"
    fast, slow = compiled.run(params)[0], per_tick.run(params)[0]
    for name in ("q", "dq", "tau_cmd"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    assert np.abs(fast.q[:, -1] - fast.q[0, -1]).max() > 1e-4  # distinct candidates moved apart
    ref = replay_reference(inp, DynamicsParams.from_vector(params[2]), model)
    assert np.abs(fast.q[2] - ref.q).max() <= 1e-9


def test_compiled_errors_equal_the_per_tick_errors_and_the_engine_is_reusable(model):
    inputs = [joint_input(800), joint_input(300, use_ema=False)]
    for inp in inputs:
        inp.q_ref, inp.dq_ref = inp.q_target + 0.01, np.full((inp.n_ticks, 7), 0.05)
    params = distinct_params(6, seed=3)
    compiled, per_tick = both_loops(model, inputs)
    first = compiled.mean_square_errors(params, 1e-3, 1e-2)
    assert first.shape == (6, 2, 2)
    np.testing.assert_array_equal(first, per_tick.mean_square_errors(params, 1e-3, 1e-2))
    assert np.isfinite(first).all() and np.ptp(first[:, 0, 0]) > 0
    np.testing.assert_array_equal(compiled.mean_square_errors(params[::-1], 1e-3, 1e-2), first[::-1])


def test_a_model_without_userdata_keeps_the_per_tick_loop(model):
    spec = mujoco.MjSpec.from_file(str(FR3_MODEL_PATH))
    bare = spec.compile()  # not through load_model: no userdata slots, gravity on
    assert bare.nuserdata == 0
    assert "nuserdata 0" in callback.compiled_loop_error(bare)
    inp = joint_input(200)
    params = distinct_params(2)
    engine = PopulationEngine([inp], model=bare, nthread=1)
    got = engine.run(params)[0]
    want = PopulationEngine([inp], model=bare, nthread=1, compiled_loop=False).run(params)[0]
    np.testing.assert_array_equal(got.q, want.q)


def test_another_installed_callback_is_left_in_place_and_the_result_is_unchanged(model):
    calls = []
    foreign = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(lambda m, d: calls.append(1))
    inp = joint_input(100)
    params = distinct_params(2)
    want = PopulationEngine([inp], model=model, nthread=1, compiled_loop=False).run(params)[0]
    mujoco.set_mjcb_control(foreign)
    try:
        with callback.installed() as ours:
            assert not ours and mujoco.get_mjcb_control() is foreign
        got = PopulationEngine([inp], model=model, nthread=1).run(params)[0]
        assert mujoco.get_mjcb_control() is foreign
    finally:
        mujoco.set_mjcb_control(None)
    np.testing.assert_array_equal(got.q, want.q)
    assert len(calls) >= 2 * 100  # the foreign callback ran on every step of the per-tick loop


def test_installs_nest_and_other_simulations_are_left_alone(model):
    data, plain = mujoco.MjData(model), mujoco.MjData(model)
    for d in (data, plain):
        d.qpos[arm_index(model).qpos_adr] = HOME_Q
        d.qvel[:] = 0.3
        d.qfrc_applied[:] = 0.5
    with callback.installed() as outer:
        assert outer
        with callback.installed() as inner:
            assert inner
        assert mujoco.get_mjcb_control() is not None  # still installed for the outer user
        for _ in range(20):
            mujoco.mj_step(model, data)  # userdata without the magic: the callback does nothing
    assert mujoco.get_mjcb_control() is None
    other = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(lambda m, d: None)
    try:
        with callback.installed():
            mujoco.set_mjcb_control(other)  # a user's callback installed meanwhile is not removed
        assert mujoco.get_mjcb_control() is other
    finally:
        mujoco.set_mjcb_control(None)
    for _ in range(20):
        mujoco.mj_step(model, plain)
    np.testing.assert_array_equal(data.qpos, plain.qpos)
    np.testing.assert_array_equal(data.qfrc_applied, plain.qfrc_applied)


def test_replay_context_checks_its_arrays():
    good = dict(springs=np.zeros((3, 7)), table=np.zeros((3, 30)), sample_of_tick=np.zeros(3, dtype=np.int64),
                tau_prev=np.zeros((2, 7)), ring=np.zeros((1, 2, 7)), delays=np.zeros((2, 7), dtype=np.int64),
                neg_breakaway=np.zeros((2, 7)), qpos_adr=np.arange(7), dof_adr=np.arange(7),
                outputs=tuple(np.zeros((3, 2, 7)) for _ in range(3)))
    context = callback.ReplayContext(**good)
    rows = context.userdata_rows()
    assert rows.shape == (2, callback.USERDATA_SLOTS) and int(rows[0, 1]) == context.address_table.ctypes.data
    with pytest.raises(ValueError, match="ReplayContext.delays: expected a C-contiguous int64"):
        callback.ReplayContext(**{**good, "delays": np.zeros((2, 7))})
    with pytest.raises(ValueError, match=r"ReplayContext.delays: expected shape \(2, 7\), got \(2,\)"):
        callback.ReplayContext(**{**good, "delays": np.zeros(2, dtype=np.int64)})  # one delay per joint


def test_cartesian_compiled_loop_agrees_with_the_numpy_law_to_round_off(model):
    inp = ReplayInput.from_frames(cartesian_frames_50hz(model, 41), controller="cartesian_impedance",
                                  time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20)
    inp.q_ref, inp.dq_ref = np.tile(HOME_Q, (inp.n_samples, 1)), np.zeros((inp.n_samples, 7))
    params = distinct_params(4)
    compiled, per_tick = both_loops(model, [inp])
    fast, slow = compiled.run(params)[0], per_tick.run(params)[0]
    assert np.abs(fast.q - slow.q).max() <= 1e-9 and np.abs(fast.dq - slow.dq).max() <= 1e-7
    assert np.abs(fast.tau_cmd - slow.tau_cmd).max() <= 1e-6
    assert np.abs(fast.q[:, -1] - HOME_Q).max() > 1e-3  # the arm followed the moving target
    errors = compiled.mean_square_errors(params, 1e-3, 1e-2)
    np.testing.assert_allclose(errors, per_tick.mean_square_errors(params, 1e-3, 1e-2), rtol=1e-6)
    gentle = ReplayInput.from_frames(cartesian_frames_50hz(model, 41), controller="cartesian_impedance",
                                     time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20,
                                     cartesian=CartesianGains(max_torque_rate_nm_s=0.0, use_coriolis=False))
    a, b = both_loops(model, [gentle])
    assert np.abs(a.run(params)[0].q - b.run(params)[0].q).max() <= 1e-9  # no slew limiter, no Coriolis


def test_a_user_model_with_shifted_addresses_runs_the_compiled_loop(tmp_path):
    extra = ('<worldbody><body name="cart" pos="1 0 0"><joint name="slide_x" type="slide"/>'
             '<geom type="sphere" size="0.1" mass="1"/><site name="marker"/></body>')
    path = tmp_path / "user.xml"
    path.write_text(FR3_MODEL_PATH.read_text().replace("<worldbody>", extra, 1))
    user = load_model(path)
    arm = arm_index(user)
    assert arm.qpos_adr[0] == 1 and arm.ee_site == 1  # the slide joint and its site come first
    assert callback.compiled_loop_error(user) is None
    joint = joint_input(300)
    cart = ReplayInput.from_frames(cartesian_frames_50hz(user, 9), controller="cartesian_impedance",
                                   time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20)
    params = distinct_params(3)
    compiled, per_tick = both_loops(user, [joint, cart])
    fast, slow = compiled.run(params), per_tick.run(params)
    np.testing.assert_array_equal(fast[0].q, slow[0].q)
    assert np.abs(fast[1].q - slow[1].q).max() <= 1e-9
    assert np.abs(fast[1].q[:, -1] - fast[1].q[:, 0]).max() > 1e-4


def test_two_engines_replaying_at_once_share_the_callback(model):
    from concurrent.futures import ThreadPoolExecutor

    inputs = [joint_input(400), joint_input(600, use_ema=False)]
    params = [distinct_params(3, seed=1), distinct_params(4, seed=2)]
    engines = [PopulationEngine([inp], model=model, nthread=1) for inp in inputs]
    alone = [e.run(p)[0].q for e, p in zip(engines, params)]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda i: engines[i].run(params[i])[0].q, [0, 1, 0, 1]))
    for i, q in enumerate(together):
        np.testing.assert_array_equal(q, alone[i % 2])
    assert mujoco.get_mjcb_control() is None


@pytest.mark.parametrize("compiled_loop", [True, False])
def test_either_loop_writes_exactly_the_sample_ticks(model, compiled_loop):
    every = joint_input(300)
    some = joint_input(300)
    some.sample_ticks = np.arange(0, 300, 7)
    some.q_ref, some.dq_ref = every.q_target[some.sample_ticks] + 0.01, np.full((len(some.sample_ticks), 7), 0.05)
    params = distinct_params(3)
    full = PopulationEngine([every], model=model, nthread=1, compiled_loop=compiled_loop).run(params)[0]
    engine = PopulationEngine([some], model=model, nthread=1, compiled_loop=compiled_loop)
    part = engine.run(params)[0]
    assert part.q.shape == (3, len(some.sample_ticks), 7)
    for name in ("q", "dq", "tau_cmd"):
        np.testing.assert_array_equal(getattr(part, name), getattr(full, name)[:, some.sample_ticks])
    errors = engine.mean_square_errors(params, 1e-3, 1e-2)
    want = np.mean(((part.q - some.q_ref[None]) / 1e-3) ** 2, axis=(1, 2))
    np.testing.assert_allclose(errors[:, 0, 0], want, rtol=1e-12)


def test_a_fresh_process_loads_the_compiled_callback_from_numba_s_cache():
    """The cfunc is compiled once per machine, not per process (a Ray actor, a CLI run)."""
    import subprocess
    import sys

    callback._callback()  # compiled (and saved) here, or loaded
    probe = "from twinlake.sim.kernels import callback; print(callback._callback()._cache_hits)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "1"


def test_the_cache_key_covers_every_sim_module_the_callback_inlines():
    """numba stamps a cached function with its own file only: every sim module the body
    imports from, directly or through another, is hashed into the closure digest its cache is
    keyed on."""
    import ast
    from pathlib import Path

    from twinlake.contracts.kernel_cache import source_closure
    from twinlake.sim.kernels import _callback_body

    start = Path(_callback_body.__file__).resolve()
    sim = start.parents[1]
    reached, todo = set(), [start]
    while todo:  # every sim module reached by relative imports, at any level, read here on its own
        path = todo.pop()
        reached.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and node.module:
                base = path.parent.parents[node.level - 2] if node.level > 1 else path.parent
                target = base.joinpath(*node.module.split(".")).with_suffix(".py")
                if target.is_file() and sim in target.parents and target not in reached:
                    todo.append(target)
    assert {sim / "fr3.py", sim / "kernels" / "tick.py"} <= reached
    assert reached <= set(source_closure(start))
    control = callback._callback()
    cells = [c.cell_contents for c in control._pyfunc.__closure__]
    assert _callback_body.source_digest() in cells
