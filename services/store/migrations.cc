// Migrations: the embedded schema/ files (Migrations(), generated at build time) applied under
// an advisory lock, each in one transaction with its schema_migrations row.
#include <set>

#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// One key for every scheduler and `touchstone db migrate` on this database.
constexpr const char* kLock = "SELECT pg_advisory_lock(736215001)";
constexpr const char* kUnlock = "SELECT pg_advisory_unlock(736215001)";

// Versions applied so far (schema_migrations is created when missing).
std::set<int> Applied(pqxx::connection& c) {
  pqxx::nontransaction n(c);
  n.exec(R"(CREATE TABLE IF NOT EXISTS schema_migrations (
              version int PRIMARY KEY, name text NOT NULL,
              applied_at timestamptz NOT NULL DEFAULT now()))");
  std::set<int> applied;
  for (const auto& row : n.exec("SELECT version FROM schema_migrations")) {
    applied.insert(row[0].as<int>());
  }
  return applied;
}

// Applies the migrations missing from `applied`; FAILED_PRECONDITION when the database is newer.
absl::Status ApplyMissing(pqxx::connection& c, const std::set<int>& applied) {
  const int known = Migrations().empty() ? 0 : Migrations().back().version;
  if (!applied.empty() && *applied.rbegin() > known) {
    return absl::FailedPreconditionError(
        "database schema version " + std::to_string(*applied.rbegin()) +
        " is newer than this build's " + std::to_string(known) + ": upgrade touchstone");
  }
  for (const auto& m : Migrations()) {
    if (applied.count(m.version)) continue;
    pqxx::work w(c);
    w.exec(m.sql);
    w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                  m.name);
    w.commit();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Store::Migrate() {
  return impl_->Run("migrate", [&]() -> absl::Status {
    pqxx::connection& c = *impl_->conn;
    {
      pqxx::nontransaction n(c);
      n.exec(kLock);
    }
    absl::Status st = ApplyMissing(c, Applied(c));
    pqxx::nontransaction n(c);
    n.exec(kUnlock);
    return st;
  });
}

absl::StatusOr<std::vector<int>> Store::AppliedMigrations() {
  return impl_->Run("applied migrations", [&]() -> absl::StatusOr<std::vector<int>> {
    pqxx::nontransaction n(*impl_->conn);
    std::vector<int> out;
    for (const auto& row : n.exec("SELECT version FROM schema_migrations ORDER BY version")) {
      out.push_back(row[0].as<int>());
    }
    return out;
  });
}

}  // namespace ts::store
