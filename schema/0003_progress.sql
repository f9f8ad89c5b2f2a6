-- Touchstone store, migration 3: progress without scanning the sweep.
-- Each shard keeps tallies of its jobs, written by whoever already holds the shard's row: the
-- sweep's creation and a split set the totals, a report (and a lost model recorded as crash)
-- adds what it marked done. GetSweep of a running sweep sums them over the sweep's shards
-- instead of counting its jobs and results. When a sweep is done its counts are taken from
-- the tables once, duplicate check included, and kept in sweeps.summary.
ALTER TABLE shards
  ADD COLUMN jobs_total     int NOT NULL DEFAULT 0,  -- jobs in the shard (all runs)
  ADD COLUMN jobs_done      int NOT NULL DEFAULT 0,
  ADD COLUMN primary_total  int NOT NULL DEFAULT 0,  -- run 1 jobs
  ADD COLUMN primary_done   int NOT NULL DEFAULT 0,
  ADD COLUMN primary_failed int NOT NULL DEFAULT 0;  -- run 1 done with a non-pass mode

-- Shards that exist already (an upgrade in the middle of a sweep).
UPDATE shards s
SET jobs_total = c.jobs_total, jobs_done = c.jobs_done,
    primary_total = c.primary_total, primary_done = c.primary_done
FROM (SELECT shard_id, count(*) AS jobs_total, count(*) FILTER (WHERE done) AS jobs_done,
             count(*) FILTER (WHERE run = 1) AS primary_total,
             count(*) FILTER (WHERE run = 1 AND done) AS primary_done
      FROM jobs GROUP BY shard_id) c
WHERE c.shard_id = s.shard_id;
UPDATE shards s SET primary_failed = f.n
FROM (SELECT j.shard_id, count(DISTINCT j.job_id) AS n
      FROM jobs j JOIN results r
        ON r.sweep_id = j.sweep_id AND r.model_id = j.model_id AND r.run = 1
      WHERE j.run = 1 AND j.done AND r.status <> 'pass'
      GROUP BY j.shard_id) f
WHERE f.shard_id = s.shard_id;
