import numpy as np
import pyarrow as pa
import pytest

from sim_recording import cartesian_frames_50hz, distinct_params, joint_input, record_synthetic
from twinlake.sim import (
    DEMO_PROFILE_PATH,
    HOME_Q,
    CartesianGains,
    DynamicsParams,
    PopulationEngine,
    ReplayInput,
    load_params,
    replay_reference,
)
from twinlake.sim.arm_model.plant import DelayLine


def test_delay_line_returns_history_then_commands_delay_ticks_later():
    history = np.arange(1.0, 5.0)[:, None] * np.ones(7)  # ticks −4..−1 hold 1, 2, 3, 4
    line = DelayLine(np.array([0, 2, 4]), tau_prev0=np.full(7, -1.0), history=history)
    got = [line.push(np.full((3, 7), 10.0 + k))[:, 0].copy() for k in range(6)]
    np.testing.assert_array_equal([g[0] for g in got], [10, 11, 12, 13, 14, 15])
    np.testing.assert_array_equal([g[1] for g in got], [3, 4, 10, 11, 12, 13])
    np.testing.assert_array_equal([g[2] for g in got], [1, 2, 3, 4, 10, 11])
    short = DelayLine(np.array([3]), tau_prev0=np.full(7, -1.0), history=None)
    assert [short.push(np.full((1, 7), 5.0))[0, 0] for _ in range(4)] == [-1, -1, -1, 5]


def test_population_engine_agrees_with_reference_over_10_s_with_distinct_delays(model):
    inp = joint_input(10_000)
    params = distinct_params(3)
    engine = PopulationEngine([inp], model=model, nthread=2)
    pop = engine.run(params)[0]
    assert pop.q.shape == (3, 10_000, 7) and pop.dq.shape == (3, 10_000, 7)
    finals = []
    for i in range(3):
        ref = replay_reference(inp, DynamicsParams.from_vector(params[i]), model)
        assert np.abs(pop.q[i] - ref.q).max() <= 1e-9
        assert np.abs(pop.dq[i] - ref.dq).max() <= 1e-7
        finals.append(ref.q[-1])
    # distinct parameters really give distinct motion (the check above is not vacuous)
    assert np.abs(finals[0] - finals[1]).max() > 1e-4


def test_engines_agree_with_ema_bypassed_and_record_ee(model):
    inp = joint_input(600, use_ema=False)
    params = distinct_params(2, seed=3)
    pop = PopulationEngine([inp], model=model, nthread=1, record_ee=True).run(params)[0]
    for i in range(2):
        ref = replay_reference(inp, DynamicsParams.from_vector(params[i]), model)
        assert np.abs(pop.q[i] - ref.q).max() <= 1e-9
        np.testing.assert_allclose(pop.ee_pos[i], ref.ee_pos, atol=1e-9)
        np.testing.assert_allclose(pop.ee_quat_xyzw[i], ref.ee_quat_xyzw, atol=1e-9)
        np.testing.assert_allclose(pop.tau_cmd[i], ref.tau_cmd, atol=1e-9)


def test_delay_changes_the_replay(model):
    inp = joint_input(400)
    params = np.tile(DynamicsParams.nominal().to_vector(), (2, 1))
    params[1, 28] = 4
    q = PopulationEngine([inp], model=model, nthread=1).run(params)[0].q
    assert np.abs(q[0] - q[1]).max() > 1e-5


def test_cartesian_zoh_replay_engines_agree_and_track(model):
    frames = cartesian_frames_50hz(model, 40)
    inp = ReplayInput.from_frames(frames, controller="cartesian_impedance", time_base="zoh_1khz_ticks_per_csv_row",
                                  warmup_ticks=50, cartesian=CartesianGains(kp_pos=500.0, kp_ori=30.0))
    assert inp.n_ticks == 50 + 39 * 20 + 1
    np.testing.assert_array_equal(inp.sample_ticks[:3], [50, 70, 90])
    params = distinct_params(2, seed=5)
    pop = PopulationEngine([inp], model=model, nthread=1, record_ee=True).run(params)[0]
    for i in range(2):
        ref = replay_reference(inp, DynamicsParams.from_vector(params[i]), model)
        assert np.abs(pop.q[i] - ref.q).max() <= 1e-9
    # the arm follows the target: the flange moves several mm towards it
    target = np.column_stack([frames["tgt_px"], frames["tgt_py"], frames["tgt_pz"]])
    moved = np.abs(ref.ee_pos[-1] - ref.ee_pos[0]).max()
    assert moved > 0.005
    assert np.linalg.norm(ref.ee_pos[-1] - target[-2]) < np.linalg.norm(ref.ee_pos[0] - target[-2])


