-- fits.sql: fit results published under <lake>/fits/fit=<fit_id>/ (writer: twinlake.fit.records.record).
--
-- Returns:
--   fits         one row per fit (fit.parquet): fit_source ('twinlake' | 'frankatwin_import'),
--                created_utc, status, best_loss, the 29 parameters by their PARAM_NAMES
--                (armature_j1..7, mu_static_j1..7, dynamic_ratio_j1..7, mu_viscous_j1..7,
--                motor_delay_ms), seed, settings_json, ...; twinlake fits also have seed_count,
--                identifiability_json (95 % intervals, flags, condition number, weak directions,
--                and `covariance`: the free parameters' full matrix in their units with its
--                method; twinlake.fit.trust.identifiability, fit/core/covariance.py) and error_bars_s; `fit` is the VARCHAR partition id
--   fit_history  one row per generation and refinement iteration (history.parquet):
--                FrankaTwin's history fields iter, min, mean, best, iter_s, ms_per_tick, eta_s,
--                per_traj_min (list<double>), best_candidate_weighted (list<double>), plus
--                sigma, evals_per_s, delay_probs, stage ('cma' | 'refine')
--   fit_runs     one row per (run, interval) a fit used (runs.parquet): robot, run,
--                interval_index, seq_first, seq_last, role ('train' | 'holdout'), weight, loss,
--                run_sha256
--   fit_seeds    one row per seeded search of a fit (seeds.parquet, `fit run --seeds N`): seed,
--                best_loss, chosen (the seed whose optimum is the fit), the 29 parameters
--   verdicts     every verdict ever decided for a fit (verdicts/fit=<id>/stamp=<stamp>/verdict.parquet,
--                append-only; writer twinlake.fit.reports.verdict_record): created_utc (ISO 8601,
--                microseconds), level ('trusted' | 'usable with caveats' | 'not trusted'),
--                reasons_json (list of plain-word reasons, most important first), verdict_json
--                (level, reasons, every parameter's status), evidence_json, trigger; `fit` and
--                `stamp` (<UTC>Z-<sha8 of the content>) are VARCHAR partition columns
--   fit_verdicts the latest verdict per fit: the largest created_utc, ties broken by the
--                larger stamp
--
-- On a lake without fits the four fit views exist and are empty (a few key columns only); so
-- do the two verdict views on a lake without verdicts.

-- requires: fits/*/fit.parquet
CREATE OR REPLACE VIEW fits AS
SELECT * FROM lake_parquet('/fits/*/fit.parquet');

-- unless: fits/*/fit.parquet
CREATE OR REPLACE VIEW fits AS
SELECT NULL::VARCHAR AS fit, NULL::VARCHAR AS fit_source, NULL::VARCHAR AS created_utc,
       NULL::VARCHAR AS status, NULL::DOUBLE AS best_loss, NULL::BIGINT AS seed,
       NULL::VARCHAR AS settings_json
WHERE false;

-- requires: fits/*/history.parquet
CREATE OR REPLACE VIEW fit_history AS
SELECT * FROM lake_parquet('/fits/*/history.parquet');

-- unless: fits/*/history.parquet
CREATE OR REPLACE VIEW fit_history AS
SELECT NULL::VARCHAR AS fit, NULL::BIGINT AS iter, NULL::DOUBLE AS "min",
       NULL::DOUBLE AS "mean", NULL::DOUBLE AS best
WHERE false;

-- requires: fits/*/runs.parquet
CREATE OR REPLACE VIEW fit_runs AS
SELECT * FROM lake_parquet('/fits/*/runs.parquet');

-- unless: fits/*/runs.parquet
CREATE OR REPLACE VIEW fit_runs AS
SELECT NULL::VARCHAR AS fit, NULL::VARCHAR AS robot, NULL::VARCHAR AS run,
       NULL::BIGINT AS interval_index, NULL::BIGINT AS seq_first, NULL::BIGINT AS seq_last,
       NULL::VARCHAR AS role, NULL::DOUBLE AS weight, NULL::DOUBLE AS loss,
       NULL::VARCHAR AS run_sha256
WHERE false;

-- requires: fits/*/seeds.parquet
CREATE OR REPLACE VIEW fit_seeds AS
SELECT * FROM lake_parquet('/fits/*/seeds.parquet');

-- unless: fits/*/seeds.parquet
CREATE OR REPLACE VIEW fit_seeds AS
SELECT NULL::VARCHAR AS fit, NULL::BIGINT AS seed, NULL::DOUBLE AS best_loss, NULL::BOOLEAN AS chosen
WHERE false;

-- requires: verdicts/*/*/verdict.parquet
CREATE OR REPLACE VIEW verdicts AS
SELECT * FROM lake_parquet('/verdicts/*/*/verdict.parquet');

-- unless: verdicts/*/*/verdict.parquet
CREATE OR REPLACE VIEW verdicts AS
SELECT NULL::VARCHAR AS fit, NULL::VARCHAR AS stamp, NULL::VARCHAR AS created_utc, NULL::VARCHAR AS level,
       NULL::VARCHAR AS reasons_json, NULL::VARCHAR AS verdict_json, NULL::VARCHAR AS evidence_json,
       NULL::VARCHAR AS trigger
WHERE false;

-- always
CREATE OR REPLACE VIEW fit_verdicts AS
SELECT * EXCLUDE (rn) FROM (
    SELECT *, row_number() OVER (PARTITION BY fit ORDER BY created_utc DESC, stamp DESC) AS rn
    FROM verdicts)
WHERE rn = 1;
