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
-- sweep_suspect_facts, sweep_suspects: a done sweep's SuspectOps answers per mode ('' for every
--   mode), kept with its other answers (MaterializeSweep, services/store/queries.cc) by the
--   statements that answer a running sweep live (about 1 s at 100k models; the kept answer is a
--   few rows). A sweep kept before this migration has none and is answered live.
--
-- No index on results: SuspectOps reads one sweep's primary results, which its partition and
-- the (sweep_id, model_id, mode, run) key already narrow (services/store/README.md).
ALTER TABLE results
  ADD COLUMN grad_rmse_ratio  double precision,
  ADD COLUMN grad_worst_param text,
  ADD COLUMN audited          boolean,
  ADD COLUMN suspects         jsonb;

ALTER TABLE sweeps ADD COLUMN audit_ops boolean NOT NULL DEFAULT false;

CREATE TABLE sweep_suspect_facts (
  sweep_id           bigint NOT NULL REFERENCES sweeps,
  mode               text NOT NULL,  -- '' for every mode
  models_failed      bigint NOT NULL,
  models_attributed  bigint NOT NULL,
  models_audited     bigint NOT NULL,
  PRIMARY KEY (sweep_id, mode)
);

CREATE TABLE sweep_suspects (
  sweep_id        bigint NOT NULL REFERENCES sweeps,
  mode            text NOT NULL,
  rank            int NOT NULL,   -- 1.. in the answer's order
  op              text NOT NULL,
  models_failed   bigint NOT NULL,
  models_named    bigint NOT NULL,
  models_warned   bigint NOT NULL,
  max_ratio       double precision NOT NULL,
  example_models  text[] NOT NULL,
  PRIMARY KEY (sweep_id, mode, rank)
);
