// The Store facade's connection: Connect, reconnecting, Ping. Each concern's calls live in its
// own file (README.md).
#include "services/store/store.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// StoreOptions::backend_nice: renices the connection's server process when it is a local
// postgres process; otherwise (another host, no such process, no permission) leaves it.
void LowerBackendPriority(pqxx::connection& c, int nice) {
  const char* host = c.hostname();
  const std::string h = host ? host : "";
  if (!(h.empty() || h[0] == '/' || h == "localhost" || h == "127.0.0.1" || h == "::1")) return;
  const int pid = c.backendpid();
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (pid <= 0 || !std::getline(comm, name) || name.rfind("postgres", 0) != 0) return;
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), nice);
}

}  // namespace

absl::Status Store::Impl::Ensure() {
  if (conn && conn->is_open()) return absl::OkStatus();
  conn.reset();
  try {
    std::string url = opts.url;
    url += (url.find('?') == std::string::npos ? "?" : "&");
    url += "connect_timeout=" +
           std::to_string(std::max(1, static_cast<int>(opts.connect_timeout_s)));
    conn = std::make_unique<pqxx::connection>(url);
    if (opts.generic_plans) {
      pqxx::nontransaction n(*conn);
      n.exec("SET plan_cache_mode = force_generic_plan");
    }
    if (opts.backend_nice > 0) LowerBackendPriority(*conn, opts.backend_nice);
    PrepareLeaseStatements(*conn);
    PrepareReportStatements(*conn);
    return absl::OkStatus();
  } catch (...) {
    conn.reset();
    return StatusFromCurrentException("connect");
  }
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

absl::StatusOr<std::unique_ptr<Store>> Store::Connect(const StoreOptions& opts) {
  if (opts.url.empty()) return absl::InvalidArgumentError("db url: empty");
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  if (auto st = impl->Ensure(); !st.ok()) return st;
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::Status Store::Ping() {
  return impl_->Run("ping", [&]() -> absl::Status {
    pqxx::nontransaction n(*impl_->conn);
    n.exec("SELECT 1");
    return absl::OkStatus();
  });
}

}  // namespace ts::store
