-- clean_intervals_run.sql: the clean intervals of one run, read straight from its two files.
-- Run by twinlake.catalog.intervals.clean_intervals when both robot and run are given, the
-- run has no valid stored intervals (catalog/stored_intervals.py) and its frames.parquet and
-- run.parquet hold every canonical column with its canonical type
-- (twinlake.catalog.sql.exact_run_files); otherwise it scopes the views (run_scope). Also run
-- by twinlake.catalog.stored_intervals at publish time over the staged files of a run
-- partition, whose default-rule result it stores as intervals.parquet: one query, one owner
-- of the rules, for both.
--
-- The CTEs `frames` and `runs` shadow the lake's views inside the `clean_intervals` macro
-- (sql/clean_intervals.sql, the only owner of the rules), so the macro binds and plans over
-- these two files: no SET VARIABLE, no temporary views to create and drop. NOT MATERIALIZED:
-- the macro reads `frames` twice (the ticks and the interval's first-tick gains) and each
-- read keeps only the columns it needs. `robot` and `run` are the bound ids, not the Hive
-- columns of the paths (hive_partitioning off: a staged partition's path holds no `robot=`
-- / `run=`); the files never hold columns of those names (docs/lake.md: partition columns).
--
-- Parameters (bound, never pasted): $frames_files, $runs_files VARCHAR[] (the run's absolute
--   paths: its partition under the lake root, or its staging directory), and the macro's
--   $robot, $run (also the ids of every row), $min_duration_s, $period_s, $period_tol_s,
--   $split_on (see sql/clean_intervals.sql).
-- Returns: the rows of clean_intervals(...) for that run (columns INTERVAL_COLUMNS of
--   twinlake.catalog.intervals), ordered by seq_first; the same rows as the `intervals` view
--   gives for the run with default parameters.

WITH
frames AS NOT MATERIALIZED (
    SELECT *, $robot::VARCHAR AS robot, $run::VARCHAR AS run FROM read_parquet($frames_files, hive_partitioning = false)),
runs AS NOT MATERIALIZED (
    SELECT *, $robot::VARCHAR AS robot, $run::VARCHAR AS run FROM read_parquet($runs_files, hive_partitioning = false))
SELECT * FROM clean_intervals(
    robot_filter := $robot, run_filter := $run, min_duration_s := $min_duration_s,
    period_s := $period_s, period_tol_s := $period_tol_s, split_on := $split_on)
