-- Touchstone store, migration 7: jobs get a full index on shard_id (the partial jobs_shard, NOT
-- done only, goes: the lease path's "shard_id = $1 AND NOT done" reads a shard's few hundred
-- rows either way). Deleting a sweep's shards (prune) checks jobs.shard_id's foreign key for
-- every shard; without an index on every row that check scanned all jobs of every sweep, and a
-- prune of one sweep took minutes on a database of 30 full sweeps.
CREATE INDEX jobs_by_shard ON jobs (shard_id);
DROP INDEX jobs_shard;
