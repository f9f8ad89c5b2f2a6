#include "services/store/embedded_postgres.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <pqxx/pqxx>

#include "services/common/process.h"
#include "services/common/random.h"

namespace ts::store {
namespace fs = std::filesystem;

namespace {

absl::StatusOr<std::string> FindBinDir() {
  if (const char* env = std::getenv("TS_PG_BIN"); env && *env) {
    if (fs::exists(fs::path(env) / "pg_ctl")) return std::string(env);
    return absl::NotFoundError(std::string("TS_PG_BIN=") + env + ": no pg_ctl there");
  }
  int best = -1;
  std::string dir;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = e.path().filename().string();
    const int v = std::atoi(name.c_str());
    if (v > best && fs::exists(e.path() / "bin" / "pg_ctl")) {
      best = v;
      dir = (e.path() / "bin").string();
    }
  }
  if (best < 0) {
    return absl::NotFoundError(
        "no PostgreSQL server binaries (looked in /usr/lib/postgresql/*/bin; set TS_PG_BIN or "
        "run scripts/setup)");
  }
  return dir;
}

// PostgreSQL refuses to run as root. Under root (containers, CI) its tools run as an
// unprivileged account: TS_PG_USER, else "postgres" (made by the server package), else "nobody".
struct RunAs {
  int uid = -1, gid = -1;
};
absl::StatusOr<RunAs> PgUser() {
  if (::geteuid() != 0) return RunAs{};
  const char* env = std::getenv("TS_PG_USER");
  for (const char* name : {env, "postgres", "nobody"}) {
    if (!name || !*name) continue;
    if (const passwd* pw = ::getpwnam(name)) {
      return RunAs{static_cast<int>(pw->pw_uid), static_cast<int>(pw->pw_gid)};
    }
  }
  return absl::NotFoundError("running as root and no unprivileged user for PostgreSQL "
                             "(set TS_PG_USER)");
}

// The libpq password file next to the cluster's folder: `*:*:*:touchstone:PASSWORD`, mode 0600,
// owned by whoever runs the services (the URL names the file, never the secret).
std::string PasswordFile(const std::string& data_dir) {
  return (fs::path(data_dir).parent_path() / "pgpass").string();
}

std::string PassLine(const std::string& password) { return "*:*:*:touchstone:" + password + "\n"; }

// 32 hex digits from OpenSSL's CSPRNG.
absl::StatusOr<std::string> NewPassword() { return common::RandomHex(16); }

// Writes `text` to a new file of mode 0600 (owned by `as` when given); never readable by others,
// not even for a moment.
absl::Status WriteSecret(const std::string& path, const std::string& text, const struct RunAs& as);

std::string UriEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

absl::Status Run(const std::vector<std::string>& argv, double timeout_s) {
  auto as = PgUser();
  if (!as.ok()) return as.status();
  auto r = common::RunCommand(argv, timeout_s, as->uid, as->gid);
  if (!r.ok()) return r.status();
  if (r->code != 0 || r->signal != 0) {
    return absl::InternalError(argv[0] + " failed (exit " + std::to_string(r->code) + "): " +
                               r->output);
  }
  return absl::OkStatus();
}

absl::Status WriteSecret(const std::string& path, const std::string& text, const RunAs& as) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError("cannot create " + path + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  bool owned = true;
  if (as.uid >= 0) owned = ::fchown(fd, static_cast<uid_t>(as.uid), static_cast<gid_t>(as.gid)) == 0;
  const bool closed = ::close(fd) == 0;
  if (!written || !owned || !closed) {
    return absl::InternalError("cannot write " + path + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return absl::InternalError(std::string("bind: ") + std::strerror(errno));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> EmbeddedPostgres::Start(
    const EmbeddedPostgresOptions& opts) {
  if (opts.data_dir.empty()) return absl::InvalidArgumentError("data_dir: empty");
  auto bin = FindBinDir();
  if (!bin.ok()) return bin.status();
  int port = opts.port;
  if (port == 0) {
    auto p = FreeLoopbackPort();
    if (!p.ok()) return p.status();
    port = *p;
  }
  std::error_code ec;
  const fs::path parent = fs::path(opts.data_dir).parent_path();
  fs::create_directories(parent, ec);
  auto as = PgUser();
  if (!as.ok()) return as.status();
  if (as->uid >= 0) {
    // The server's account must reach the folder (search permission on every ancestor: a
    // mkdtemp folder is 0700) and own it.
    for (fs::path a = parent.parent_path(); !a.empty() && a != a.root_path(); a = a.parent_path()) {
      struct stat st {};
      if (::stat(a.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH)) {
        ::chmod(a.c_str(), (st.st_mode & 07777) | S_IXOTH);
      }
    }
    if (::chown(parent.c_str(), static_cast<uid_t>(as->uid), static_cast<gid_t>(as->gid)) != 0) {
      return absl::InternalError("chown " + parent.string() + ": " + std::strerror(errno));
    }
  }
  const std::string passfile = PasswordFile(opts.data_dir);
  const bool fresh = !fs::exists(fs::path(opts.data_dir) / "PG_VERSION");
  std::string password;
  if (fresh) {
    auto pw = NewPassword();
    if (!pw.ok()) return pw.status();
    password = *pw;
    // initdb reads the password from a file its own account can read, removed right after.
    const std::string pwfile = (parent / ".initdb-password").string();
    if (auto st = WriteSecret(pwfile, password + "\n", *as); !st.ok()) return st;
    auto st = Run({*bin + "/initdb", "-D", opts.data_dir, "-U", "touchstone", "-A",
                   "scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--locale=C", "--no-sync"},
                  300);
    fs::remove(pwfile, ec);
    if (!st.ok()) return st;
    if (auto w = WriteSecret(passfile, PassLine(password), RunAs{}); !w.ok()) return w;
    std::ofstream conf(fs::path(opts.data_dir) / "postgresql.conf", std::ios::app);
    conf << "\n# touchstone embedded defaults (fsync: on unless started fast_unsafe)\n"
            "listen_addresses = '127.0.0.1'\n"
            "unix_socket_directories = ''\n"
            "password_encryption = 'scram-sha-256'\n"
            "max_connections = 200\n"
            "shared_buffers = 256MB\n"
            "max_wal_size = 2GB\n"
            "log_min_messages = warning\n";
  }
  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres(opts, *bin, port));
  auto st = pg->StartServer();
  if (!st.ok()) return st;
  if (!fresh && !fs::exists(passfile)) {
    // A cluster made before passwords (trust for the superuser): give it one, then require it.
    if (auto m = pg->RequirePassword(); !m.ok()) return m;
  }
  // The database our services use.
  try {
    pqxx::connection c(pg->url_for("postgres"));
    pqxx::nontransaction n(c);
    if (n.exec("SELECT 1 FROM pg_database WHERE datname = 'touchstone'").empty()) {
      n.exec("CREATE DATABASE touchstone");
    }
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("embedded PostgreSQL: creating the touchstone "
                                           "database: ") + e.what());
  }
  return pg;
}

absl::Status EmbeddedPostgres::RequirePassword() {
  auto pw = NewPassword();
  if (!pw.ok()) return pw.status();
  try {
    // Still trust: no password needed for this connection.
    pqxx::connection c("postgresql://touchstone@127.0.0.1:" + std::to_string(port_) + "/postgres");
    pqxx::nontransaction n(c);
    n.exec("SET password_encryption = 'scram-sha-256'");
    n.exec("ALTER ROLE touchstone PASSWORD " + n.quote(*pw));
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("embedded PostgreSQL: setting a password: ") + e.what());
  }
  if (auto w = WriteSecret(PasswordFile(opts_.data_dir), PassLine(*pw), RunAs{}); !w.ok()) {
    return w;
  }
  // Every trust line of pg_hba.conf now asks for the password.
  const fs::path hba = fs::path(opts_.data_dir) / "pg_hba.conf";
  std::ifstream in(hba);
  std::string line, out;
  while (std::getline(in, line)) {
    const size_t at = line.rfind("trust");
    if (!line.empty() && line[0] != '#' && at != std::string::npos && at + 5 == line.size()) {
      line = line.substr(0, at) + "scram-sha-256";
    }
    out += line + "\n";
  }
  in.close();
  {
    std::ofstream o(hba, std::ios::trunc);
    o << out;
    if (!o) return absl::InternalError("cannot rewrite " + hba.string());
  }
  return Run({bin_dir_ + "/pg_ctl", "-D", opts_.data_dir, "reload"}, 60);
}

absl::Status EmbeddedPostgres::StartServer() {
  const std::string log = opts_.data_dir + "/server.log";
  // fsync and full_page_writes on the command line (it wins over postgresql.conf, so clusters
  // made when the defaults said off follow the option too).
  const std::string durable = opts_.fast_unsafe ? "off" : "on";
  auto st = Run({bin_dir_ + "/pg_ctl", "-D", opts_.data_dir, "-l", log, "-w", "-t", "120", "-o",
                 "-p " + std::to_string(port_) + " -c fsync=" + durable +
                     " -c full_page_writes=" + durable,
                 "start"},
                180);
  if (!st.ok()) {
    std::ifstream in(log);
    std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
    return absl::InternalError(std::string(st.message()) + "\nserver.log: " + tail);
  }
  running_ = true;
  return absl::OkStatus();
}

std::string EmbeddedPostgres::url() const { return url_for("touchstone"); }

std::string EmbeddedPostgres::url_for(const std::string& database) const {
  return "postgresql://touchstone@127.0.0.1:" + std::to_string(port_) + "/" + database +
         "?passfile=" + UriEscape(PasswordFile(opts_.data_dir));
}

std::string EmbeddedPostgres::password_file() const { return PasswordFile(opts_.data_dir); }

absl::Status EmbeddedPostgres::Stop() {
  if (!running_) return absl::OkStatus();
  running_ = false;
  return Run({bin_dir_ + "/pg_ctl", "-D", opts_.data_dir, "-w", "-t", "60", "-m", "fast", "stop"},
             90);
}

absl::Status EmbeddedPostgres::Restart() {
  auto st = Stop();
  if (!st.ok()) return st;
  return StartServer();
}

namespace {
// The postmaster's pid from its lock file; 0 when there is none.
pid_t PostmasterPid(const std::string& data_dir) {
  std::ifstream pidfile(data_dir + "/postmaster.pid");
  pid_t pid = 0;
  if (!(pidfile >> pid) || pid <= 0) return 0;
  return pid;
}
}  // namespace

absl::Status EmbeddedPostgres::KillAndRestart() {
  const pid_t pid = PostmasterPid(opts_.data_dir);
  if (pid == 0) return absl::InternalError("no postmaster.pid");
  ::kill(pid, SIGKILL);
  return RecoverAfterCrash();
}

bool EmbeddedPostgres::Alive() const {
  if (!running_) return false;
  const pid_t pid = PostmasterPid(opts_.data_dir);
  return pid > 0 && ::kill(pid, 0) == 0;
}

absl::Status EmbeddedPostgres::RecoverAfterCrash(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  const pid_t pid = PostmasterPid(opts_.data_dir);
  // The postmaster's children exit once their parent is gone; wait for it and the port.
  for (int i = 0; i < 200 && pid > 0 && ::kill(pid, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  running_ = false;
  absl::Status st;
  for (int attempt = 0;; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::error_code ec;
    fs::remove(opts_.data_dir + "/postmaster.pid", ec);  // stale: its process is gone
    st = StartServer();
    // An orphaned backend may still hold the old shared memory for a moment: try again.
    if (st.ok() || std::chrono::steady_clock::now() > deadline) return st;
  }
}

EmbeddedPostgres::~EmbeddedPostgres() {
  if (!opts_.keep_running) (void)Stop();
}

}  // namespace ts::store
