// A private PostgreSQL cluster: initdb on first use, pg_ctl start on a free loopback port,
// pg_ctl stop at the end. Used by `touchstone sweep` without --db and by every test that needs
// a database (a throwaway cluster per test binary).
//
// Under root, PostgreSQL's tools run as the "postgres" account, which gets search permission
// (o+x) on the folders above the cluster and owns the folder holding it.
//
// Settings: listens on 127.0.0.1 only, no unix socket. The superuser "touchstone" has a
// generated password (16 bytes from OpenSSL's CSPRNG, scram-sha-256), kept in a libpq password
// file `pgpass` (mode 0600) beside the cluster's folder; url() names that file (`passfile=`), so
// the secret never appears in a URL, an argv or a log. A cluster made before passwords (trust)
// gets one on its next start. fsync and full_page_writes are on unless fast_unsafe (tests,
// benchmarks, `touchstone sweep --fast-unsafe`): with them off a kill -9 of PostgreSQL still
// loses nothing committed, but an OS crash or power loss could corrupt the cluster.
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
  bool fast_unsafe = false;   // fsync and full_page_writes off (see above)
};

class EmbeddedPostgres {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start(
      const EmbeddedPostgresOptions& opts);
  ~EmbeddedPostgres();

  // postgresql://touchstone@127.0.0.1:PORT/touchstone?passfile=DIR/pgpass
  std::string url() const;
  // The same for another database of the cluster.
  std::string url_for(const std::string& database) const;
  std::string password_file() const;
  int port() const { return port_; }
  const std::string& data_dir() const { return opts_.data_dir; }

  // pg_ctl stop -m fast. Idempotent.
  absl::Status Stop();
  // Stop then start on the same port (tests: "PostgreSQL restarted mid-sweep").
  absl::Status Restart();
  // SIGKILL the postmaster and its children, then start again (crash recovery).
  absl::Status KillAndRestart();
  // Whether the postmaster this object started is still running (its postmaster.pid names a
  // live process). False after Stop().
  bool Alive() const;
  // After the postmaster died (kill -9, OOM killer): waits for its orphaned children to exit,
  // then starts it again on the same port; PostgreSQL's crash recovery replays the WAL, so
  // every committed row is there. Retries for up to `timeout_s`.
  absl::Status RecoverAfterCrash(double timeout_s = 60);

 private:
  EmbeddedPostgres(EmbeddedPostgresOptions opts, std::string bin_dir, int port)
      : opts_(std::move(opts)), bin_dir_(std::move(bin_dir)), port_(port) {}
  absl::Status StartServer();
  // Sets a password on a cluster that trusted its superuser and makes pg_hba.conf require it.
  absl::Status RequirePassword();

  EmbeddedPostgresOptions opts_;
  std::string bin_dir_;
  int port_;
  bool running_ = false;
};

// Finds a free TCP port on 127.0.0.1 (bind to 0, read it, close).
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace ts::store
