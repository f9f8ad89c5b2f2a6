-- Touchstone store, migration 12: idempotent calls and the job in flight (issue 14;
-- services/store/requests.cc, leasing.cc).
--
-- rpc_requests: the answer to each CreateSweep and ReportResults that carried a request_id,
--   written in the call's own transaction. A retry (a lost answer) or a concurrent twin finds
--   the row (the twin's INSERT waits for the first commit) and gets the stored answer; the
--   digest (SHA-256 of the request's deterministic encoding) refuses an id reused for another
--   request. Rows older than a day are dropped by the schedulers' tickers.
-- shards.lease_request: the request_id of the LeaseShard call that took the current lease, so
--   that a retry of that call gets the same shard and token back.
-- shards.job_in_flight: the job the lease holder last said it was running (Heartbeat.job_id).
--   When the lease is lost, only that job is charged a lost lease.
CREATE TABLE rpc_requests (
  method      text NOT NULL,
  request_id  text NOT NULL,
  digest      bytea NOT NULL,
  response    bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (method, request_id)
);
CREATE INDEX rpc_requests_created ON rpc_requests (created_at);

ALTER TABLE shards ADD COLUMN lease_request text, ADD COLUMN job_in_flight bigint;
CREATE INDEX shards_lease_request ON shards (lease_request) WHERE state = 'leased';

-- A bad worker (issue 14): workers.failures counts the leases it ended in a row without storing
-- a result (lost, or released empty) since failing_since; after StoreOptions::quarantine_after
-- of them within quarantine_window_s it is quarantined until quarantined_until: it leases
-- nothing, and the leases it loses charge no model. A new registration under the same name
-- (the worker restarted by its supervisor) carries the count and the quarantine over.
-- shards.lease_results: results stored under the current lease. jobs.lost_by: the workers
-- whose lost leases charged the job; when one of them is quarantined, its charges on jobs not
-- yet done are taken back (the worker was the problem, not the model).
ALTER TABLE workers ADD COLUMN failures int NOT NULL DEFAULT 0,
                    ADD COLUMN failing_since timestamptz,
                    ADD COLUMN quarantined_until timestamptz;
CREATE INDEX workers_name ON workers (name, worker_id DESC);
ALTER TABLE shards ADD COLUMN lease_results int NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN lost_by bigint[] NOT NULL DEFAULT '{}';
