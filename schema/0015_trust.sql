-- Touchstone store, migration 15 (issue 34): what a check could not check is said.
--
-- results.unchecked: the ops an op-by-op replay could not check (their CPU reference threw
--   given the call's arguments), a jsonb array of {op, calls, error} by op name, NULL when the
--   replay checked every op or did not run (result.proto ModeVerdict.unchecked). Rows written
--   before read back as none.
ALTER TABLE results ADD COLUMN unchecked jsonb;
--
-- One cause, one alert: a suspect-op regression is one alert across the modes it broke (a wrong
-- kernel fails eager, compile and train alike), the modes a dimension of the alert.
-- alerts.modes: the modes its cause regressed in (sorted names); alerts.mode is '' for an alert
--   across modes (cause_kind suspect) and the one mode otherwise (the unique key stays (line,
--   mode, cause_kind, cause)). alert_models.modes: the modes each model regressed in for the
--   cause.
-- Existing suspect alerts, one per (line, mode, cause), become one per (line, cause): the oldest
-- of each group takes the others' models and modes, the worst of their states (open before
-- acknowledged before resolved) and severities, the widest span of sweeps; the others are
-- resolved (updated now, so Alertmanager is told), never reopened (detection looks the cause up
-- under mode '').
ALTER TABLE alerts ADD COLUMN modes text[];
UPDATE alerts SET modes = ARRAY[mode];
ALTER TABLE alerts ALTER COLUMN modes SET NOT NULL;
ALTER TABLE alert_models ADD COLUMN modes text[];
UPDATE alert_models m SET modes = ARRAY[a.mode] FROM alerts a WHERE a.alert_id = m.alert_id;
ALTER TABLE alert_models ALTER COLUMN modes SET NOT NULL;

CREATE TEMPORARY TABLE suspect_groups ON COMMIT DROP AS
  SELECT min(alert_id) AS keep, array_agg(alert_id) AS ids
  FROM alerts WHERE cause_kind = 'suspect' GROUP BY line, cause;

INSERT INTO alert_models (alert_id, model_id, arch, task, sweep_id, detail, modes)
SELECT g.keep, m.model_id, min(m.arch), min(m.task), min(m.sweep_id), '',
       array_agg(DISTINCT x ORDER BY x)
FROM suspect_groups g JOIN alert_models m ON m.alert_id = ANY(g.ids), unnest(m.modes) AS x
GROUP BY g.keep, m.model_id
ON CONFLICT (alert_id, model_id) DO UPDATE SET modes = excluded.modes,
  sweep_id = least(alert_models.sweep_id, excluded.sweep_id);

UPDATE alerts a SET
  mode = '', modes = s.modes, state = s.state, severity = s.severity, first_sweep = s.first_sweep,
  last_sweep = s.last_sweep, checked_sweep = s.checked_sweep, clean_sweeps = s.clean_sweeps,
  updated_at = now()
FROM (
  SELECT g.keep,
         array_agg(DISTINCT o.mode ORDER BY o.mode) AS modes,
         CASE WHEN bool_or(o.state = 'open') THEN 'open'
              WHEN bool_or(o.state = 'acknowledged') THEN 'acknowledged'
              ELSE 'resolved' END AS state,
         CASE max(CASE o.severity WHEN 'critical' THEN 2 WHEN 'major' THEN 1 ELSE 0 END)
              WHEN 2 THEN 'critical' WHEN 1 THEN 'major' ELSE 'warning' END AS severity,
         min(o.first_sweep) AS first_sweep, max(o.last_sweep) AS last_sweep,
         max(o.checked_sweep) AS checked_sweep, min(o.clean_sweeps) AS clean_sweeps
  FROM suspect_groups g JOIN alerts o ON o.alert_id = ANY(g.ids)
  GROUP BY g.keep) s
WHERE a.alert_id = s.keep;

UPDATE alerts a SET state = 'resolved', updated_at = now()
FROM suspect_groups g
WHERE a.alert_id = ANY(g.ids) AND a.alert_id <> g.keep AND a.state <> 'resolved';
