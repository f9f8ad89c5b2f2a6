-- Touchstone store, migration 10: numeric drift alerts and the alert stream (issue 11;
-- detection in services/store/drift.cc, the test in services/query/drift_stats.h).
--
-- alerts.cause_kind gains 'drift': passing models whose rmse ratio or compile time stepped up
--   against their own history (cause = the metric); always a warning.
-- alert_models.detail: what a human reads of a drifting model ("rmse_ratio 0.62 -> 1.41 ...").
-- alerts_updated: WatchAlerts reads the alerts changed since its last poll.
-- alerts.delivered_at (no DDL): from this version on it holds the updated_at of the version
--   Alertmanager last received, and "changed since delivered" is delivered_at <> updated_at
--   (a change committed during a delivery round used to be marked delivered unsent). The
--   UPDATE below makes rows delivered under the old meaning (a read time at or after their
--   updated_at) read as delivered.
ALTER TABLE alerts DROP CONSTRAINT alerts_cause_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_cause_kind_check
  CHECK (cause_kind IN ('suspect', 'op', 'signature', 'status', 'drift'));
ALTER TABLE alert_models ADD COLUMN detail text NOT NULL DEFAULT '';
CREATE INDEX alerts_updated ON alerts (updated_at);
UPDATE alerts SET delivered_at = updated_at WHERE delivered_at >= updated_at;
