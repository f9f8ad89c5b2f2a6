-- Touchstone store, migration 15 (issue 34): what a check could not check is said.
--
-- results.unchecked: the ops an op-by-op replay could not check (their CPU reference threw
--   given the call's arguments), a jsonb array of {op, calls, error} by op name, NULL when the
--   replay checked every op or did not run (result.proto ModeVerdict.unchecked). Rows written
--   before read back as none.
ALTER TABLE results ADD COLUMN unchecked jsonb;
