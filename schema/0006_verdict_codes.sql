-- Touchstone store, migration 6: a done sweep keeps its verdicts packed in one array, so that a
-- comparison of two kept sweeps reads two rows and merges them, instead of joining 2 x 100k rows.
--
-- models.model_no: a stable number per catalog model (existing rows are numbered here).
-- sweep_facts.verdict_codes: per primary model, ascending: model_no * 64 + eager + 4 * compile
--   + 16 * train, each mode 0 (not recorded), 1 (pass) or 2 (any other verdict): what telling a
--   flip, an appeared and a disappeared model apart needs (services/store/queries.cc).
-- ts_verdict_codes(sweep): those codes from sweep_verdicts; MaterializeSweep takes them with it,
--   and here for the sweeps kept before.
ALTER TABLE models ADD COLUMN model_no bigserial;
CREATE UNIQUE INDEX models_no ON models (model_no);

ALTER TABLE sweep_facts ADD COLUMN verdict_codes bigint[];

CREATE FUNCTION ts_verdict_codes(sweep bigint) RETURNS bigint[] LANGUAGE sql STABLE AS $$
  SELECT coalesce(array_agg(m.model_no * 64
           + CASE WHEN v.eager IS NULL THEN 0 WHEN v.eager = 'pass' THEN 1 ELSE 2 END
           + 4 * CASE WHEN v.compile IS NULL THEN 0 WHEN v.compile = 'pass' THEN 1 ELSE 2 END
           + 16 * CASE WHEN v.train IS NULL THEN 0 WHEN v.train = 'pass' THEN 1 ELSE 2 END
           ORDER BY m.model_no), '{}')
  FROM sweep_verdicts v JOIN models m USING (model_id)
  WHERE v.sweep_id = sweep
$$;

UPDATE sweep_facts SET verdict_codes = ts_verdict_codes(sweep_id);
ALTER TABLE sweep_facts ALTER COLUMN verdict_codes SET NOT NULL;
