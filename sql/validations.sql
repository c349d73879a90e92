-- validations.sql: sim-against-real validations under <lake>/validations/validation=<id>/
-- (writers: `twinlake fit validate`, twinlake.fit.trust.validate; FrankaTwin metrics.json imports).
--
-- Returns:
--   validations       one row per validation (validation.parquet): validation_source
--                     ('twinlake' | 'frankatwin_import'), created_utc, robot, run (nullable),
--                     fit (nullable), sim_label ('fitted' | 'nominal' | file name), num_samples,
--                     duration_s, ee_pos_rmse_3d_m, ee_ori_rmse_rad, q_rmse_all_rad,
--                     dq_rmse_all_rad_s, q_rmse_rad (list<double>, 7), verdict ('pass' | 'fail' |
--                     NULL when no threshold was declared), thresholds_json, metrics_json,
--                     torque_floor_ratio (a torque fit's held-out prediction of a run it
--                     could not replay, validation_source 'twinlake_torque': its worst joint's
--                     torque residual over the torque noise floor; the q and EE columns NULL);
--                     `validation` is the VARCHAR partition id
--   fit_validations   per (fit, robot, run): the fitted and nominal q RMSE, the fitted torque
--                     floor ratio (torque validations) and source, the fitted verdict,
--                     and `passed` (true only when the fitted parameters passed declared
--                     thresholds); the latest validation of each label wins. This is how a
--                     fit's record says which held-out runs it passed.
--
-- On a lake without validations both views exist and are empty.

-- always
CREATE OR REPLACE VIEW empty_validations AS
SELECT NULL::VARCHAR AS validation, NULL::VARCHAR AS validation_source, NULL::VARCHAR AS created_utc,
       NULL::VARCHAR AS robot, NULL::VARCHAR AS run, NULL::VARCHAR AS fit, NULL::VARCHAR AS sim_label,
       NULL::BIGINT AS num_samples, NULL::DOUBLE AS duration_s, NULL::DOUBLE AS ee_pos_rmse_3d_m,
       NULL::DOUBLE AS ee_ori_rmse_rad, NULL::DOUBLE AS q_rmse_all_rad, NULL::DOUBLE AS dq_rmse_all_rad_s,
       NULL::DOUBLE[] AS q_rmse_rad, NULL::VARCHAR AS verdict, NULL::VARCHAR AS thresholds_json,
       NULL::VARCHAR AS metrics_json, NULL::DOUBLE AS torque_floor_ratio
WHERE false;

-- requires: validations/*/validation.parquet
-- (unioned by name with the empty typed view: every contract column exists even when no
-- file written so far has it)
CREATE OR REPLACE VIEW validations AS
SELECT * FROM empty_validations
UNION ALL BY NAME
SELECT * FROM lake_parquet('/validations/*/validation.parquet');

-- unless: validations/*/validation.parquet
CREATE OR REPLACE VIEW validations AS SELECT * FROM empty_validations;

-- always
CREATE OR REPLACE VIEW fit_validations AS
WITH latest AS (
    SELECT *, row_number() OVER (PARTITION BY fit, robot, run, sim_label
                                 ORDER BY created_utc DESC, validation DESC) AS rn
    FROM validations
    WHERE fit IS NOT NULL)
SELECT f.fit, f.robot, f.run,
       f.q_rmse_all_rad AS fitted_q_rmse_all_rad,
       n.q_rmse_all_rad AS nominal_q_rmse_all_rad,
       f.ee_pos_rmse_3d_m AS fitted_ee_pos_rmse_3d_m,
       f.torque_floor_ratio AS fitted_torque_floor_ratio,
       f.validation_source AS fitted_source,
       f.verdict AS fitted_verdict,
       n.verdict AS nominal_verdict,
       coalesce(f.verdict = 'pass', false) AS passed,
       f.thresholds_json,
       f.validation AS fitted_validation,
       n.validation AS nominal_validation
FROM latest AS f
LEFT JOIN latest AS n
  ON n.fit = f.fit AND n.robot IS NOT DISTINCT FROM f.robot AND n.run IS NOT DISTINCT FROM f.run
 AND n.sim_label = 'nominal' AND n.rn = 1
WHERE f.sim_label = 'fitted' AND f.rn = 1;