def test_replay_with_true_params_reproduces_a_noisy_recording(model):
    truth = load_params(DEMO_PROFILE_PATH)
    noise_q, noise_dq = 2e-4, 2e-3
    frames = record_synthetic(truth, 1500, noise_q=noise_q, noise_dq=noise_dq, seed=11)
    inp = ReplayInput.from_frames(frames)
    assert inp.controller == "joint_impedance" and inp.n_ticks == 1500 - 4
    true_fit = replay_reference(inp, truth, model)
    rms_true = np.sqrt(np.mean((true_fit.q - inp.q_ref) ** 2, axis=0))
    assert np.all(rms_true < 1.5 * noise_q), rms_true  # within the measurement noise
    wrong = replay_reference(inp, DynamicsParams.nominal(), model)
    rms_wrong = np.sqrt(np.mean((wrong.q - inp.q_ref) ** 2))
    assert rms_wrong > 3 * np.sqrt(np.mean(rms_true ** 2))


def test_noise_free_recording_replays_to_round_off(model):
    truth = load_params(DEMO_PROFILE_PATH)
    frames = record_synthetic(truth, 400)
    table = pa.table(frames)
    inp = ReplayInput.from_frames(table)
    pop = PopulationEngine([inp], model=model, nthread=1).run(truth.to_vector()[None])[0]
    assert np.abs(pop.q[0] - inp.q_ref).max() < 1e-7
    assert np.abs(pop.tau_cmd[0] - np.column_stack([frames[f"tau_cmd{j}"][4:] for j in range(1, 8)])).max() < 1e-4


def test_from_frames_reports_bad_rows_and_gaps():
    frames = record_synthetic(DynamicsParams.nominal(), 20)
    bad = dict(frames)
    bad["q3"] = bad["q3"].copy()
    bad["q3"][9] = np.nan
    with pytest.raises(ValueError, match=r"column 'q3' row 9: expected a finite number"):
        ReplayInput.from_frames(bad)
    gap = dict(frames)
    gap["seq"] = np.concatenate([np.arange(10), np.arange(12, 22)])
    with pytest.raises(ValueError, match=r"column 'seq' row 10: expected 10, got 12"):
        ReplayInput.from_frames(gap)
    nulls = pa.table(frames).set_column(
        list(frames).index("K_joint2"), "K_joint2", pa.array([None] * 20, type=pa.float64()))
    with pytest.raises(ValueError, match=r"column 'K_joint2' row 4"):
        ReplayInput.from_frames(nulls)
    missing = {k: v for k, v in frames.items() if k != "q_target5"}
    with pytest.raises(ValueError, match=r"missing column 'q_target5'"):
        ReplayInput.from_frames(missing)
    mixed = dict(frames)
    mixed["controller"] = np.where(np.arange(20) < 10, 2, 1)
    with pytest.raises(ValueError, match=r"column 'controller': expected one value"):
        ReplayInput.from_frames(mixed)


def test_replays_are_deterministic_and_the_engine_is_reusable(model):
    inputs = [joint_input(300), joint_input(200, q0=HOME_Q + 0.05)]
    params = distinct_params(2)
    engine = PopulationEngine(inputs, model=model, nthread=2)
    a = engine.run(params)
    b = PopulationEngine(inputs, model=model, nthread=2).run(params)
    assert [r.q.shape for r in a] == [(2, 300, 7), (2, 200, 7)]
    assert all(x.q.tobytes() == y.q.tobytes() and x.dq.tobytes() == y.dq.tobytes() for x, y in zip(a, b))
    # across generations: other params (and another population size), then the first again
    other = distinct_params(3, seed=8)
    np.testing.assert_array_equal(engine.run(other)[1].q, PopulationEngine(inputs, model=model, nthread=1).run(other)[1].q)
    assert engine.run(params)[0].q.tobytes() == a[0].q.tobytes()


