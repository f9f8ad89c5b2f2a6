// LocalCluster: a whole Touchstone cluster on this machine, as child processes of this one.
// PostgreSQL (a private embedded cluster under the state folder, or an existing database given
// by URL), one `touchstone-scheduler` and N `touchstone-worker` processes. `touchstone sweep`,
// the e2e tests and benchmarks start one; a client of a remote scheduler (`touchstone submit`)
// needs none, only a SweepDriver (sweep_driver.h).
//
// State folder (created; kept across runs, so that results stay sweep after sweep):
//   tokens            `role token` lines, one random token per role (worker, reader, admin;
//                     services/common/auth.h), mode 0600, made once and kept across runs
//   scheduler.ports   {"grpc_port", "http_port"} written by the scheduler once it listens
//   logs/             scheduler.log, worker-I.log (stdout and stderr of each service)
//   workers/wI/       each worker's own state folder
//   pg/data           the embedded PostgreSQL cluster (EmbeddedDataDir), unless db_url is set
//   pg/pgpass         its generated password (libpq password file, 0600; embedded_postgres.h)
//
// Lifecycle:
//   Start()          database, then the scheduler on a free loopback port (gRPC and HTTP);
//                    returns once the scheduler has reported its ports.
//   StartWorkers()   the N workers. Separate so that the caller queues work first and the
//                    workers do not begin by backing off an empty queue.
//   Supervise()      restarts the embedded PostgreSQL if its postmaster died (crash recovery
//                    keeps every committed result; on a full disk it waits for space instead,
//                    saying so once), then any service that died (the scheduler
//                    on the same port, so that the workers reconnect; a dead worker's shard
//                    comes back when its lease expires). Called between progress polls; never
//                    restarts a stopped service.
//   Stop()           in order: stop accepting (SIGTERM to every worker: they lease nothing
//                    more, finish or release their shard), drain and join (each worker gets
//                    30 s, then SIGKILL), then the scheduler (SIGTERM, SIGKILL after 15 s), then
//                    close the database (pg_ctl stop of the embedded cluster). The destructor
//                    calls it; it is idempotent.
//
// The services lead their own process groups: a terminal's Ctrl-C reaches only the owner, which
// then stops them in the order above.
//
// Ownership: owns its child processes and the embedded database; none outlives it. The
// `interrupted` flag in the options is borrowed and must outlive the cluster.
// Threads: none of its own. One owner thread: no method is thread-safe. Start() and
// RestartScheduler() block while the scheduler starts (at most 60 s); Stop() blocks while the
// services drain (at most about 30 s per worker, 15 s for the scheduler).
// Errors: Start() returns the embedded database's error (INTERNAL with the tool's output,
// NOT_FOUND without PostgreSQL binaries), INVALID_ARGUMENT when the state folder cannot be made,
// INTERNAL when a process cannot be spawned or the tokens file written, FAILED_PRECONDITION when
// an existing tokens file lets group or others read it, UNAVAILABLE when the scheduler exits (or
// `interrupted` is set) before listening, DEADLINE_EXCEEDED when it does not report its ports
// in 60 s; the messages name the log to read. Supervise() returns UNAVAILABLE when a service
// (or the embedded PostgreSQL) died more than 20 times or cannot be started again.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ts::store {
class EmbeddedPostgres;
}

