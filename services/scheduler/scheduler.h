// touchstone-scheduler: the gRPC Scheduler service (proto/touchstone/v1) over the store, plus
// /metrics and /healthz on an HTTP port.
//
// Also on the gRPC port: grpc.health.v1.Health (SERVING while the database answers) and server
// reflection (grpc_cli ls), both without a token.
//
// Threads: gRPC's callback threads validate a request and hand it to the database pool; they
// never block on SQL. Two pools (leases, everything else), each a fixed number of threads with
// its own Store
// (connection); when its queue is full a request gets RESOURCE_EXHAUSTED. One ticker thread
// expires leases (requeue / split / crash), settles finished sweeps and refreshes the queue
// gauges. The HTTP server has its own thread.
//
// State lives only in PostgreSQL: a scheduler killed at any point and started again carries on
// (leases it handed out stay valid until they expire).
//
// Shutdown (Shutdown() or SIGTERM in main): stop the ticker and HTTP, stop accepting RPCs and
// finish those in flight, drain and join the pool, close the database.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "services/common/auth.h"

namespace ts::scheduler {

struct SchedulerOptions {
  std::string db_url;                  // required
  std::string listen = "127.0.0.1:0";  // gRPC address; port 0 picks a free one
  // /metrics, /healthz and the web dashboard (dashboard_http.h) (0: a free one; -1: none)
  int http_port = 0;
  std::string http_host = "127.0.0.1";  // the HTTP listener's address (0.0.0.0: every one)
  // Without tokens (open mode) a listener on anything but loopback is refused, unless this is
  // set: anyone who can reach the port could then create and cancel sweeps.
  bool insecure = false;
  std::string chart_js;  // the dashboard's Chart.js file; empty: Debian's libjs-chart.js path
  // Bearer tokens by role (services/common/auth.h); no tokens: open, logged at start. Each
  // method's role: SchedulerMethodRole. gRPC health and reflection need no token.
  common::TokenSet tokens;
  // Both set: TLS on the gRPC port (services/common/tls.h) and HTTPS on the HTTP port, with the
  // same certificate; the dashboard's login cookie is then Secure.
  std::string tls_cert_file;
  std::string tls_key_file;
  double lease_ttl_s = 30;
  // After start-up and after the database was out, every current lease runs at least this
  // much longer before expiry may requeue it (0: max(10 s, 2 lease TTLs): a worker
  // reconnects within a few seconds of the scheduler coming back).
  double startup_grace_s = 0;
  int split_after_expiries = 2;
  int max_lost_leases = 3;
  // A worker ending this many leases in a row without a result within quarantine_window_s is
  // quarantined for quarantine_s (store.h, StoreOptions).
  int quarantine_after = 5;
  double quarantine_window_s = 600;
  double quarantine_s = 600;
  // Detection and the gate: device time growth vs the baseline that is a performance
  // regression (store.h, StoreOptions::perf_threshold).
  double perf_threshold = 0.02;
  int db_threads = 4;     // reports, catalog upserts, sweep creation
  int lease_threads = 2;  // register, lease, heartbeat (their own pool: leases never queue
                          // behind reports)
  // LeaseShard calls served by one leasing statement, at most: a burst of workers asking at
  // once (a new sweep waking the long polls, a restart) waits for a few statements.
  int lease_batch = 8;
  int query_threads = 8;  // GetSweep, CancelSweep, ListResults and the Query service (their own
                          // pool: progress and result queries never queue behind reports, and
                          // 8 concurrent readers do not queue behind each other)
  int queue_limit = 4096;       // requests waiting for a database thread
  double tick_s = 0;            // 0: min(1 s, lease_ttl_s / 4)
  double db_wait_s = 60;        // how long start-up waits for the database to come up
  // Alertmanager delivery (alert_delivery.h): http://host:port of its API; empty: none.
  std::string alertmanager_url;
  std::string dashboard_url;        // base of the alerts' link annotation
  double alert_resend_s = 60;       // re-post firing alerts this often
  double alert_retry_max_s = 60;    // backoff ceiling after a failed post
  // The wall clock schedules are due by (UTC); null: the system clock. Tests inject one.
  std::function<std::chrono::system_clock::time_point()> clock;
};

// The role a touchstone.v1.Scheduler method needs ("CreateSweep" -> admin); nullopt for a name
// that is not one of its methods (such a call would need admin).
std::optional<common::Role> SchedulerMethodRole(std::string_view method);

class Scheduler {
 public:
  // Connects (waiting up to db_wait_s), applies migrations, starts serving.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Start(const SchedulerOptions& opts);
  ~Scheduler();

  int grpc_port() const;
  int http_port() const;
  void Shutdown();

  struct Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::scheduler
