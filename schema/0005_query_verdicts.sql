-- Touchstone store, migration 5: sweep_verdicts keeps a model's primary statuses as one column
-- per mode instead of a "mode=status" text[] (Compare and Gate read 100k rows of it per sweep;
-- parsing an array per row was most of their time). Kept answers are derived data: they are
-- dropped here and taken again by the next SummarizeDoneSweeps (its sweep_facts row goes too).
DELETE FROM sweep_facts;
DELETE FROM sweep_groups;
DELETE FROM sweep_verdicts;
DELETE FROM sweep_op_demand;
DELETE FROM sweep_breaks;
ALTER TABLE sweep_verdicts DROP COLUMN statuses;
ALTER TABLE sweep_verdicts
  ADD COLUMN eager   text,  -- the primary verdicts; NULL: mode not recorded
  ADD COLUMN compile text,
  ADD COLUMN train   text;
