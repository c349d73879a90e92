-- views.sql: the base views of the lake (loaded first by twinlake.catalog.connect).
--
-- Returns:
--   runs     one row per run (run.parquet): source, counts, seq range, gaps, completion,
--            raw file hashes, verdict and flags; `robot`, `run` are VARCHAR partition columns
--   frames   one row per control tick (frames.parquet), canonical 1-based columns, SI units
--   targets  one row per recorded target (targets.parquet), only when some source wrote one
--
-- Block markers (see catalog/sql.py): `-- requires: <glob>` runs the block only when the glob
-- matches a file under the lake root; `-- unless: <glob>` only when it matches none. `runs`
-- and `frames` always exist (empty, with the canonical columns, on an empty lake); other
-- views exist only once their files do. The lake root comes from getvariable('lake_root').
-- runs, frames and targets read the indexed views (indexed_runs, ...; sql/lake_files.sql,
-- catalog/sql.py): explicit file lists from the lake's file index, grouped by schema, so
-- binding reads one footer per schema and a query naming a run opens only that run's files.

-- always
-- lake_parquet(relative_glob): the lake's Parquet files matching it (relative to the lake root, with a
-- leading /), unioned by name, Hive partition columns (robot, run, fit, ...) as VARCHAR.
CREATE OR REPLACE MACRO lake_parquet(relative_glob) AS TABLE
SELECT * FROM read_parquet(
    getvariable('lake_root') || relative_glob,
    hive_partitioning = true,
    hive_types_autocast = false,
    union_by_name = true);

-- requires: runs/*/*/run.parquet
CREATE OR REPLACE VIEW runs AS
SELECT * FROM indexed_runs;

-- unless: runs/*/*/run.parquet
CREATE OR REPLACE VIEW runs AS SELECT * FROM empty_runs;

-- requires: runs/*/*/frames.parquet
CREATE OR REPLACE VIEW frames AS
SELECT * FROM indexed_frames;

-- unless: runs/*/*/frames.parquet
CREATE OR REPLACE VIEW frames AS SELECT * FROM empty_frames;

-- requires: runs/*/*/targets.parquet
CREATE OR REPLACE VIEW targets AS
SELECT * FROM indexed_targets;
