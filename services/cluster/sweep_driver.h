// SweepDriver: the client side of a sweep, over the scheduler's gRPC API. It loads catalog
// models into the scheduler, creates the sweep, follows it with a progress line until it ends
// (cancelling it when interrupted), and lists its results for the summary table. It talks to any
// scheduler: the one a LocalCluster started (`touchstone sweep`, tests, benchmarks) or a remote
// one (`touchstone submit`).
//
// Typical use:
//   auto driver = SweepDriver::Connect({cluster->target(), cluster->token()});
//   for (...) driver->AddModel(model);   // batched, 2,000 a call
//   driver->FlushModels();
//   auto created = driver->CreateSweep(request);
//   auto followed = driver->Follow(created->sweep_id(), {.between_polls = supervise});
//   auto tally = driver->Summarize(created->sweep_id(), [&](const ResultRow& r) { ... });
//
// The progress line (on FollowOptions::out, stderr by default):
//   "D/E models  R models/s  ETA S s  failures F  confirmation runs C/T"
// redrawn in place (\r) on a terminal, else one line every 10 s and one at the end.
//
// Ownership: owns its gRPC channel and stub. The `interrupted` flag and the callbacks in
// FollowOptions are borrowed for the duration of Follow().
// Threads: none of its own (gRPC's are internal). One owner thread: no method is thread-safe;
// every call blocks it. Follow() blocks until the sweep leaves the running state or is
// interrupted, polling GetSweep about once a second (less often when the poll is slow).
// Errors: the scheduler's, converted by services/common/grpc_status.h (codes as documented in
// proto/touchstone/v1/scheduler.proto: INVALID_ARGUMENT names the field, NOT_FOUND the sweep,
// UNAUTHENTICATED a wrong token, PERMISSION_DENIED a token whose role may not (a reader's
// CreateSweep), UNAVAILABLE no scheduler). Connect: NOT_FOUND / INVALID_ARGUMENT for an
// unreadable or empty CA file. UpsertModels and CreateSweep are
// retried while UNAVAILABLE (up to ~20 s, for a scheduler being restarted); the other calls are
// not. Follow() returns the error of its between_polls callback, and ignores failed polls.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "touchstone/v1/query.pb.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::cluster {

struct SweepDriverOptions {
  std::string target;  // host:port of the scheduler's gRPC service
  std::string token;   // bearer token (admin: the driver creates sweeps); empty: none
  std::string tls_ca_file = "";  // set: TLS trusting these CAs (services/common/tls.h)
};

struct FollowOptions {
  // Set (by a signal handler) to stop following: the sweep is cancelled first, so that no
  // worker, here or elsewhere, leases its remaining shards. May be null.
  const std::atomic<bool>* interrupted = nullptr;
  // Called before every poll, e.g. LocalCluster::Supervise; an error ends Follow() with it.
  std::function<absl::Status()> between_polls;
  FILE* out = stderr;  // the progress line; null: none
  // When no job was recorded for stall_note_s, a line says so and why: the scheduler's last
  // error if progress polls fail, and this (e.g. LocalCluster::Diagnose); neither: "no job
  // finished".
  std::function<std::string()> why_stalled;
  double stall_note_s = 60;
  // Progress polls failing for this long end Follow() with UNAVAILABLE naming the last error,
  // rather than waiting forever (the sweep itself is left running).
  double unreachable_limit_s = 600;
};

struct FollowResult {
  touchstone::v1::SweepProgress progress;  // the last one polled; interrupted: CancelSweep's
                                           // (empty when it failed)
  double sweep_s = 0;                      // time spent following
  bool interrupted = false;
  absl::Status cancel;  // interrupted: how CancelSweep went
};

// What Summarize() counted over the listed rows.
struct ResultTally {
  int64_t listed = 0;
  int64_t flaky = 0;          // rows whose regression was confirmed flaky
  int64_t deterministic = 0;  // rows whose regression was confirmed deterministic
};

class SweepDriver {
 public:
  static constexpr int kUpsertBatch = 2000;
  // A batch is sent sooner when its encoded size reaches this (the scheduler takes at most
  // common::kMaxRequestBytes per request).
  static constexpr size_t kUpsertBatchBytes = 8 << 20;

  static absl::StatusOr<std::unique_ptr<SweepDriver>> Connect(const SweepDriverOptions& opts);
  ~SweepDriver();
  SweepDriver(const SweepDriver&) = delete;
  SweepDriver& operator=(const SweepDriver&) = delete;

  // Queues a model for the scheduler's catalog; sends the queue when it reaches kUpsertBatch
  // models or kUpsertBatchBytes.
  absl::Status AddModel(touchstone::v1::CatalogModel model);
  // Sends the models still queued.
  absl::Status FlushModels();
  absl::StatusOr<touchstone::v1::CreateSweepResponse> CreateSweep(
      const touchstone::v1::CreateSweepRequest& request);

  absl::StatusOr<touchstone::v1::SweepProgress> Progress(int64_t sweep_id);
  absl::StatusOr<touchstone::v1::SweepProgress> Cancel(int64_t sweep_id);
  // Polls until the sweep is no longer running, drawing the progress line.
  absl::StatusOr<FollowResult> Follow(int64_t sweep_id, const FollowOptions& opts);
  // Streams the sweep's results (one row per model) to `each`, and counts confirmations.
  absl::StatusOr<ResultTally> Summarize(
      int64_t sweep_id, const std::function<void(const touchstone::v1::ResultRow&)>& each);
  // The sweep's conformance table, from the Query service (GetSummary): the same answer
  // `touchstone summary` and release tooling get.
  absl::StatusOr<touchstone::v1::Summary> Table(
      int64_t sweep_id, touchstone::v1::GroupBy group_by = touchstone::v1::GROUP_BY_TASK);

 private:
  struct Rpc;  // the channel and stub (keeps gRPC out of this header)
  explicit SweepDriver(std::unique_ptr<Rpc> rpc);

  std::unique_ptr<Rpc> rpc_;
  touchstone::v1::UpsertModelsRequest pending_;
  size_t pending_bytes_ = 0;
};

}  // namespace ts::cluster
