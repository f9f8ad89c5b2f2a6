-- Touchstone store, migration 1: catalog, profiles, sweeps, shards and jobs, results.
-- Forward-only: later changes are new files (0002_*.sql, ...); applied ones are never edited.

CREATE TABLE models (
  model_id     text PRIMARY KEY,
  task         text NOT NULL,
  arch         text NOT NULL,
  family       text NOT NULL DEFAULT '',
  config       jsonb NOT NULL,
  config_hash  text NOT NULL DEFAULT '',
  updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX models_task_arch ON models (task, arch);

CREATE TABLE profiles (
  profile_id   bigserial PRIMARY KEY,
  name         text NOT NULL,
  sha          text NOT NULL UNIQUE,
  body         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workers (
  worker_id     bigserial PRIMARY KEY,
  name          text NOT NULL,
  version       text NOT NULL DEFAULT '',
  slots         int NOT NULL DEFAULT 1,
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_seen     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sweeps (
  sweep_id        bigserial PRIMARY KEY,
  name            text NOT NULL DEFAULT '',
  profile_id      bigint NOT NULL REFERENCES profiles,
  filter          jsonb NOT NULL DEFAULT '{}',
  sample          bigint NOT NULL DEFAULT 0,
  seed            bigint NOT NULL DEFAULT 0,
  modes           text[] NOT NULL,
  priority        int NOT NULL DEFAULT 0,
  baseline_sweep  bigint REFERENCES sweeps,
  model_timeout_s double precision NOT NULL DEFAULT 300,
  state           text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'cancelled')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  finished_at     timestamptz
);

-- A shard is the unit of leasing. state: queued -> leased -> (queued again on expiry) -> done;
-- 'split' shards handed their jobs to single-model shards.
CREATE TABLE shards (
  shard_id       bigserial PRIMARY KEY,
  sweep_id       bigint NOT NULL REFERENCES sweeps,
  state          text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done', 'split')),
  priority       int NOT NULL DEFAULT 0,
  attempt        int NOT NULL DEFAULT 0,   -- leases so far
  expiries       int NOT NULL DEFAULT 0,   -- leases that ended without FinishShard
  lease_token    text,
  lease_expires  timestamptz,
  worker_id      bigint REFERENCES workers,
  estimated_ms   double precision NOT NULL DEFAULT 0
);
CREATE INDEX shards_queue ON shards (priority DESC, shard_id) WHERE state = 'queued';
CREATE INDEX shards_leased ON shards (lease_expires) WHERE state = 'leased';
CREATE INDEX shards_sweep ON shards (sweep_id, state);

-- One job per (sweep, model, run): run 1 is the model's primary run, runs 2 and 3 confirm a new
-- failure against the baseline sweep.
CREATE TABLE jobs (
  job_id        bigserial PRIMARY KEY,
  sweep_id      bigint NOT NULL REFERENCES sweeps,
  model_id      text NOT NULL REFERENCES models,
  run           int NOT NULL DEFAULT 1,
  shard_id      bigint NOT NULL REFERENCES shards,
  done          boolean NOT NULL DEFAULT false,
  lost_leases   int NOT NULL DEFAULT 0,   -- leases of its shard that expired before its result
  UNIQUE (sweep_id, model_id, run)
);
CREATE INDEX jobs_shard ON jobs (shard_id) WHERE NOT done;
CREATE INDEX jobs_sweep ON jobs (sweep_id, done);

-- One row per model, mode and run. Partitioned by sweep so that old sweeps are dropped whole.
CREATE TABLE results (
  sweep_id         bigint NOT NULL,
  model_id         text NOT NULL,
  mode             text NOT NULL,
  run              int NOT NULL,
  status           text NOT NULL,
  error            text NOT NULL DEFAULT '',
  error_signature  text NOT NULL DEFAULT '',
  worker_id        bigint,
  ms               double precision,
  rmse_device      double precision,
  rmse_reference   double precision,
  rmse_ratio       double precision,
  max_abs_err      double precision,
  cosine           double precision,
  graph_breaks     int,
  break_reasons    text[],
  device_segments  int,
  compile_ms       double precision,
  first_run_ms     double precision,
  loss_reference   double precision[],
  loss_device      double precision[],
  max_loss_gap_ratio double precision,
  recorded_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (sweep_id, model_id, mode, run)
) PARTITION BY LIST (sweep_id);
CREATE INDEX results_failures ON results (sweep_id, mode, status) WHERE status <> 'pass';
CREATE INDEX results_history ON results (model_id, mode);

-- Per model and run: coverage, timings and every op that reached the device (parallel arrays:
-- one row per model keeps ingest cheap; unnest() for op demand queries).
CREATE TABLE model_runs (
  sweep_id          bigint NOT NULL,
  model_id          text NOT NULL,
  run               int NOT NULL,
  worker_id         bigint,
  distinct_ops      int NOT NULL DEFAULT 0,
  native_ops        int NOT NULL DEFAULT 0,
  opcov_ratio       double precision NOT NULL DEFAULT 0,
  total_ms          double precision NOT NULL DEFAULT 0,
  peak_device_bytes bigint NOT NULL DEFAULT 0,
  ops               text[] NOT NULL DEFAULT '{}',
  op_calls          bigint[] NOT NULL DEFAULT '{}',
  op_ms             double precision[] NOT NULL DEFAULT '{}',
  op_native         boolean[] NOT NULL DEFAULT '{}',
  tiny_config       jsonb,
  recorded_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (sweep_id, model_id, run)
) PARTITION BY LIST (sweep_id);

-- A primary run that fails a mode the baseline passed; confirmation reruns settle it.
CREATE TABLE regressions (
  sweep_id         bigint NOT NULL REFERENCES sweeps,
  model_id         text NOT NULL,
  mode             text NOT NULL,
  baseline_status  text NOT NULL,
  status           text NOT NULL,
  confirmation     text NOT NULL DEFAULT 'pending' CHECK (confirmation IN ('pending', 'deterministic', 'flaky')),
  PRIMARY KEY (sweep_id, model_id, mode)
);
