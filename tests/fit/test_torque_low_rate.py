"""The torque route on franka_ros' 30 Hz robot state: a rosbags-written ROS 1 bag of
franka_msgs/FrankaState from the independent plant carrying its tool at a few poses. The
quasi-static rows give the payload's mass and centre of mass and the sensor offsets; the
dynamic parameters are flagged unidentifiable with the reason; commanded torques are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the plant
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))  # the bag writers
from bag_writers import ROS1_STATE, T0_NS, Topic, robot_states, store, write_ros1  # noqa: E402
from plant import HOME_Q, MOVED_Q, record, tool_plant, write_reference  # noqa: E402

from twinlake.catalog import Lake  # noqa: E402
from twinlake.fit.trust.statuses import fit_statuses  # noqa: E402
from twinlake.fit.torque import TorqueFitSettings, fit_torque  # noqa: E402
from twinlake.fit.torque.low_rate.quasi_static import DYNAMIC  # noqa: E402
from twinlake.fit.core.parameter_status import Status  # noqa: E402
from twinlake.ingest import ingest_paths  # noqa: E402
from twinlake.ingest.registry import ReadOptions  # noqa: E402

POSES = (np.array(HOME_Q), np.array(MOVED_Q), np.array(HOME_Q) + np.array([0, 0.3, 0, 0.2, 0.5, -0.4, -0.5]))
PERIOD_TICKS = 33  # franka_ros' default publish rate, 30 Hz, of the 1 kHz state


def _reference(path: Path) -> Path:
    """2 s at each pose, 0.5 s quintic moves between them, targets at 1 kHz."""
    q = []
    for i, pose in enumerate(POSES):
        if i:
            s = np.linspace(0, 1, 501)[1:]
            q.extend(POSES[i - 1] + (s ** 3 * (10 - 15 * s + 6 * s ** 2))[:, None] * (pose - POSES[i - 1]))
        q.extend([pose] * 2000)
    q = np.array(q)
    return write_reference(path, np.arange(len(q)) * 1e-3, q)


@pytest.fixture(scope="module")
def bag_lake(tmp_path_factory):
    d = tmp_path_factory.mktemp("lowrate")
    truth = tool_plant(ring_torque_nm=0.0)
    rec = record(_reference(d / "reference.csv"), d / "run.csv", plant=truth, tail_s=0.0, settle_s=1.0)
    table = pacsv.read_csv(rec.csv_path)
    keep = np.arange(0, table.num_rows, PERIOD_TICKS)
    cols = {p: np.column_stack([table.column(f"{p}{j}").to_numpy() for j in range(7)])[keep] for p in ("q", "dq", "tau_J")}
    ts = store(1)
    msgs = robot_states(ts, ROS1_STATE, [T0_NS + int(k * 1e6) for k in keep],
                        {"q": cols["q"], "dq": cols["dq"], "tau": cols["tau_J"]})
    bag = write_ros1(d / "state.bag", ts, [Topic("/franka_state_controller/franka_states", ROS1_STATE, msgs)])
    (out,) = ingest_paths(Lake(d / "lake"), [bag], ReadOptions(robot="ros", run="state"))
    assert out.status == "published", out.message
    return d / "lake", truth


def test_thirty_hertz_robot_state_gives_the_payload_quasi_statically(bag_lake):
    lake, truth = bag_lake
    rec = fit_torque(lake, TorqueFitSettings(train=["ros/state"], torque="measured"), fit_id="qs")
    torque = json.loads(rec.extra["torque_json"])
    assert 25 < torque["sample_rate_hz"] < 35 and torque["quasi_static"]["poses"] >= 3
    assert rec.params.payload_mass == pytest.approx(truth.payload_mass_kg, rel=0.15)
    status = {s.name: s for s in fit_statuses(rec)}
    for i, axis in enumerate("xyz"):
        st = status[f"payload_com_{axis}"]
        if st.status is Status.ESTIMATED:
            assert abs(st.value - truth.payload_com_m[i]) < 0.02, axis
    for name in DYNAMIC:
        assert status[name].status is Status.NOT_IDENTIFIED, name
    entries = {e["name"]: e for e in rec.identifiability["parameters"]}
    assert "30 Hz" in entries["payload_ixx"]["reason"] and "not identified" in entries["mu_viscous_j3"]["reason"]
    assert "no acceleration is differentiated" in torque["quasi_static"]["reason"]


def test_commanded_torques_at_thirty_hertz_are_refused_with_the_reason(bag_lake):
    lake, _ = bag_lake
    with pytest.raises(ValueError, match="commanded torque at rest carries no equation"):
        fit_torque(lake, TorqueFitSettings(train=["ros/state"], torque="commanded"), fit_id="qs-c", publish=False)
