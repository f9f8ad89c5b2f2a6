-- Touchstone store, migration 11: schedules (issue 13; services/store/schedules.cc).
--
-- schedules: a sweep to start at each time a 5-field UTC cron spec matches (services/common/
--   cron.h). The profile is kept by content (profiles row: name and sha); the filter is the
--   SweepFilter in protobuf's JSON. baseline: 'previous' (the newest done sweep of this
--   schedule) or 'none'. next_due: the next time it fires; the ticker of any scheduler takes
--   the due rows with FOR UPDATE SKIP LOCKED, so each due time is handled by one scheduler.
-- schedule_runs: what happened at each due time: started (sweep_id), skipped (the previous
--   sweep of the schedule was still running) or failed (detail says why). The primary key makes
--   a due time's run a single row whatever the number of schedulers.
-- sweeps.schedule_id: the schedule that started the sweep (NULL for sweeps started by hand).
CREATE TABLE schedules (
  schedule_id     bigserial PRIMARY KEY,
  name            text NOT NULL UNIQUE,
  cron            text NOT NULL,
  profile_id      bigint NOT NULL REFERENCES profiles,
  filter          jsonb NOT NULL DEFAULT '{}',
  sample          bigint NOT NULL DEFAULT 0 CHECK (sample >= 0),
  seed            bigint NOT NULL DEFAULT 0,
  modes           text[] NOT NULL DEFAULT '{}',
  priority        int NOT NULL DEFAULT 0,
  baseline        text NOT NULL DEFAULT 'previous' CHECK (baseline IN ('previous', 'none')),
  model_timeout_s double precision NOT NULL DEFAULT 0,
  audit_ops       boolean NOT NULL DEFAULT false,
  enabled         boolean NOT NULL DEFAULT true,
  next_due        timestamptz,   -- NULL: the spec never matches again
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_due ON schedules (next_due) WHERE enabled;

CREATE TABLE schedule_runs (
  schedule_id bigint NOT NULL REFERENCES schedules ON DELETE CASCADE,
  due_at      timestamptz NOT NULL,
  outcome     text NOT NULL CHECK (outcome IN ('started', 'skipped', 'failed')),
  sweep_id    bigint REFERENCES sweeps,
  detail      text NOT NULL DEFAULT '',
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (schedule_id, due_at)
);

ALTER TABLE sweeps ADD COLUMN schedule_id bigint REFERENCES schedules ON DELETE SET NULL;
CREATE INDEX sweeps_schedule ON sweeps (schedule_id, sweep_id DESC) WHERE schedule_id IS NOT NULL;
