-- clean_intervals.sql: clean gap-free intervals of every run (gaps-and-islands over `seq`).
-- Loaded by twinlake.catalog.connect after views.sql; needs only the `frames` and `runs`
-- views, which always exist (empty on an empty lake), so its block runs unconditionally.
--
-- Returns (table macro `clean_intervals(...)` and view `intervals` = the macro's defaults):
--   one row per clean interval: robot, run, interval_index (0-based per run, counted before
--   the min-duration filter, so an index never depends on it), seq_first, seq_last,
--   t_first_s, t_last_s, frame_count, duration_s (= t_last_s - t_first_s, seconds),
--   controller, K_joint (list<double>, 7, N·m/rad), D_joint (list<double>, 7, N·m·s/rad),
--   filter_alpha, use_friction (bool), joint_reset_count (the gains are null unless the
--   controller is joint impedance, 2), start_reason, end_reason, ticks_lost_before,
--   ticks_lost_after (BIGINT: ticks lost in the seq_gap / time_gap that starts / ends the
--   interval, null for any other reason), period_s (the tick period it was judged by [s]).
--
-- Reasons: run_start, run_end, seq_gap, recorded_gap, mode_change, reset, gain_change,
--   target_invalid, nonfinite, period_outlier, time_gap, clock_reversal, stale, time_repeat.
--   Rules and precedence: docs/intervals.md. A run whose seq is its recorder's own count of
--   executed ticks (fr3_stack's CSV, source_format 'fr3_stack_csv': a lost frame shows as a
--   seq jump) never gets a time_gap: a t_s step over consecutive seq is a late tick whose data
--   is complete (period_outlier judges its control period); nor does a run whose seq was
--   rebuilt from t_s (tick_grid 'rebuilt': its lost ticks are seq jumps already).
--
-- Parameters (named, all optional; pass values as bound parameters, never paste them):
--   robot_filter, run_filter  VARCHAR   only this robot / run (applied before the window)
--   min_duration_s            DOUBLE    drop intervals shorter than this [s] (default 0)
--   period_s, period_tol_s    DOUBLE    nominal tick period and tolerance [s] (default: each
--                                       run's own median tick period runs.tick_period_s, else
--                                       1 / runs.rate_hz, ± half of it; without either the
--                                       time rules are off and period_outlier uses 1 ms; a
--                                       run's first tick is exempt from period_outlier)
--   split_on                  VARCHAR[] optional rules that split: any of reset,
--                                       gain_change, target_invalid, nonfinite,
--                                       period_outlier (default all). seq_gap, recorded_gap
--                                       and mode_change always split.
--
-- Plan: one window pass (lags over seq per run) finds the "event" ticks: a run's first and
-- last tick, ticks where a split rule fires, excluded ticks and the ticks right after them.
-- Only those few rows go on; a second, tiny window pairs each interval start with the next
-- event. Reasons travel as small integer codes and become names at the end.

-- always
CREATE OR REPLACE MACRO clean_intervals(
    robot_filter := NULL,
    run_filter := NULL,
    min_duration_s := 0.0,
    period_s := NULL,
    period_tol_s := NULL,
    split_on := ['reset', 'gain_change', 'target_invalid', 'nonfinite', 'period_outlier']
) AS TABLE
WITH
run_info AS (
    -- run.parquet may lack `recorded_gaps` / `fit_eligible` / `tick_period_s`: UNION BY NAME
    -- adds them as null. Pt: the run's own tick period [s] (given, or measured at ingest, or
    -- 1 / rate_hz for a run written before tick_period_s); the time rules need it. P: the
    -- period of period_outlier and of the result (Pt, else 1 ms); tol: its tolerance.
    SELECT robot, run, recorded_gaps, coalesce(fit_eligible, true) AS fit_eligible, Pt,
           -- time_gap judges only a seq that is neither the recorder's tick count (fr3_stack's
           -- CSV: a late tick there is complete) nor rebuilt from t_s (a lost tick is a seq jump)
           NOT coalesce(source_format = 'fr3_stack_csv' OR tick_grid = 'rebuilt', false) AS time_gaps,
           coalesce(Pt, 0.001) AS P,
           coalesce(period_tol_s::DOUBLE, 0.5 * coalesce(Pt, 0.001)) AS tol
    FROM (
        FROM runs
        UNION ALL BY NAME
        SELECT NULL::VARCHAR AS robot, NULL::VARCHAR AS run,
               NULL::STRUCT(seq_from BIGINT, seq_to BIGINT)[] AS recorded_gaps,
               NULL::BOOLEAN AS fit_eligible, NULL::DOUBLE AS tick_period_s,
               NULL::DOUBLE AS rate_hz, NULL::VARCHAR AS source_format, NULL::VARCHAR AS tick_grid
        WHERE false),
    LATERAL (SELECT coalesce(period_s::DOUBLE, tick_period_s, 1.0 / nullif(rate_hz, 0)) AS Pt)
    WHERE (robot_filter IS NULL OR robot = robot_filter)
      AND (run_filter IS NULL OR run = run_filter)
),
tick AS (
    -- Per-tick facts, no window yet.
    --   excl: why this tick is in no interval (4 recorded_gap, 13 stale, 8 target_invalid,
    --         9 nonfinite); frames written before the `stale` column count as not stale
    --   cfg: 64-bit hash of the applied joint configuration (joint impedance only)
    --   gap_end_before: end of the latest recorded lost range ending before this seq
    SELECT
        f.robot, f.run, f.seq, f.t_s, f.controller, f.joint_reset_count, f.control_period_s,
        ri.P, ri.Pt, ri.tol, ri.time_gaps,
        CASE WHEN f.controller = 2 THEN hash(
            f.K_joint1, f.K_joint2, f.K_joint3, f.K_joint4, f.K_joint5, f.K_joint6, f.K_joint7,
            f.D_joint1, f.D_joint2, f.D_joint3, f.D_joint4, f.D_joint5, f.D_joint6, f.D_joint7,
            f.filter_alpha, f.joint_use_friction) END AS cfg,
        CASE
            WHEN len(coalesce(ri.recorded_gaps, [])) > 0
                 AND len(list_filter(ri.recorded_gaps,
                         lambda g: g.seq_from <= f.seq AND g.seq_to >= f.seq)) > 0
                THEN 4
            WHEN coalesce(f.stale, false) THEN 13
            WHEN list_contains(split_on, 'target_invalid') AND f.controller = 2
                 AND coalesce(f.joint_target_valid, 0) = 0
                THEN 8
            WHEN NOT list_contains(split_on, 'nonfinite') THEN NULL
            -- a sum is finite only if every term is; null (not recorded) counts as bad here
            WHEN NOT coalesce(isfinite(
                    f.q1 + f.q2 + f.q3 + f.q4 + f.q5 + f.q6 + f.q7
                  + f.dq1 + f.dq2 + f.dq3 + f.dq4 + f.dq5 + f.dq6 + f.dq7), false)
                THEN 9
            -- commanded torque: null (not recorded) is fine, NaN or ±inf is not
            WHEN NOT isfinite(
                    coalesce(f.tau_cmd1, 0) + coalesce(f.tau_cmd2, 0) + coalesce(f.tau_cmd3, 0)
                  + coalesce(f.tau_cmd4, 0) + coalesce(f.tau_cmd5, 0) + coalesce(f.tau_cmd6, 0)
                  + coalesce(f.tau_cmd7, 0))
                THEN 9
            WHEN f.controller = 2 AND NOT coalesce(isfinite(
                    f.q_target1 + f.q_target2 + f.q_target3 + f.q_target4 + f.q_target5
                  + f.q_target6 + f.q_target7 + f.q_target_filtered1 + f.q_target_filtered2
                  + f.q_target_filtered3 + f.q_target_filtered4 + f.q_target_filtered5
                  + f.q_target_filtered6 + f.q_target_filtered7), false)
                THEN 9
            -- Cartesian target: null (kept in targets.parquet instead) is not a defect
            WHEN f.controller IS DISTINCT FROM 2 AND NOT coalesce(isfinite(
                    f.tgt_px + f.tgt_py + f.tgt_pz + f.tgt_qx + f.tgt_qy + f.tgt_qz + f.tgt_qw),
                    true)
                THEN 9
        END::UTINYINT AS excl,
        CASE WHEN len(coalesce(ri.recorded_gaps, [])) > 0 THEN
            list_max(list_transform(
                list_filter(ri.recorded_gaps, lambda g: g.seq_to < f.seq),
                lambda g: g.seq_to))
        END AS gap_end_before
    FROM (FROM frames UNION ALL BY NAME SELECT NULL::BOOLEAN AS stale WHERE false) f
    LEFT JOIN run_info ri ON ri.robot = f.robot AND ri.run = f.run
    WHERE (robot_filter IS NULL OR f.robot = robot_filter)
      AND (run_filter IS NULL OR f.run = run_filter)
      AND coalesce(ri.fit_eligible, true)
),
win AS (
    SELECT
        *,
        lag(seq) OVER w AS prev_seq,
        lag(t_s) OVER w AS prev_t_s,
        lag(t_s, 2) OVER w AS prev2_t_s,
        lag(controller) OVER w AS prev_controller,
        lag(joint_reset_count) OVER w AS prev_reset,
        lag(cfg) OVER w AS prev_cfg,
        lag(excl) OVER w AS prev_excl,
        lead(seq) OVER w IS NULL AS is_last
    FROM tick
    WINDOW w AS (PARTITION BY robot, run ORDER BY seq)
),
edge AS (
    -- b_in: why the step from the previous tick into this one splits (null: it does not).
    -- t_ref: the time the step is measured from: the previous tick's, or the one before it
    -- when the previous tick stepped back (a row out of order is no lost time after it).
    SELECT
        *,
        CASE
            WHEN prev_seq IS NULL THEN 1
            WHEN gap_end_before > prev_seq THEN 4
            WHEN seq - prev_seq <> 1 THEN 3
            WHEN t_s < prev_t_s THEN 12
            WHEN t_s = prev_t_s THEN 14
            WHEN time_gaps AND t_s - t_ref > 1.5 * Pt THEN 11
            WHEN controller IS DISTINCT FROM prev_controller THEN 5
            WHEN list_contains(split_on, 'reset')
                 AND joint_reset_count IS DISTINCT FROM prev_reset THEN 6
            WHEN list_contains(split_on, 'gain_change') AND cfg IS DISTINCT FROM prev_cfg THEN 7
            WHEN list_contains(split_on, 'period_outlier')
                 AND abs(control_period_s - P) > tol THEN 10
        END::UTINYINT AS b_in
    FROM (SELECT *, CASE WHEN prev_t_s < prev2_t_s THEN prev2_t_s ELSE prev_t_s END AS t_ref FROM win)
),
lost AS (
    -- ticks lost in the step into this tick: by seq, or by time on a consecutive seq
    SELECT
        *,
        CASE b_in WHEN 3 THEN seq - prev_seq - 1
                  WHEN 11 THEN greatest(round((t_s - t_ref) / Pt)::BIGINT - 1, 1) END
            AS lost_in
    FROM edge
),
event AS (
    -- The few ticks where something happens; an interval runs from a start event to the
    -- tick before the next event (or to the run's last tick).
    SELECT
        *,
        CASE WHEN excl IS NULL THEN coalesce(b_in, prev_excl) END AS start_code,
        lead(seq) OVER v AS n_seq,
        lead(prev_seq) OVER v AS n_prev_seq,
        lead(prev_t_s) OVER v AS n_prev_t_s,
        lead(t_s) OVER v AS n_t_s,
        coalesce(lead(b_in) OVER v, lead(excl) OVER v) AS n_code,
        lead(lost_in) OVER v AS n_lost_in
    FROM lost
    WHERE b_in IS NOT NULL OR excl IS NOT NULL OR prev_excl IS NOT NULL OR is_last
    WINDOW v AS (PARTITION BY robot, run ORDER BY seq)
),
interval_rows AS (
    SELECT
        robot, run,
        (row_number() OVER (PARTITION BY robot, run ORDER BY seq) - 1)::BIGINT AS interval_index,
        seq AS seq_first,
        t_s AS t_first_s,
        -- no next event: this start is the run's last tick; next event with a code: the
        -- interval stops before it; otherwise the next event is the run's last tick.
        CASE WHEN n_seq IS NULL THEN seq WHEN n_code IS NOT NULL THEN n_prev_seq ELSE n_seq END
            AS seq_last,
        CASE WHEN n_seq IS NULL THEN t_s WHEN n_code IS NOT NULL THEN n_prev_t_s
             ELSE n_t_s END AS t_last_s,
        CASE WHEN n_seq IS NULL OR n_code IS NULL THEN 2 ELSE n_code END AS end_code,
        start_code,
        CASE WHEN b_in IS NOT NULL THEN lost_in END AS ticks_lost_before,
        CASE WHEN n_seq IS NOT NULL AND n_code IS NOT NULL THEN n_lost_in END AS ticks_lost_after,
        P,
        controller,
        joint_reset_count
    FROM event
    WHERE start_code IS NOT NULL
)
SELECT
    i.robot, i.run, interval_index, seq_first, seq_last, t_first_s, t_last_s,
    seq_last - seq_first + 1 AS frame_count,
    t_last_s - t_first_s AS duration_s,
    i.controller,
    -- the applied gains at the interval's first tick, read back from its frame (keeping 16
    -- gain columns out of the window keeps its sort narrow)
    CASE WHEN i.controller = 2 THEN
        [g.K_joint1, g.K_joint2, g.K_joint3, g.K_joint4, g.K_joint5, g.K_joint6, g.K_joint7]
    END AS K_joint,
    CASE WHEN i.controller = 2 THEN
        [g.D_joint1, g.D_joint2, g.D_joint3, g.D_joint4, g.D_joint5, g.D_joint6, g.D_joint7]
    END AS D_joint,
    g.filter_alpha, g.joint_use_friction <> 0 AS use_friction, i.joint_reset_count,
    ['run_start', 'run_end', 'seq_gap', 'recorded_gap', 'mode_change', 'reset', 'gain_change',
     'target_invalid', 'nonfinite', 'period_outlier', 'time_gap', 'clock_reversal',
     'stale', 'time_repeat'][start_code] AS start_reason,
    ['run_start', 'run_end', 'seq_gap', 'recorded_gap', 'mode_change', 'reset', 'gain_change',
     'target_invalid', 'nonfinite', 'period_outlier', 'time_gap', 'clock_reversal',
     'stale', 'time_repeat'][end_code] AS end_reason,
    ticks_lost_before, ticks_lost_after, P AS period_s
FROM interval_rows i
LEFT JOIN frames g
    ON g.robot = i.robot AND g.run = i.run AND g.seq = i.seq_first AND i.controller = 2
WHERE coalesce(t_last_s - t_first_s, 0.0) >= min_duration_s  -- no t_s: duration unknown, 0
ORDER BY i.robot, i.run, seq_first;

CREATE OR REPLACE VIEW intervals AS SELECT * FROM clean_intervals();
