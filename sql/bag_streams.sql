-- bag_streams.sql: the other streams of runs read from ROS bags (streams.parquet), and
-- their join with frames by time. Loaded by twinlake.catalog.connect after views.sql.
--
-- A bag run's frames hold one row per message of its primary state stream (its own rate);
-- every other stream (a JointState topic beside the robot state, a target topic, a second
-- robot-state topic) is rows of streams.parquet in the same partition, with the same time
-- axis: `t_s` is seconds since the primary stream's first time (docs/formats.md, Bags).
--
-- Returns:
--   streams                   one row per message of a run's other streams: robot, run
--                             (VARCHAR partition columns), topic, kind ('joint_state' |
--                             'robot_state' | 'target'), seq (index in its topic), t_s [s],
--                             stamp_ns, receive_ns (int64 ns, as in the bag), then the
--                             stream's columns in canonical names (q1..7 [rad], dq1..7
--                             [rad/s], tau_J1..7 [N·m], q_target1..7, dq_target1..7, ...)
--   frames_with_joint_states  every frame of a run with streams, and the latest JointState
--                             row at or before its t_s (ASOF join on robot, run): js_topic,
--                             js_t_s, js_q1..7, js_dq1..7, js_tau_J1..7 (null before the first)
--   stream_asof(stream_topic) table macro: every frame of the runs having that topic, and the
--                             latest row of that topic at or before it, as the struct `stream`
--
-- Exist only once some run has a streams.parquet.

-- requires: runs/*/*/streams.parquet
CREATE OR REPLACE VIEW streams AS
SELECT * FROM lake_parquet('/runs/*/*/streams.parquet');

CREATE OR REPLACE VIEW frames_with_joint_states AS
SELECT f.*, s.topic AS js_topic, s.t_s AS js_t_s,
       s.q1 AS js_q1, s.q2 AS js_q2, s.q3 AS js_q3, s.q4 AS js_q4, s.q5 AS js_q5,
       s.q6 AS js_q6, s.q7 AS js_q7,
       s.dq1 AS js_dq1, s.dq2 AS js_dq2, s.dq3 AS js_dq3, s.dq4 AS js_dq4, s.dq5 AS js_dq5,
       s.dq6 AS js_dq6, s.dq7 AS js_dq7,
       s.tau_J1 AS js_tau_J1, s.tau_J2 AS js_tau_J2, s.tau_J3 AS js_tau_J3,
       s.tau_J4 AS js_tau_J4, s.tau_J5 AS js_tau_J5, s.tau_J6 AS js_tau_J6,
       s.tau_J7 AS js_tau_J7
FROM (SELECT * FROM frames WHERE (robot, run) IN (SELECT DISTINCT robot, run FROM streams)) f
ASOF LEFT JOIN (SELECT * FROM streams WHERE kind = 'joint_state') s
  ON f.robot = s.robot AND f.run = s.run AND f.t_s >= s.t_s;

CREATE OR REPLACE MACRO stream_asof(stream_topic) AS TABLE
SELECT f.*, s AS stream
FROM (SELECT * FROM frames
      WHERE (robot, run) IN (SELECT DISTINCT robot, run FROM streams WHERE topic = stream_topic)) f
ASOF LEFT JOIN (SELECT * FROM streams WHERE topic = stream_topic) s
  ON f.robot = s.robot AND f.run = s.run AND f.t_s >= s.t_s;
