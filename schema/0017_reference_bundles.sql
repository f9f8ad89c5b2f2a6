-- Touchstone store, migration 17: reference bundles (issue 31; workers/refs/README.md).
--
-- 1. Where each model run's references came from (ModelResult.references): a sweep's hit rate
--    (`touchstone refs stats`) and the bundles it used (`touchstone refs export --sweep`).
ALTER TABLE model_runs
  ADD COLUMN refs_source  text NOT NULL DEFAULT '',  -- fresh | computed | stored | '' (none)
  ADD COLUMN refs_key     text NOT NULL DEFAULT '',  -- SHA-256 of the bundle key
  ADD COLUMN refs_content text NOT NULL DEFAULT '',  -- SHA-256 of the bundle used or stored
  ADD COLUMN refs_warning text NOT NULL DEFAULT '';  -- a stored bundle refused, and why

-- 2. Each mode judged against references from elsewhere too (ModeVerdict.references: one
--    ReferenceComparison each, protobuf JSON), and whether one disagrees with ours beyond both
--    references' noise (the reference in question, not the device: counted apart).
ALTER TABLE results
  ADD COLUMN ref_comparisons       jsonb,
  ADD COLUMN reference_in_question boolean NOT NULL DEFAULT false;

-- 3. A fleet's bundles (the embedded default keeps them in STATE/refs instead), served to
--    workers by the scheduler and uploaded by them. A bundle's bytes are stored once, under
--    their SHA-256, whatever the number of workers that computed them; a key names the bundle
--    its last writer stored (a refused bundle is replaced by the recomputed one).
CREATE TABLE reference_bundles (
  content_digest text PRIMARY KEY,
  body           bytea NOT NULL,
  size           bigint NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
-- Floats compress poorly and bundles are read whole: no TOAST compression.
ALTER TABLE reference_bundles ALTER COLUMN body SET STORAGE EXTERNAL;

CREATE TABLE reference_keys (
  key_digest     text PRIMARY KEY,
  model_id       text NOT NULL,
  weights_seed   numeric(20, 0) NOT NULL,  -- uint64
  device         text NOT NULL,
  zoo_version    text NOT NULL,
  torch_version  text NOT NULL,
  key_json       jsonb NOT NULL,
  content_digest text NOT NULL REFERENCES reference_bundles,
  stored_at      timestamptz NOT NULL DEFAULT now()
);
-- A shard's bundles: by model id (FetchReferences).
CREATE INDEX reference_keys_model ON reference_keys (model_id, weights_seed);
CREATE INDEX reference_keys_content ON reference_keys (content_digest);
