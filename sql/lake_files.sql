-- lake_files.sql: the table macro the indexed views are built from (loaded by
-- twinlake.catalog.connect before views.sql).
--
-- lake_files(files): the Parquet files of the VARCHAR[] `files` (absolute paths, all with the
-- same schema: one group of the lake's file index, catalog/file_index.py), Hive partition
-- columns (robot, run) as VARCHAR. No `union_by_name`: the files share one schema, so DuckDB
-- reads only the first footer to bind, and a filter on robot / run drops the other files
-- before they are opened. catalog/sql.py sets one variable per group and unions the groups
-- BY NAME into the views indexed_runs, indexed_frames, indexed_targets that views.sql reads.

-- always
CREATE OR REPLACE MACRO lake_files(files) AS TABLE
SELECT * FROM read_parquet(
    files,
    hive_partitioning = true,
    hive_types_autocast = false);
