-- run_scope.sql: temporary views that narrow `frames` and `runs` to one run (loaded by
-- twinlake.catalog.sql.run_scope for a query that names its robot and run).
--
-- Temporary views come first on DuckDB's search path, so while they exist `frames` and
-- `runs` (and every macro reading them, such as clean_intervals) see only the files of the
-- variables run_scope_frames / run_scope_runs (VARCHAR[] of absolute paths, set with bound
-- parameters): binding and planning touch one run's footers whatever the size of the lake.
-- Unioned by name with the canonical empty tables, so every canonical column exists.
-- Returns: temp views frames, runs (same columns as the lake views, plus canonical ones
-- the run's files lack, as NULL).

-- always
CREATE OR REPLACE TEMP VIEW frames AS
SELECT * FROM lake_files(getvariable('run_scope_frames'))
UNION ALL BY NAME SELECT * FROM empty_frames;

CREATE OR REPLACE TEMP VIEW runs AS
SELECT * FROM lake_files(getvariable('run_scope_runs'))
UNION ALL BY NAME SELECT * FROM empty_runs;
