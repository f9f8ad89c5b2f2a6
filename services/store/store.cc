// The Store facade's connection: Connect, reconnecting, Ping. Each concern's calls live in its
// own file (README.md).
#include "services/store/store.h"

#include <algorithm>

#include "services/store/store_internal.h"

namespace ts::store {

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
