-- Touchstone store, migration 16: device performance (issue 30; result.proto ModeVerdict.perf,
-- the device clock of workers/simdevice/README.md, "Cost model").
--
-- results.perf_*: a mode's perf as reported (device_us, flops, bytes, mfu, launches,
--   fallback_us, transfer_bytes, peak_device_bytes, speedup and compression: compile only).
--   perf_top_ops: a jsonb array of {op, us, share}, largest first. Every perf column is NULL for
--   a mode without perf (it did not pass; rows written before this migration): never zeros.
-- sweep_groups: a kept sweep's perf per (task, family, arch) group, over the models whose
--   compile passed with a speedup: how many (perf_models), the sum of ln(speedup), the
--   compressions (count and sum), and the compiled MFUs (sorted), so that geomean speedup,
--   median MFU and mean compression come from the same arithmetic (services/query) whether the
--   sweep is kept or live. Groups kept before this migration have none.
-- alerts.kind: 'accuracy' (every alert so far) or 'performance'; performance alerts have
--   cause_kind 'perf_op' (models whose device time grew beyond the threshold against the
--   baseline, grouped by the op whose time grew most; cause = the op) or 'perf_line' (a class's
--   or task's geomean speedup under 0.95x of its best of the line's last 6 sweeps for 2 sweeps
--   in a row; cause = 'class:<arch>' or 'task:<task>').
ALTER TABLE results
  ADD COLUMN perf_device_us       double precision,
  ADD COLUMN perf_flops           double precision,
  ADD COLUMN perf_bytes           double precision,
  ADD COLUMN perf_mfu             double precision,
  ADD COLUMN perf_launches        bigint,
  ADD COLUMN perf_fallback_us     double precision,
  ADD COLUMN perf_transfer_bytes  double precision,
  ADD COLUMN perf_peak_bytes      bigint,
  ADD COLUMN perf_top_ops         jsonb,
  ADD COLUMN perf_speedup         double precision,
  ADD COLUMN perf_compression     double precision;

ALTER TABLE sweep_groups
  ADD COLUMN perf_models       bigint NOT NULL DEFAULT 0,
  ADD COLUMN speedup_log_sum   double precision NOT NULL DEFAULT 0,
  ADD COLUMN compression_n     bigint NOT NULL DEFAULT 0,
  ADD COLUMN compression_sum   double precision NOT NULL DEFAULT 0,
  ADD COLUMN mfus              double precision[] NOT NULL DEFAULT '{}';

ALTER TABLE alerts ADD COLUMN kind text NOT NULL DEFAULT 'accuracy'
  CHECK (kind IN ('accuracy', 'performance'));
ALTER TABLE alerts DROP CONSTRAINT alerts_cause_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_cause_kind_check
  CHECK (cause_kind IN ('suspect', 'op', 'signature', 'status', 'drift', 'perf_op', 'perf_line'));
