-- Touchstone store, migration 2: retention (`touchstone db prune`, Store::PruneSweeps).
-- A pruned sweep keeps its sweeps row as a tombstone: name, profile, dates, and in `summary`
-- the counts GetSweep gave when it was pruned. Its results_<id> and model_runs_<id>
-- partitions are detached (CONCURRENTLY, so other sweeps' ingest never waits) and dropped; its
-- jobs, shards and regressions rows are deleted.
ALTER TABLE sweeps DROP CONSTRAINT sweeps_state_check;
ALTER TABLE sweeps ADD CONSTRAINT sweeps_state_check
  CHECK (state IN ('running', 'done', 'cancelled', 'pruned'));
ALTER TABLE sweeps ADD COLUMN pruned_at timestamptz;
ALTER TABLE sweeps ADD COLUMN summary jsonb;
-- The age and keep-the-newest rules read finished sweeps by finish time.
CREATE INDEX sweeps_finished ON sweeps (finished_at) WHERE state IN ('done', 'cancelled');
