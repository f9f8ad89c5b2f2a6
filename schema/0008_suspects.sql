-- Touchstone store, migration 8: gradient checks and suspects (issue 10; result.proto
-- ModeVerdict fields 29-32, scheduler.proto CreateSweepRequest.audit_ops).
--
-- results: the train mode's worst parameter gradient (rmse ratio, NaN when not measured, and the
--   parameter's name), whether the mode was replayed op by op (`audited`), and the ops over
--   their tolerance in that replay: `suspects`, a jsonb array of {op, shapes, dtype, ratio,
--   calls, total_calls} in the record's order (the first divergent op first), NULL when empty.
--   A ratio of 1e300 stands for a non-finite mismatch, so the array stays valid JSON. Rows
--   written before read back as not measured, not audited, no suspects.
-- sweeps: `audit_ops`, whether every passing mode is replayed too (leases carry it to workers).
--
-- No index: SuspectOps reads one sweep's primary results, which its partition and the
-- (sweep_id, model_id, mode, run) key already narrow (services/store/README.md has the figure).
ALTER TABLE results
  ADD COLUMN grad_rmse_ratio  double precision,
  ADD COLUMN grad_worst_param text,
  ADD COLUMN audited          boolean,
  ADD COLUMN suspects         jsonb;

ALTER TABLE sweeps ADD COLUMN audit_ops boolean NOT NULL DEFAULT false;
