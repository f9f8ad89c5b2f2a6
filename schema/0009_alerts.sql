-- Touchstone store, migration 9: regression alerts and quarantine (issue 11; detection in
-- services/store/detection.cc, statistics in services/query/regression_stats.h).
--
-- alerts: one row per root cause (profile line, mode, cause kind, cause), reopened when the cause
--   comes back rather than duplicated. cause_kind: suspect (the first suspect op of the failing
--   mode), op (the fallback op or graph-break op the error or a break reason names), signature
--   (the normalized error's signature, services/common/error_signature.h), status (a failure
--   with no error text). cause_text is what a human reads (the op, or the normalized error).
--   Lifecycle: open -> acknowledged (an admin's note) -> resolved after 3 consecutive clean
--   sweeps of its line (sweeps that ran the mode and failed nothing for this cause); a
--   regression of a resolved cause reopens it. checked_sweep: the newest sweep the lifecycle
--   has counted, so that detecting a sweep twice changes nothing. delivered_at: when the state
--   Alertmanager last received was read; a change after it is delivered again.
-- alert_models: the models of an alert, with the sweep in which each regressed.
-- quarantine: a model and mode whose flips were found flaky twice in the last 5 sweeps of a
--   line; its flips raise no alert until it passes 3 sweeps in a row (then the row goes).
-- sweeps.detected_at: when detection ran on the sweep; the scheduler's ticker detects done
--   sweeps with a baseline that lack it, oldest first. Sweeps finished before this migration
--   count as detected: an upgrade does not alert on history.
ALTER TABLE sweeps ADD COLUMN detected_at timestamptz;
UPDATE sweeps SET detected_at = coalesce(finished_at, now()) WHERE state <> 'running';

CREATE TABLE alerts (
  alert_id       bigserial PRIMARY KEY,
  state          text NOT NULL DEFAULT 'open'
                   CHECK (state IN ('open', 'acknowledged', 'resolved')),
  line           text NOT NULL,   -- the profile line (sim-2.1 -> sim)
  mode           text NOT NULL,
  cause_kind     text NOT NULL CHECK (cause_kind IN ('suspect', 'op', 'signature', 'status')),
  cause          text NOT NULL,
  cause_text     text NOT NULL,
  severity       text NOT NULL CHECK (severity IN ('warning', 'major', 'critical')),
  first_sweep    bigint NOT NULL REFERENCES sweeps,
  last_sweep     bigint NOT NULL REFERENCES sweeps,   -- the last sweep that showed the cause
  checked_sweep  bigint NOT NULL,
  clean_sweeps   int NOT NULL DEFAULT 0,
  reopened       int NOT NULL DEFAULT 0,
  ack_note       text,
  ack_by         text,
  ack_at         timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  delivered_at   timestamptz,     -- the snapshot last posted to Alertmanager (NULL: never)
  UNIQUE (line, mode, cause_kind, cause)
);
-- ListAlerts: by state, newest first.
CREATE INDEX alerts_state ON alerts (state, alert_id DESC);

CREATE TABLE alert_models (
  alert_id  bigint NOT NULL REFERENCES alerts ON DELETE CASCADE,
  model_id  text NOT NULL,
  arch      text NOT NULL,
  task      text NOT NULL,
  sweep_id  bigint NOT NULL,   -- the sweep in which this model regressed for this cause
  PRIMARY KEY (alert_id, model_id)
);

CREATE TABLE quarantine (
  model_id       text NOT NULL,
  mode           text NOT NULL,
  since_sweep    bigint NOT NULL,
  checked_sweep  bigint NOT NULL,
  clean_passes   int NOT NULL DEFAULT 0,
  PRIMARY KEY (model_id, mode)
);
