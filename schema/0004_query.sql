-- Touchstone store, migration 4: the query API (proto/touchstone/v1/query.proto).
--
-- 1. The whole record: the results and model_runs columns the record gained, so that GetModel
--    returns what the worker reported.
-- 2. Done sweeps' answers, taken once when a sweep is done (Store::SummarizeDoneSweeps, from the
--    scheduler's ticker; nothing writes to a done sweep afterwards) by the same statements that
--    answer running and cancelled sweeps live: per (task, family, arch) group counters, one
--    compact row per model, the op-demand and graph-break rankings. A sweep_facts row is written
--    last in that transaction: its presence says the rest is there. Prune deletes them all.
ALTER TABLE results
  ADD COLUMN has_accuracy     boolean,
  ADD COLUMN rmse_vs_declared double precision,
  ADD COLUMN max_rel_err      double precision,
  ADD COLUMN allclose         boolean,
  ADD COLUMN graph_nodes      bigint,
  ADD COLUMN compile_wall_ms  double precision,
  ADD COLUMN loss_declared    double precision[],
  ADD COLUMN loss_band        double precision[];

ALTER TABLE model_runs
  ADD COLUMN call_ratio   double precision NOT NULL DEFAULT 0,
  ADD COLUMN family       text NOT NULL DEFAULT '',
  ADD COLUMN arch         text NOT NULL DEFAULT '',
  ADD COLUMN task         text NOT NULL DEFAULT '',
  ADD COLUMN config_hash  text NOT NULL DEFAULT '',
  ADD COLUMN timing_names text[] NOT NULL DEFAULT '{}',   -- timings_ms as parallel arrays
  ADD COLUMN timing_ms    double precision[] NOT NULL DEFAULT '{}';

-- ListSweeps filters by creation time.
CREATE INDEX sweeps_created ON sweeps (created_at);

CREATE TABLE sweep_facts (
  sweep_id            bigint PRIMARY KEY REFERENCES sweeps,
  models              bigint NOT NULL,  -- primary records
  eager_native        bigint NOT NULL,  -- models no op blocks in eager
  compile_native      bigint NOT NULL,
  models_with_breaks  bigint NOT NULL
);

-- Per (task, family, arch) of the catalog: models, their opcov_ratio sum, and how many had
-- each "mode=status" (parallel arrays).
CREATE TABLE sweep_groups (
  sweep_id   bigint NOT NULL REFERENCES sweeps,
  task       text NOT NULL,
  family     text NOT NULL,
  arch       text NOT NULL,
  models     bigint NOT NULL,
  opcov_sum  double precision NOT NULL,
  statuses   text[] NOT NULL,
  counts     bigint[] NOT NULL,
  PRIMARY KEY (sweep_id, task, family, arch)
);

-- One row per primary model: what comparisons and gates read.
CREATE TABLE sweep_verdicts (
  sweep_id     bigint NOT NULL REFERENCES sweeps,
  model_id     text NOT NULL,
  task         text NOT NULL,
  arch         text NOT NULL,
  family       text NOT NULL,
  opcov_ratio  double precision NOT NULL,
  total_ms     double precision NOT NULL,
  statuses     text[] NOT NULL,  -- "mode=status"
  PRIMARY KEY (sweep_id, model_id)
);

CREATE TABLE sweep_op_demand (
  sweep_id         bigint NOT NULL REFERENCES sweeps,
  mode             text NOT NULL,
  rank             int NOT NULL,   -- 1.. in the answer's order
  op               text NOT NULL,
  models_blocked   bigint NOT NULL,
  models_fallback  bigint NOT NULL,
  models_break     bigint NOT NULL,
  blocks_alone     bigint NOT NULL,
  fallback_calls   bigint NOT NULL,
  fallback_ms      double precision NOT NULL,
  example_models   text[] NOT NULL,
  PRIMARY KEY (sweep_id, mode, rank)
);

CREATE TABLE sweep_breaks (
  sweep_id        bigint NOT NULL REFERENCES sweeps,
  rank            int NOT NULL,
  reason          text NOT NULL,
  op              text NOT NULL,
  models          bigint NOT NULL,
  breaks          bigint NOT NULL,
  example_models  text[] NOT NULL,
  PRIMARY KEY (sweep_id, rank)
);
