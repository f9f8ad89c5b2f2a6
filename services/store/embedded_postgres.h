// A private PostgreSQL cluster: initdb on first use, pg_ctl start on a free loopback port,
// pg_ctl stop at the end. Used by `touchstone sweep` without --db and by every test that needs
// a database (a throwaway cluster per test binary).
//
// Under root, PostgreSQL's tools run as the "postgres" account, which gets search permission
// (o+x) on the folders above the cluster and owns the folder holding it.
//
// Settings: listens on 127.0.0.1 only, no unix socket, trust auth for the local superuser
// "touchstone", fsync off (a crash of the PostgreSQL process loses nothing that was committed;
// only an OS crash could, which a private test/sweep cluster accepts). synchronous_commit stays
// on, so an acknowledged result is never lost to a kill -9 of PostgreSQL.
//
// Thread-safety: one owner thread. Errors: INTERNAL with the tool's output; NOT_FOUND when no
// PostgreSQL binaries are installed (TS_PG_BIN, then /usr/lib/postgresql/<newest>/bin).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ts::store {

struct EmbeddedPostgresOptions {
  std::string data_dir;     // created (initdb) when it does not hold a cluster
  int port = 0;             // 0: a free port
  bool keep_running = false;  // destructor leaves the server up (for --serve)
};

class EmbeddedPostgres {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start(
      const EmbeddedPostgresOptions& opts);
  ~EmbeddedPostgres();

  // postgresql://touchstone@127.0.0.1:PORT/touchstone
  std::string url() const;
  int port() const { return port_; }
  const std::string& data_dir() const { return opts_.data_dir; }

  // pg_ctl stop -m fast. Idempotent.
  absl::Status Stop();
  // Stop then start on the same port (tests: "PostgreSQL restarted mid-sweep").
  absl::Status Restart();
  // SIGKILL the postmaster and its children, then start again (crash recovery).
  absl::Status KillAndRestart();

 private:
  EmbeddedPostgres(EmbeddedPostgresOptions opts, std::string bin_dir, int port)
      : opts_(std::move(opts)), bin_dir_(std::move(bin_dir)), port_(port) {}
  absl::Status StartServer();

  EmbeddedPostgresOptions opts_;
  std::string bin_dir_;
  int port_;
  bool running_ = false;
};

// Finds a free TCP port on 127.0.0.1 (bind to 0, read it, close).
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace ts::store
