-- campaigns.sql: randomisation campaigns under <lake>/campaigns/campaign=<id>/ (writer: twinlake.campaign).
--
-- Returns:
--   campaigns  one row per campaign (campaign.parquet): campaign (VARCHAR partition column),
--              fit, sample ('posterior' | 'ranges'), controller ('builtin' | MODULE:CALLABLE),
--              episodes_per_gain_set, gain_sets, episodes, seed, reference, reference_sha256,
--              config_hash, created_utc, config_json (the normalised configuration)
--   episodes   one row per published episode (summary.parquet, rebuilt by every `campaign run`):
--              campaign, episode_id, index, sample_index, gains_id, status, outcome, seed,
--              config_hash, abort_t_s, abort_reason, failure_category, wall_total_s, wall_sim_s,
--              the metrics (track_rms_rad, track_max_rad, track_rms_rad_j1..7, track_max_rad_j1..7,
--              tau_peak_nm_j1..7, tau_peak_ratio, torque_limit_exceeded, slew_saturated_ticks,
--              slew_saturated_fraction, ticks), the parameters by name (armature_j1, ...,
--              motor_delay_ms) and the gains (kp_j1..7, kd_j1..7, filter_alpha). Units: rad, N·m, s.
--
-- On a lake without campaigns both views exist and are empty (a few key columns only).

-- requires: campaigns/*/campaign.parquet
CREATE OR REPLACE VIEW campaigns AS
SELECT * FROM lake_parquet('/campaigns/*/campaign.parquet');

-- unless: campaigns/*/campaign.parquet
CREATE OR REPLACE VIEW campaigns AS
SELECT NULL::VARCHAR AS campaign, NULL::VARCHAR AS fit, NULL::VARCHAR AS sample, NULL::VARCHAR AS controller,
       NULL::BIGINT AS episodes, NULL::VARCHAR AS config_hash
WHERE false;

-- requires: campaigns/*/summary.parquet
CREATE OR REPLACE VIEW episodes AS
SELECT * FROM lake_parquet('/campaigns/*/summary.parquet');

-- unless: campaigns/*/summary.parquet
CREATE OR REPLACE VIEW episodes AS
SELECT NULL::VARCHAR AS campaign, NULL::VARCHAR AS episode_id, NULL::VARCHAR AS gains_id,
       NULL::VARCHAR AS outcome, NULL::DOUBLE AS track_rms_rad, NULL::DOUBLE AS track_max_rad
WHERE false;
