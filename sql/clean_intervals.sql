-- clean_intervals.sql: clean gap-free intervals of every run (gaps-and-islands over `seq`).
-- Loaded by twinlake.catalog.connect after views.sql; needs only the `frames` and `runs`
-- views, which always exist (empty on an empty lake), so no block marker is required.
--
-- Returns (table macro `clean_intervals(...)` and view `intervals` = the macro's defaults):
--   one row per clean interval: robot, run, interval_index (0-based per run, counted before
--   the min-duration filter so an index never changes with it), seq_first, seq_last,
--   t_first_s, t_last_s, frame_count, duration_s (= t_last_s - t_first_s, seconds),
--   controller, K_joint (list<double>, 7, N·m/rad), D_joint (list<double>, 7, N·m·s/rad),
--   filter_alpha, use_friction (bool), joint_reset_count (gains are null unless the
--   controller is joint impedance, 2), start_reason, end_reason.
--
-- Reasons: run_start, run_end, seq_gap, recorded_gap, mode_change, reset, gain_change,
--   target_invalid, nonfinite, period_outlier. Rules and precedence: docs/intervals.md.
--
-- Parameters (named, all optional; pass values as bound parameters, never paste them):
--   robot_filter, run_filter  VARCHAR  only this robot / run (applied before the window)
--   min_duration_s            DOUBLE   drop intervals shorter than this [s] (default 0)
--   period_s, period_tol_s    DOUBLE   nominal control period and tolerance [s]
--                                      (default 0.001 ± 0.0005; the first tick is exempt)
--   split_on                  VARCHAR[] optional rules that split: any of reset,
--                                      gain_change, target_invalid, nonfinite,
--                                      period_outlier (default all). seq_gap, recorded_gap
--                                      and mode_change always split.
--
-- Plan: one window pass over each run's ticks ordered by seq (lag and lead share one
-- sort) marks the first and last tick of every interval; a second, tiny window pairs them.

