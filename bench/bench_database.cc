// The benchmark's database: opening it, the fill's sweeps, sizes. See the header.
#include "bench/bench_database.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <pqxx/pqxx>

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

bool ParseDatabaseArg(const std::string& flag, const char* value, DatabaseArgs& out) {
  if (value == nullptr) return false;
  if (flag == "--state-dir")
    out.state_dir = value;
  else if (flag == "--db")
    out.url = value;
  else
    return false;
  return true;
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

absl::StatusOr<std::vector<FillSweep>> FillSweeps(const std::string& url) {
  return Read(url, "listing the fill's sweeps",
              [](pqxx::work& w) -> absl::StatusOr<std::vector<FillSweep>> {
                std::vector<FillSweep> out;
                for (const auto& row :
                     w.exec("SELECT sweep_id, name, state FROM sweeps "
                            "WHERE name LIKE 'query-bench-fill-%' AND state IN ('running', 'done') "
                            "ORDER BY sweep_id")) {
                  out.push_back({row[0].as<int64_t>(), row[1].c_str(), row[2].c_str()});
                }
                return out;
              });
}

absl::StatusOr<DatabaseSize> MeasureDatabase(const std::string& url,
                                             const std::vector<int64_t>& sweep_ids) {
  return Read(url, "measuring the database", [&](pqxx::work& w) -> absl::StatusOr<DatabaseSize> {
    DatabaseSize out;
    out.database_bytes = w.exec("SELECT pg_database_size(current_database())")[0][0].as<int64_t>();
    // Sweep state rows (jobs, shards, regressions) are shared tables: each sweep's share is
    // their size times its fraction of their rows.
    const int64_t state_bytes =
        w.exec(
             "SELECT pg_total_relation_size('jobs') + pg_total_relation_size('shards') + "
             "pg_total_relation_size('regressions')")[0][0]
            .as<int64_t>();
    std::map<int64_t, int64_t> jobs;
    int64_t all_jobs = 0;
    for (const auto& row : w.exec("SELECT sweep_id, count(*) FROM jobs GROUP BY sweep_id")) {
      jobs[row[0].as<int64_t>()] = row[1].as<int64_t>();
      all_jobs += row[1].as<int64_t>();
    }
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
      z.results_rows = s[0][1].is_null() ? 0 : s[0][1].as<int64_t>();
      z.runs_rows = s[0][2].is_null() ? 0 : s[0][2].as<int64_t>();
      if (all_jobs > 0) {
        z.state_bytes =
            static_cast<int64_t>(static_cast<double>(state_bytes) * static_cast<double>(jobs[id]) /
                                 static_cast<double>(all_jobs));
      }
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