namespace ts::cluster {

struct LocalClusterOptions {
  std::string state_dir = ".touchstone";
  std::string db_url;       // an existing PostgreSQL; empty: the embedded one under state_dir
  std::string bin_dir;      // where touchstone-{scheduler,worker,runner} are; empty: beside
                            // the running executable
  int workers = 1;          // StartWorkers() launches this many
  double lease_ttl_s = 30;  // the scheduler's --lease-ttl
  bool fast_unsafe = false; // the embedded PostgreSQL without fsync (embedded_postgres.h)
  // Reference bundles (workers/refs): the workers share the folder store STATE/refs, using a
  // stored bundle when one exists ("stored") or computing every model's again ("fresh").
  std::string references = "stored";
  // Set (by a signal handler) to give up waiting for the scheduler to start. May be null.
  const std::atomic<bool>* interrupted = nullptr;
  // Notices on stderr-like output ("<log_prefix>: starting embedded PostgreSQL under ...",
  // "<log_prefix>: ... exited (code C, signal S); restarting"). Null: none.
  FILE* notices = stderr;
  std::string log_prefix = "touchstone sweep";
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(LocalClusterOptions opts);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  absl::Status StartWorkers();
  absl::Status Supervise();
  // Kills the scheduler (SIGTERM, then SIGKILL after grace_s; grace_s <= 0: SIGKILL at once, a
  // crash) and starts it again on the same port; returns once it listens. Counted in
  // scheduler_restarts(). Errors as Start()'s for the scheduler.
  absl::Status RestartScheduler(double grace_s);
  // The workers' part of Stop() (stop accepting, drain, join); the scheduler and the database
  // stay up (`touchstone sweep --serve`).
  void StopWorkers();
  // Returns the database's stop error, if any; the processes are gone either way.
  absl::Status Stop();

  // Where `touchstone sweep` keeps its embedded cluster under a state folder (and where
  // `touchstone db prune` looks for it): <state_dir>/pg/data, absolute.
  static std::string EmbeddedDataDir(const std::string& state_dir);
  // The folder store of reference bundles under `state_dir`: STATE/refs.
  static std::string ReferencesDir(const std::string& state_dir);

  const std::string& target() const { return target_; }  // the scheduler's 127.0.0.1:PORT
  int http_port() const { return http_port_; }           // its /metrics and /healthz
  // Bearer tokens of the cluster's scheduler, by role: token() is admin (for the SweepDriver:
  // catalog, sweeps, cancel, reads); the workers use the worker one; query clients the reader.
  const std::string& token() const { return token_; }
  const std::string& worker_token() const { return worker_token_; }
  const std::string& reader_token() const { return reader_token_; }
  // The tokens file (<state>/tokens, `role token` lines, 0600): for --token-file of clients.
  const std::string& token_file() const { return token_file_; }
  const std::string& db_url() const { return db_url_; }
  const std::string& state_dir() const { return state_; }  // absolute
  int workers() const { return opts_.workers; }
  int scheduler_restarts() const { return scheduler_.restarts; }
  int database_restarts() const { return db_restarts_; }
  // Why a sweep may not be moving, in words: the embedded database's disk full, the database
  // down, no worker alive, the scheduler cut off from its database, or the workers busy
  // (FollowOptions::why_stalled).
  std::string Diagnose() const;
  int worker_restarts() const;
  pid_t scheduler_pid() const { return scheduler_.pid; }  // -1 once stopped
  std::vector<pid_t> worker_pids() const;                 // -1 for a stopped one

 private:
  // A service process this cluster started: respawned by Supervise() if it dies.
  struct Service {
    std::vector<std::string> argv;
    std::string log;
    pid_t pid = -1;
    int restarts = 0;
  };

  explicit LocalCluster(LocalClusterOptions opts);
  absl::Status StartDatabase();
  absl::Status StartScheduler();
  absl::Status WaitForScheduler();
  absl::Status Launch(Service* s);
  void Notice(const std::string& text) const;

  LocalClusterOptions opts_;
  int db_restarts_ = 0;  // embedded PostgreSQL restarts by Supervise()
  bool waiting_for_space_ = false;  // the embedded PostgreSQL is down on a full disk
  // Why the embedded PostgreSQL's data folder counts as full (under 32 MiB free); "" if not.
  std::string DiskFull() const;
  std::string state_;
  std::string db_url_;
  std::string token_;  // admin
  std::string worker_token_;
  std::string reader_token_;
  std::string token_file_;
  std::string port_file_;
  std::string target_;
  int http_port_ = 0;
  std::unique_ptr<store::EmbeddedPostgres> pg_;
  Service scheduler_;
  std::vector<Service> workers_;
};

}  // namespace ts::cluster
