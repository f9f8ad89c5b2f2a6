// The query benchmark's database: where it is (--state-dir DIR or --db URL), the fill's sweeps,
// and how much disk each sweep takes. Reads the tables directly (pqxx, in the .cc only) for
// what the store API does not answer: sweep names and relation sizes; it never writes them.
//
// Thread-safety: one owner thread per object; the functions open their own connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/store/embedded_postgres.h"

namespace ts::flags {
class Command;
}

namespace ts::bench {

struct DatabaseArgs {
  std::string state_dir;  // the embedded cluster under DIR/pg/data
  std::string url;        // an existing database
};

// Declares `--state-dir DIR` and `--db URL` (one of them; OpenDatabase checks) on a bench's
// flags.
void AddDatabaseFlags(flags::Command& c, DatabaseArgs* out);

struct Database {
  std::unique_ptr<store::EmbeddedPostgres> pg;  // set with --state-dir; stops at destruction
  std::string url;
};

// Starts the embedded cluster (--state-dir) or takes the URL, then applies the migrations.
// INVALID_ARGUMENT when neither or both are given.
absl::StatusOr<Database> OpenDatabase(const DatabaseArgs& args);

struct FillSweep {
  int64_t sweep_id = 0;
  std::string name;
  std::string state;  // running | done | cancelled | pruned
};
// The fill's sweeps (named query-bench-fill-N), oldest first, pruned and cancelled ones left out.
absl::StatusOr<std::vector<FillSweep>> FillSweeps(const std::string& url);
// query_bench's own finished, unpruned sweeps (an interrupted run leaves them), by sweep_id.
absl::StatusOr<std::vector<FillSweep>> LeftoverIngestSweeps(const std::string& url);
// Waits (up to timeout_s) until the sweep's query answers are kept (its sweep_facts row);
// false when they are not by then.
bool WaitKept(const std::string& url, int64_t sweep_id, double timeout_s);
// Settles the database after a sweep ingested, so that the next measured phase does not pay
// for the last one: VACUUM (ANALYZE) of the state tables and the sweep's partitions (what
// autovacuum would otherwise do during the next phase), then CHECKPOINT (its dirty pages are
// written now, not then). "" when done, else what failed (e.g. CHECKPOINT needs a superuser).
std::string Settle(const std::string& url, int64_t sweep_id);

struct SweepSize {
  int64_t sweep_id = 0;
  int64_t partitions_bytes = 0;  // results_<id> + model_runs_<id>, indexes and TOAST included
  int64_t results_rows = 0;      // counted
  int64_t runs_rows = 0;
  int64_t state_bytes = 0;         // its share of jobs, shards and regressions (by row count)
  int64_t materialized_bytes = 0;  // its share of the other tables keyed by sweep_id: the
                                   // query answers the store keeps for a done sweep
};
struct DatabaseSize {
  int64_t database_bytes = 0;  // pg_database_size
  std::vector<SweepSize> sweeps;
  // Every other table with its size (catalog, sweeps, and whatever later migrations
  // materialize), "name bytes" sorted by size.
  std::vector<std::pair<std::string, int64_t>> other_tables;
};
absl::StatusOr<DatabaseSize> MeasureDatabase(const std::string& url,
                                             const std::vector<int64_t>& sweep_ids);

// Prints the status to stderr; returns 1 (for main).
int Fail(const absl::Status& s);

}  // namespace ts::bench