-- always
CREATE OR REPLACE MACRO clean_intervals(
    robot_filter := NULL,
    run_filter := NULL,
    min_duration_s := 0.0,
    period_s := 0.001,
    period_tol_s := 0.0005,
    split_on := ['reset', 'gain_change', 'target_invalid', 'nonfinite', 'period_outlier']
) AS TABLE
WITH
run_info AS (
    -- run.parquet may lack `recorded_gaps` / `fit_eligible`: UNION BY NAME adds them as null.
    SELECT robot, run, recorded_gaps, coalesce(fit_eligible, true) AS fit_eligible
    FROM (
        FROM runs
        UNION ALL BY NAME
        SELECT NULL::VARCHAR AS robot, NULL::VARCHAR AS run,
               NULL::STRUCT(seq_from BIGINT, seq_to BIGINT)[] AS recorded_gaps,
               NULL::BOOLEAN AS fit_eligible
        WHERE false)
    WHERE (robot_filter IS NULL OR robot = robot_filter)
      AND (run_filter IS NULL OR run = run_filter)
),
tick AS (
    -- Per-tick facts, no window yet. `excl`: why this tick belongs to no interval (or null).
    -- `gap_end_before`: end of the latest recorded lost range that ends before this seq.
    SELECT
        f.robot, f.run, f.seq, f.t_s, f.controller, f.joint_reset_count,
        f.control_period_s,
        CASE WHEN f.controller = 2 THEN {
            'K': [f.K_joint1, f.K_joint2, f.K_joint3, f.K_joint4, f.K_joint5, f.K_joint6, f.K_joint7],
            'D': [f.D_joint1, f.D_joint2, f.D_joint3, f.D_joint4, f.D_joint5, f.D_joint6, f.D_joint7],
            'alpha': f.filter_alpha,
            'friction': f.joint_use_friction} END AS cfg,
        CASE
            WHEN len(coalesce(ri.recorded_gaps, [])) > 0
                 AND len(list_filter(ri.recorded_gaps,
                         lambda g: g.seq_from <= f.seq AND g.seq_to >= f.seq)) > 0
                THEN 'recorded_gap'
            WHEN list_contains(split_on, 'target_invalid') AND f.controller = 2
                 AND coalesce(f.joint_target_valid, 0) = 0
                THEN 'target_invalid'
            WHEN NOT list_contains(split_on, 'nonfinite') THEN NULL
            -- a sum is finite only if every term is; null (not recorded) counts as bad here
            WHEN NOT coalesce(isfinite(
                    f.q1 + f.q2 + f.q3 + f.q4 + f.q5 + f.q6 + f.q7
                  + f.dq1 + f.dq2 + f.dq3 + f.dq4 + f.dq5 + f.dq6 + f.dq7), false)
                THEN 'nonfinite'
            WHEN f.controller = 2 AND NOT coalesce(isfinite(
                    f.q_target1 + f.q_target2 + f.q_target3 + f.q_target4 + f.q_target5
                  + f.q_target6 + f.q_target7 + f.q_target_filtered1 + f.q_target_filtered2
                  + f.q_target_filtered3 + f.q_target_filtered4 + f.q_target_filtered5
                  + f.q_target_filtered6 + f.q_target_filtered7), false)
                THEN 'nonfinite'
            -- Cartesian targets: a null (target kept in targets.parquet) is not a defect
            WHEN f.controller <> 2 AND NOT coalesce(isfinite(
                    f.tgt_px + f.tgt_py + f.tgt_pz + f.tgt_qx + f.tgt_qy + f.tgt_qz + f.tgt_qw),
                    true)
                THEN 'nonfinite'
        END AS excl,
        CASE WHEN len(coalesce(ri.recorded_gaps, [])) > 0 THEN
            list_max(list_transform(
                list_filter(ri.recorded_gaps, lambda g: g.seq_to < f.seq),
                lambda g: g.seq_to))
        END AS gap_end_before
    FROM frames f
    LEFT JOIN run_info ri ON ri.robot = f.robot AND ri.run = f.run
    WHERE (robot_filter IS NULL OR f.robot = robot_filter)
      AND (run_filter IS NULL OR f.run = run_filter)
      AND coalesce(ri.fit_eligible, true)
),
win AS (
    SELECT
        *,
        lag(seq) OVER w AS prev_seq, lead(seq) OVER w AS next_seq,
        lag(controller) OVER w AS prev_controller, lead(controller) OVER w AS next_controller,
        lag(joint_reset_count) OVER w AS prev_reset, lead(joint_reset_count) OVER w AS next_reset,
        lag(cfg) OVER w AS prev_cfg, lead(cfg) OVER w AS next_cfg,
        lead(control_period_s) OVER w AS next_period_s,
        lead(gap_end_before) OVER w AS next_gap_end_before,
        lag(excl) OVER w AS prev_excl, lead(excl) OVER w AS next_excl
    FROM tick
    WINDOW w AS (PARTITION BY robot, run ORDER BY seq)
),
edge AS (
    -- b_in: why the step from the previous tick into this one splits (null: it does not);
    -- b_out: the same for the step from this tick to the next. Same rules, mirrored.
    SELECT
        robot, run, seq, t_s, controller, joint_reset_count, cfg, excl, prev_excl, next_excl,
        CASE
            WHEN prev_seq IS NULL THEN 'run_start'
            WHEN gap_end_before > prev_seq THEN 'recorded_gap'
            WHEN seq - prev_seq <> 1 THEN 'seq_gap'
            WHEN controller IS DISTINCT FROM prev_controller THEN 'mode_change'
            WHEN list_contains(split_on, 'reset')
                 AND joint_reset_count IS DISTINCT FROM prev_reset THEN 'reset'
            WHEN list_contains(split_on, 'gain_change') AND cfg IS DISTINCT FROM prev_cfg
                THEN 'gain_change'
            WHEN list_contains(split_on, 'period_outlier')
                 AND abs(control_period_s - period_s) > period_tol_s THEN 'period_outlier'
        END AS b_in,
        CASE
            WHEN next_seq IS NULL THEN 'run_end'
            WHEN next_gap_end_before > seq THEN 'recorded_gap'
            WHEN next_seq - seq <> 1 THEN 'seq_gap'
            WHEN next_controller IS DISTINCT FROM controller THEN 'mode_change'
            WHEN list_contains(split_on, 'reset')
                 AND next_reset IS DISTINCT FROM joint_reset_count THEN 'reset'
            WHEN list_contains(split_on, 'gain_change') AND next_cfg IS DISTINCT FROM cfg
                THEN 'gain_change'
            WHEN list_contains(split_on, 'period_outlier')
                 AND abs(next_period_s - period_s) > period_tol_s THEN 'period_outlier'
        END AS b_out
    FROM win
),
bound AS (
    -- Only the first and last tick of each interval survive (a one-tick interval is both).
    SELECT
        robot, run, seq, t_s, controller, joint_reset_count, cfg,
        coalesce(b_in, prev_excl) AS start_reason,
        coalesce(b_out, next_excl) AS end_reason
    FROM edge
    WHERE excl IS NULL
      AND (b_in IS NOT NULL OR prev_excl IS NOT NULL
           OR b_out IS NOT NULL OR next_excl IS NOT NULL)
),
paired AS (
    SELECT
        *,
        lead(seq) OVER v AS next_bound_seq,
        lead(t_s) OVER v AS next_bound_t_s,
        lead(end_reason) OVER v AS next_bound_end_reason
    FROM bound
    WINDOW v AS (PARTITION BY robot, run ORDER BY seq)
),
interval_rows AS (
    SELECT
        robot, run,
        (row_number() OVER (PARTITION BY robot, run ORDER BY seq) - 1)::BIGINT AS interval_index,
        seq AS seq_first,
        CASE WHEN end_reason IS NOT NULL THEN seq ELSE next_bound_seq END AS seq_last,
        t_s AS t_first_s,
        CASE WHEN end_reason IS NOT NULL THEN t_s ELSE next_bound_t_s END AS t_last_s,
        controller,
        cfg.K AS K_joint, cfg.D AS D_joint, cfg.alpha AS filter_alpha,
        cfg.friction <> 0 AS use_friction,
        joint_reset_count,
        start_reason,
        coalesce(end_reason, next_bound_end_reason) AS end_reason
    FROM paired
    WHERE start_reason IS NOT NULL
)
SELECT
    robot, run, interval_index, seq_first, seq_last, t_first_s, t_last_s,
    seq_last - seq_first + 1 AS frame_count,
    t_last_s - t_first_s AS duration_s,
    controller, K_joint, D_joint, filter_alpha, use_friction, joint_reset_count,
    start_reason, end_reason
FROM interval_rows
WHERE t_last_s - t_first_s >= min_duration_s
ORDER BY robot, run, seq_first;

CREATE OR REPLACE VIEW intervals AS SELECT * FROM clean_intervals();
