#include "services/store/embedded_postgres.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "services/common/process.h"

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
  if (!fs::exists(fs::path(opts.data_dir) / "PG_VERSION")) {
    auto st = Run({*bin + "/initdb", "-D", opts.data_dir, "-U", "touchstone", "-A", "trust",
                   "-E", "UTF8", "--locale=C", "--no-sync"},
                  300);
    if (!st.ok()) return st;
    std::ofstream conf(fs::path(opts.data_dir) / "postgresql.conf", std::ios::app);
    conf << "\n# touchstone embedded defaults\n"
            "listen_addresses = '127.0.0.1'\n"
            "unix_socket_directories = ''\n"
            "fsync = off\n"
            "full_page_writes = off\n"
            "max_connections = 200\n"
            "shared_buffers = 256MB\n"
            "max_wal_size = 2GB\n"
            "log_min_messages = warning\n";
  }
  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres(opts, *bin, port));
  auto st = pg->StartServer();
  if (!st.ok()) return st;
  // The database our services use.
  auto r = common::RunCommand({*bin + "/psql", "-h", "127.0.0.1", "-p", std::to_string(port),
                               "-U", "touchstone", "-d", "postgres", "-tAc",
                               "SELECT 1 FROM pg_database WHERE datname = 'touchstone'"},
                              60);
  if (!r.ok()) return r.status();
  if (r->output.find('1') == std::string::npos) {
    auto c = Run({*bin + "/createdb", "-h", "127.0.0.1", "-p", std::to_string(port), "-U",
                  "touchstone", "touchstone"},
                 60);
    if (!c.ok()) return c;
  }
  return pg;
}

absl::Status EmbeddedPostgres::StartServer() {
  const std::string log = opts_.data_dir + "/server.log";
  auto st = Run({bin_dir_ + "/pg_ctl", "-D", opts_.data_dir, "-l", log, "-w", "-t", "120", "-o",
                 "-p " + std::to_string(port_), "start"},
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

std::string EmbeddedPostgres::url() const {
  return "postgresql://touchstone@127.0.0.1:" + std::to_string(port_) + "/touchstone";
}

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

absl::Status EmbeddedPostgres::KillAndRestart() {
  std::ifstream pidfile(opts_.data_dir + "/postmaster.pid");
  pid_t pid = 0;
  if (!(pidfile >> pid) || pid <= 0) return absl::InternalError("no postmaster.pid");
  ::kill(pid, SIGKILL);
  // The postmaster's children exit once their parent is gone; wait for the port to free.
  for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  running_ = false;
  std::error_code ec;
  fs::remove(opts_.data_dir + "/postmaster.pid", ec);
  return StartServer();
}

EmbeddedPostgres::~EmbeddedPostgres() {
  if (!opts_.keep_running) (void)Stop();
}

}  // namespace ts::store