def test_cartesian_1khz_frames_replay_to_round_off(model):
    """A 1 kHz Cartesian 'recording' made by the reference engine replays from its own frames."""
    n = 700
    start = replay_reference(joint_input(1), DynamicsParams.nominal(), model)
    t = np.arange(n) * 1e-3
    target = start.ee_pos[0] + 0.02 * np.column_stack([np.sin(2 * np.pi * t), np.cos(2 * np.pi * t) - 1, 0 * t])
    gains = CartesianGains(kp_pos=300.0, kp_ori=25.0)
    made = ReplayInput(controller="cartesian_impedance", q0=HOME_Q, dq0=np.zeros(7), tau_prev0=np.zeros(7),
                       tau_history=np.zeros((0, 7)), sample_ticks=np.arange(n), n_ticks=n, target_pos=target,
                       target_quat_xyzw=np.tile(start.ee_quat_xyzw[0], (n, 1)), cartesian=gains)
    truth = load_params(DEMO_PROFILE_PATH)
    rec = replay_reference(made, truth, model)
    frames = {"seq": np.arange(n) + 100, "t_s": t, "controller": np.ones(n, dtype=np.int32)}
    for j in range(7):
        frames[f"q{j + 1}"], frames[f"dq{j + 1}"], frames[f"tau_cmd{j + 1}"] = rec.q[:, j], rec.dq[:, j], rec.tau_cmd[:, j]
    for a, name in enumerate(("tgt_px", "tgt_py", "tgt_pz")):
        frames[name] = target[:, a]
    for a, name in enumerate(("tgt_qx", "tgt_qy", "tgt_qz", "tgt_qw")):
        frames[name] = np.full(n, start.ee_quat_xyzw[0][a])
    inp = ReplayInput.from_frames(frames, cartesian=gains)
    assert inp.controller == "cartesian_impedance" and inp.n_ticks == n - 4
    again = PopulationEngine([inp], model=model, nthread=1).run(truth.to_vector()[None])[0]
    assert np.abs(again.q[0] - rec.q[4:]).max() < 1e-8
    assert np.abs(rec.q[-1] - HOME_Q).max() > 1e-3  # it moved


def test_an_unstable_candidate_is_nan_in_both_engines(model):
    inp = joint_input(50)
    inp.dq0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e12])  # MuJoCo flags this state and resets
    params = np.tile(DynamicsParams.nominal().to_vector(), (2, 1))
    pop = PopulationEngine([inp], model=model, nthread=1).run(params)[0]
    assert np.isnan(pop.q).all()
    assert np.isnan(replay_reference(inp, DynamicsParams.nominal(), model).q).all()
    fine = PopulationEngine([joint_input(50)], model=model, nthread=1).run(params)[0]
    assert np.isfinite(fine.q).all()


def test_mean_square_errors_in_the_kernel_equal_those_of_the_full_replay(model):
    truth = load_params(DEMO_PROFILE_PATH)
    joint = ReplayInput.from_frames(record_synthetic(truth, 600, noise_q=2e-4, noise_dq=2e-3, seed=3))
    cartesian = ReplayInput.from_frames(cartesian_frames_50hz(model, 12), controller="cartesian_impedance",
                                        time_base="zoh_1khz_ticks_per_csv_row", warmup_ticks=20)
    cartesian.q_ref, cartesian.dq_ref = np.full((12, 7), 0.1), np.zeros((12, 7))
    params = distinct_params(5, seed=9)
    params[0] = truth.to_vector()
    for inputs in ([joint], [joint, cartesian]):  # kernel sums; then a Cartesian input through run()
        engine = PopulationEngine(inputs, model=model, nthread=2)
        errors = engine.mean_square_errors(params, 1e-3, 1e-2)
        assert errors.shape == (5, len(inputs), 2)
        for b, (inp, res) in enumerate(zip(inputs, engine.run(params))):
            want_q = np.mean(((res.q - inp.q_ref[None]) / 1e-3) ** 2, axis=(1, 2))
            want_dq = np.mean(((res.dq - inp.dq_ref[None]) / 1e-2) ** 2, axis=(1, 2))
            np.testing.assert_allclose(errors[:, b, 0], want_q, rtol=1e-12)
            np.testing.assert_allclose(errors[:, b, 1], want_dq, rtol=1e-12)
    assert errors[0, 0, 0] < errors[1:, 0, 0].min()  # the truth fits best
    unstable = joint_input(50)
    unstable.q_ref, unstable.dq_ref = np.zeros((50, 7)), np.zeros((50, 7))
    unstable.dq0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e12])
    assert np.isnan(PopulationEngine([unstable], model=model, nthread=1).mean_square_errors(params[:2], 1.0, 1.0)).all()
