import mujoco
import numpy as np
import pytest

from twinlake.sim import FR3_MODEL_PATH, HOME_Q, Q_MAX, Q_MIN, load_model
from twinlake.sim.arm_model.model import arm_index


def test_our_model_is_normalised(model):
    assert model.opt.timestep == 0.001
    np.testing.assert_array_equal(model.opt.gravity, 0.0)
    assert model.nq == model.nv == 7
    arm = arm_index(model)
    site = model.site("ee")
    assert model.site_bodyid[site.id] == model.body("fr3_link7").id
    np.testing.assert_allclose(model.site_pos[site.id], [0.0, 0.0, 0.107])
    np.testing.assert_allclose(model.body_mass[1:].sum(), 2.92747 + 2.93554 + 2.2449 + 2.6156 + 2.32712 + 1.81704 + 0.627143)
    np.testing.assert_array_equal(arm.dof_adr, np.arange(7))


def test_home_pose_forward_kinematics(model):
    data = mujoco.MjData(model)
    data.qpos[:] = HOME_Q
    mujoco.mj_kinematics(model, data)
    # the FR3's published kinematic chain offsets: x = 0.0825 - 0.0825 + 0.384 + 0.088 at home, z = 0.333 + 0.316 - 0.107 + ...
    pos = data.site_xpos[model.site("ee").id]
    assert pos[0] == pytest.approx(0.5545, abs=1e-3) and abs(pos[1]) < 1e-9 and pos[2] == pytest.approx(0.6245, abs=1e-3)


def test_daemon_limits_are_inside_model_ranges(model):
    assert np.all(Q_MIN >= model.jnt_range[:, 0] - 1e-9) and np.all(Q_MAX <= model.jnt_range[:, 1] + 1e-9)
    assert Q_MIN[3] == -3.0421 and Q_MAX[5] == 4.5169


def _user_mjcf(tmp_path, prefix="panda_joint", extra=""):
    text = FR3_MODEL_PATH.read_text().replace("fr3_joint", prefix)
    text = text.replace('<site name="ee"', '<site name="flange"').replace("gravity=\"0 0 0\"", 'gravity="0 0 -9.81"')
    text = text.replace("</worldbody>", f"{extra}</worldbody>")
    path = tmp_path / "user.xml"
    path.write_text(text)
    return path


def test_user_mjcf_matched_by_joint_name_gets_gravity_off_and_a_flange_site(tmp_path):
    m = load_model(_user_mjcf(tmp_path, extra='<body name="box" pos="1 0 0"><joint name="slide_x" type="slide"/><geom size="0.1" type="sphere" mass="1"/></body>'))
    np.testing.assert_array_equal(m.opt.gravity, 0.0)
    arm = arm_index(m)
    assert [m.joint(int(j)).name for j in arm.jnt_ids] == [f"fr3_joint{i}" for i in range(1, 8)]
    assert m.site_bodyid[arm.ee_site] == m.body("fr3_link7").id
    np.testing.assert_allclose(m.site_pos[arm.ee_site], [0, 0, 0.107])


def test_user_mjcf_with_explicit_map_and_clear_errors(tmp_path):
    path = _user_mjcf(tmp_path, prefix="arm_j")
    with pytest.raises(ValueError, match=r"user.xml: expected exactly one joint named '\*joint1'"):
        load_model(path)
    m = load_model(path, joint_map={i: f"arm_j{i}" for i in range(1, 8)})
    assert m.joint("fr3_joint4").id == m.jnt_qposadr[3]
    with pytest.raises(ValueError, match=r"joint map J7 -> 'nope'"):
        load_model(path, joint_map={**{i: f"arm_j{i}" for i in range(1, 7)}, 7: "nope"})
    with pytest.raises(ValueError, match="missing.xml: cannot load MJCF"):
        load_model(tmp_path / "missing.xml")
