// The Touchstone store: every piece of sweep state lives in PostgreSQL (schema/), so a
// restarted scheduler carries on where the last one stopped.
//
// One Store owns one connection. It reconnects by itself: a call that finds the connection
// broken returns UNAVAILABLE, and the next call opens a new one.
//
// Requests are the scheduler API's messages (proto/touchstone/v1/scheduler.proto); the scheduler
// validates field shapes before calling, and the store checks what needs the database (lease
// tokens, job ownership, unknown names), naming the field in INVALID_ARGUMENT / NOT_FOUND /
// FAILED_PRECONDITION errors as the proto documents.
//
// Thread-safety: not thread-safe; one Store per thread (StorePool in the scheduler).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::store {

namespace pb = ::touchstone::v1;

struct StoreOptions {
  std::string url;               // postgresql://user@host:port/db
  double lease_ttl_s = 30;       // a lease not renewed for this long expires
  int split_after_expiries = 2;  // a multi-model shard whose lease expired this often is split
  int max_lost_leases = 3;       // a model whose shard was lost this often is recorded `crash`
  double connect_timeout_s = 5;
  // Plan each statement once per connection (plan_cache_mode = force_generic_plan): for a
  // connection that runs only the short lease-path statements, where PostgreSQL would
  // otherwise re-plan the lease statement (~0.9 ms) on every call. Not for connections that
  // run queries over the partitioned results, whose custom plans prune partitions.
  bool generic_plans = false;
};

struct ExpiryStats {
  int expired = 0;  // leases that ran out and were requeued
  int split = 0;    // shards split into single-model shards
  int crashed = 0;  // models recorded as crash after max_lost_leases
};

struct QueueStats {
  int64_t shards_queued = 0;
  int64_t shards_leased = 0;
  int64_t jobs_pending = 0;
  int64_t sweeps_running = 0;
};

class Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Connect(const StoreOptions& opts);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Applies the schema/ migrations this database lacks, under an advisory lock (several
  // schedulers may start at once). FAILED_PRECONDITION when the database is newer than us.
  absl::Status Migrate();
  // Versions applied, for tests and `touchstone db migrate`.
  absl::StatusOr<std::vector<int>> AppliedMigrations();

  absl::StatusOr<pb::RegisterWorkerResponse> RegisterWorker(const pb::RegisterWorkerRequest& r);
  // The next queued shard (highest priority, oldest first) with FOR UPDATE SKIP LOCKED;
  // has_shard=false when the queue is empty. NOT_FOUND for an unknown worker_id.
  absl::StatusOr<pb::LeaseShardResponse> LeaseShard(int64_t worker_id);
  // LeaseShard for several workers in one transaction and one leasing statement (the
  // scheduler batches the requests that queue up behind a busy lease thread). One answer per
  // worker, in order: NOT_FOUND for an unknown worker_id, has_shard=false when the queue ran
  // out. The outer status is the transaction's (a database error fails every answer).
  absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> LeaseShards(
      const std::vector<int64_t>& worker_ids);
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& r);
  // One transaction: checks the token (and renews the lease), stores results with COPY,
  // marks their jobs done, detects new failures vs the baseline and queues their confirmation
  // runs, settles confirmations. Idempotent: results whose job is done count as duplicates.
  absl::StatusOr<pb::ReportResultsResponse> ReportResults(const pb::ReportResultsRequest& r);
  absl::StatusOr<pb::FinishShardResponse> FinishShard(const pb::FinishShardRequest& r);
  // Requeues expired leases, splits shards that keep losing workers, records models lost too
  // often as `crash`, marks finished sweeps done.
  absl::StatusOr<ExpiryStats> ExpireLeases();

  absl::StatusOr<pb::UpsertModelsResponse> UpsertModels(const pb::UpsertModelsRequest& r);
  absl::StatusOr<pb::CreateSweepResponse> CreateSweep(const pb::CreateSweepRequest& r);
  absl::StatusOr<pb::SweepProgress> GetSweep(int64_t sweep_id);
  // Running -> cancelled; its queued shards end. Leased ones end at FinishShard or expiry.
  absl::StatusOr<pb::SweepProgress> CancelSweep(int64_t sweep_id);
  // Primary results of the sweep with model_id > after, ordered by model_id.
  absl::StatusOr<std::vector<pb::ResultRow>> ListResults(int64_t sweep_id, const std::string& after,
                                                         int limit);
  absl::StatusOr<QueueStats> Queue();
  absl::Status Ping();

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Embedded migrations, in order: {version, file name, SQL}.
struct Migration {
  int version;
  std::string name;
  std::string sql;
};
const std::vector<Migration>& Migrations();

}  // namespace ts::store
