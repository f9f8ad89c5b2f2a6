// touchstone-worker: registers with the scheduler, leases shards, runs each model in its runner
// child (runner_client.h), reports results in batches with the shard's lease token, heartbeats,
// and drains on request (SIGTERM in main).
//
// Threads: the main loop (lease, run, report) on the caller's thread; a heartbeat thread for the
// current lease; the HTTP server (/metrics, /healthz) thread.
//
// Failure handling: every RPC is retried with jittered exponential backoff (0.05-0.1 s doubling
// to 1-2 s) while the scheduler or its database is unavailable (UNAVAILABLE, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED); idle polls wait the poll period +-50%, so workers started or cut off
// together do not keep calling in the same millisecond. Results are kept until a
// report is acknowledged, and reports are idempotent, so a retry never duplicates. A lease the
// scheduler refuses (FAILED_PRECONDITION) is dropped at once: another worker has the shard.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ts::worker {

struct WorkerOptions {
  std::string scheduler = "127.0.0.1:7300";
  std::string token;        // bearer token of the worker role (or admin); empty: none
  std::string tls_ca_file;  // set: TLS to the scheduler, trusting these CA certificates
  std::string name;         // default: host/pid
  std::string runner_path;  // touchstone-runner
  std::string state_dir;    // profiles and the runner's log
  // Hub-mirror weights: a job whose model id has a checkpoint under weights_dir/<id> runs on
  // it (the runner resolves and reads it; zoo/safetensors.h); empty: seeded weights.
  std::string weights_dir;
  // Reference bundles (workers/refs): a folder store the runner reads and writes directly (the
  // embedded default's STATE/refs, shared by its workers). Empty: the fleet's, kept by the
  // scheduler and copied to STATE/refs as shards need them (reference_sync.h).
  std::string references_dir;
  // true (`--references fresh`): compute every model's references again (and store them).
  bool fresh_references = false;
  int http_port = 0;        // -1: none
  // The HTTP listener's address (/metrics and /healthz, open: counts only); 0.0.0.0 for a
  // Prometheus or a kubelet probe from another host.
  std::string http_host = "127.0.0.1";
  int report_batch = 16;    // results per ReportResults
  double report_interval_s = 2;  // or this long since the last report
  double idle_poll_s = 0.5;      // wait when the queue is empty (the scheduler may say less), +-50%
  // LeaseShard long poll: the scheduler may hold "nothing queued" this long, answering as soon
  // as work is queued (0: poll every idle_poll_s instead). Cancelled at once by Drain().
  double long_poll_s = 10;
  double rpc_timeout_s = 30;
};

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& opts);
  ~Worker();

  // Runs until Drain(); returns OK after a clean drain.
  absl::Status Run();
  // Thread- and signal-safe request to finish the current model, report, release the shard and
  // return from Run().
  void Drain();
  int http_port() const;

  struct Impl;

 private:
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::worker
