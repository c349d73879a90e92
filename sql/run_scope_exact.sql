-- run_scope_exact.sql: run_scope.sql for a run whose files already hold every canonical
-- column with its canonical type (checked from their footers by
-- twinlake.catalog.sql.run_scope): the same temporary views `frames` and `runs` over the
-- files of the variables run_scope_frames / run_scope_runs, read directly, without the
-- union with the empty canonical tables (nothing to add), which binds and plans faster.
-- Returns: temp views frames, runs (the run's columns, then robot, run).

-- always
CREATE OR REPLACE TEMP VIEW frames AS
SELECT * FROM read_parquet(getvariable('run_scope_frames'), hive_partitioning = true, hive_types_autocast = false);

CREATE OR REPLACE TEMP VIEW runs AS
SELECT * FROM read_parquet(getvariable('run_scope_runs'), hive_partitioning = true, hive_types_autocast = false);
