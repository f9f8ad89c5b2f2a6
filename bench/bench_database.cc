// The benchmark's database: opening it, the fill's sweeps, sizes. See the header.
#include "bench/bench_database.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <pqxx/pqxx>
#include <thread>

#include "services/common/flags.h"
#include "services/store/store.h"

namespace ts::bench {

namespace {

// The bench's own reads: any pqxx failure becomes INTERNAL with what was asked.
template <typename F>
auto Read(const std::string& url, const char* what, F&& f)
    -> decltype(f(std::declval<pqxx::work&>())) {
  try {
    pqxx::connection c(url);
    pqxx::work w(c);
    return f(w);
  } catch (const std::exception& e) {
    return absl::InternalError(std::string(what) + ": " + e.what());
  }
}

}  // namespace

void AddDatabaseFlags(flags::Command& c, DatabaseArgs* out) {
  c.Option("--state-dir", &out->state_dir, "DIR",
           "the embedded PostgreSQL under DIR/pg/data (created on first use)")
      .Dir();
  c.Option("--db", &out->url, "URL", "an existing database instead").Excludes("--state-dir");
}

absl::StatusOr<Database> OpenDatabase(const DatabaseArgs& args) {
  if (args.state_dir.empty() == args.url.empty()) {
    return absl::InvalidArgumentError("--state-dir / --db: give exactly one");
  }
  Database db;
  db.url = args.url;
  if (!args.state_dir.empty()) {
    store::EmbeddedPostgresOptions po;
    po.data_dir = (std::filesystem::absolute(args.state_dir) / "pg" / "data").string();
    po.fast_unsafe = true;  // benchmark clusters: query figures are taken without fsync
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(po.data_dir).parent_path(), ec);
    auto pg = store::EmbeddedPostgres::Start(po);
    if (!pg.ok()) return pg.status();
    db.pg = std::move(*pg);
    db.url = db.pg->url();
  }
  store::StoreOptions so;
  so.url = db.url;
  auto st = store::Store::Connect(so);
  if (!st.ok()) return st.status();
  if (auto m = (*st)->Migrate(); !m.ok()) return m;
  return db;
}

namespace {

// Sweeps whose name starts with `prefix` in one of `states` (a SQL list), oldest first.
absl::StatusOr<std::vector<FillSweep>> SweepsNamed(const std::string& url, const char* what,
                                                   const std::string& prefix,
                                                   const std::string& states) {
  return Read(url, what, [&](pqxx::work& w) -> absl::StatusOr<std::vector<FillSweep>> {
    std::vector<FillSweep> out;
    for (const auto& row : w.exec_params("SELECT sweep_id, name, state FROM sweeps "
                                         "WHERE starts_with(name, $1) AND state = ANY($2::text[]) "
                                         "ORDER BY sweep_id",
                                         prefix, states)) {
      out.push_back({row[0].as<int64_t>(), row[1].c_str(), row[2].c_str()});
    }
    return out;
  });
}

}  // namespace

absl::StatusOr<std::vector<FillSweep>> FillSweeps(const std::string& url) {
  return SweepsNamed(url, "listing the fill's sweeps", "query-bench-fill-", "{running,done}");
}

absl::StatusOr<std::vector<FillSweep>> LeftoverIngestSweeps(const std::string& url) {
  return SweepsNamed(url, "listing leftover ingest sweeps", "query-bench-ingest-",
                     "{done,cancelled}");
}

std::string Settle(const std::string& url, int64_t sweep_id) {
  try {
    pqxx::connection c(url);
    pqxx::nontransaction n(c);
    const std::string id = std::to_string(sweep_id);
    n.exec("VACUUM (ANALYZE) jobs, shards, regressions, sweeps, results_" + id +
           ", model_runs_" + id);
    n.exec("CHECKPOINT");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

bool WaitKept(const std::string& url, int64_t sweep_id, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  pqxx::connection c(url);
  for (;;) {
    pqxx::nontransaction n(c);
    if (!n.exec_params("SELECT 1 FROM sweep_facts WHERE sweep_id = $1", sweep_id).empty()) {
      return true;
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

namespace {

// A shared table's bytes split among sweeps by their share of its rows.
std::map<int64_t, int64_t> SharePerSweep(pqxx::work& w, const std::string& table) {
  const std::string t = w.quote_name(table);
  const double bytes =
      w.exec("SELECT pg_total_relation_size('" + w.esc(table) + "')")[0][0].as<double>();
  std::map<int64_t, int64_t> rows;
  int64_t all = 0;
  for (const auto& row : w.exec("SELECT sweep_id, count(*) FROM " + t + " GROUP BY sweep_id")) {
    rows[row[0].as<int64_t>()] = row[1].as<int64_t>();
    all += row[1].as<int64_t>();
  }
  for (auto& [id, n] : rows) {
    n = static_cast<int64_t>(bytes * static_cast<double>(n) / static_cast<double>(all));
  }
  return rows;
}

// Tables other than the results partitions and the sweep state that hold rows per sweep: what
// the store materializes for a done sweep (schema/0004 and later).
std::vector<std::string> MaterializedTables(pqxx::work& w) {
  std::vector<std::string> out;
  for (const auto& row :
       w.exec("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
              "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'sweep_id' "
              "WHERE n.nspname = 'public' AND c.relkind = 'r' AND NOT c.relispartition "
              "  AND c.relname NOT IN ('sweeps', 'jobs', 'shards', 'regressions') ORDER BY 1")) {
    out.push_back(row[0].c_str());
  }
  return out;
}

}  // namespace

absl::StatusOr<DatabaseSize> MeasureDatabase(const std::string& url,
                                             const std::vector<int64_t>& sweep_ids) {
  return Read(url, "measuring the database", [&](pqxx::work& w) -> absl::StatusOr<DatabaseSize> {
    DatabaseSize out;
    out.database_bytes = w.exec("SELECT pg_database_size(current_database())")[0][0].as<int64_t>();
    std::vector<std::map<int64_t, int64_t>> state, kept;
    for (const char* t : {"jobs", "shards", "regressions"}) state.push_back(SharePerSweep(w, t));
    for (const auto& t : MaterializedTables(w)) kept.push_back(SharePerSweep(w, t));
    for (int64_t id : sweep_ids) {
      const std::string r = "results_" + std::to_string(id), m = "model_runs_" + std::to_string(id);
      pqxx::result s = w.exec_params(
          "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0) + "
          "       coalesce(pg_total_relation_size(to_regclass($2)), 0), "
          "       (SELECT count(*) FROM results WHERE sweep_id = $3), "
          "       (SELECT count(*) FROM model_runs WHERE sweep_id = $3)",
          r, m, id);
      SweepSize z;
      z.sweep_id = id;
      z.partitions_bytes = s[0][0].as<int64_t>();
      z.results_rows = s[0][1].as<int64_t>();
      z.runs_rows = s[0][2].as<int64_t>();
      for (auto& share : state) z.state_bytes += share[id];
      for (auto& share : kept) z.materialized_bytes += share[id];
      out.sweeps.push_back(z);
    }
    for (const auto& row :
         w.exec("SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm') "
                "  AND c.relname !~ '^(results|model_runs)_[0-9]+$' ORDER BY 2 DESC")) {
      out.other_tables.emplace_back(row[0].c_str(), row[1].as<int64_t>());
    }
    return out;
  });
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "query bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace ts::bench
