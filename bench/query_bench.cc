// The query API under load (issue 16's must-show): p50/p99/max of GetSummary (task, arch),
// GetModel (30-sweep history), OpDemand, CompareSweeps and Gate from 8 concurrent readers
// while a sweep ingests, and the ingest rate with and without the readers.
//
//   build/bench/query_fill --catalog catalog.jsonl --state-dir DIR        (30 sweeps, once)
//   build/bench/query_bench --catalog catalog.jsonl --state-dir DIR [--readers 8]
//       [--ingest-sample 0] [--connections 3] [--quiet-seconds 20] [--query-threads 0]
//       [--db-threads 4] [--think-ms 0] [--seed 1]
//   build/bench/query_bench --catalog catalog.jsonl --db URL ...
//
// Steps, on a database that query_fill filled (same --catalog and --seed):
//   1. a scheduler in-process over the database (the Scheduler and Query services);
//   2. ingest alone: a sweep of --ingest-sample models (task-stratified; 0: the whole catalog)
//      through the store path query_fill uses, with the last fill sweep as baseline;
//   3. the same size of sweep again, with --readers readers looping over the RPC mix
//      (bench/query_readers.h) for as long as it ingests, each waiting --think-ms x U(0.5, 1.5)
//      between calls (0: back to back);
//   4. the readers alone for --quiet-seconds (latency without ingest, for comparison);
//   (before each phase the database is settled: the scheduler has kept the last sweep's answers,
//   and the last sweep's vacuum and checkpoint are done, so that no phase pays for the one
//   before it: with two ingests back to back the second was ~38% slower with no reader at all;
//   leftover ingest sweeps of an interrupted run are pruned first);
//   5. the database size per fill sweep;
//   6. the three ingest sweeps (alone, with readers, alone again: the drop is the readers' phase
//      against the mean of the two around it) are pruned, so the database is left with the
//      fill's sweeps (last:
//      on a database with many sweeps a prune takes minutes).
// Prints Markdown tables and one JSON line (prefix "json: ").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "bench/bench_database.h"
#include "bench/query_readers.h"
#include "bench/sweep_ingest.h"
#include "services/common/flags.h"
#include "services/scheduler/scheduler.h"
#include "services/store/store.h"

namespace {

namespace pb = ::touchstone::v1;
using ts::bench::IngestStats;
using ts::bench::RpcStats;
using Stats = std::map<std::string, RpcStats>;

struct BenchArgs {
  ts::bench::DatabaseArgs db;
  std::string catalog;
  int readers = 8;
  int64_t ingest_sample = 0;  // 0: a full sweep of the catalog
  int connections = 3;
  int quiet_seconds = 20;
  int query_threads = 0;  // 0: the scheduler's default
  int db_threads = 4;
  int think_ms = 0;
  uint64_t seed = 1;
};

// Declares the flags and parses them: nullopt when the arguments are good, else the exit code
// (the help or the error printed).
std::optional<int> Parse(int argc, char** argv, BenchArgs& a) {
  ts::flags::Program p("query_bench",
                       "the Query API's latency under readers while a sweep ingests, and the "
                       "ingest rate with and without them");
  ts::bench::AddDatabaseFlags(p, &a.db);
  p.Option("--catalog", &a.catalog, "FILE", "the catalog query_fill filled from").Required().File();
  p.Option("--readers", &a.readers, "N", "concurrent readers").Min(1);
  p.Option("--ingest-sample", &a.ingest_sample, "N", "models per ingest sweep (0: all)").Min(0);
  p.Option("--connections", &a.connections, "N", "store connections reporting").Min(1);
  p.Option("--quiet-seconds", &a.quiet_seconds, "N", "the readers alone").Min(0);
  p.Option("--query-threads", &a.query_threads, "N", "the scheduler's (0: its default)").Min(0);
  p.Option("--db-threads", &a.db_threads, "N", "the scheduler's database threads").Min(1);
  p.Option("--think-ms", &a.think_ms, "N", "each reader waits N x U(0.5, 1.5) ms between calls")
      .Min(0);
  p.Option("--seed", &a.seed, "N", "the records' seed (query_fill's)");
  return p.Parse(argc, argv);
}

pb::CreateSweepRequest IngestRequest(const BenchArgs& a, const std::string& name,
                                     int64_t baseline) {
  pb::CreateSweepRequest cs;
  cs.set_name(name);
  cs.mutable_profile()->set_name("query-bench");
  cs.mutable_profile()->set_body(R"({"name": "query-bench"})");
  cs.set_shard_max_models(500);
  cs.set_shard_target_s(1e9);
  cs.set_baseline_sweep_id(baseline);
  cs.set_sample(a.ingest_sample);
  cs.set_seed(a.seed);
  return cs;
}

// The readers' world: the fill's sweeps, gate rules over the largest tasks and classes, and
// models that pass every mode in every fill sweep.
ts::bench::ReaderWorld World(const BenchArgs& a, const std::string& target,
                             const std::vector<int64_t>& sweeps,
                             const std::vector<ts::bench::CatalogEntry>& catalog,
                             const ts::bench::RecordGenerator& gen) {
  ts::bench::ReaderWorld w;
  w.target = target;
  w.sweeps = sweeps;
  w.models_per_sweep = static_cast<int64_t>(catalog.size());
  w.catalog = &catalog;
  w.seed = a.seed;
  w.think_ms = a.think_ms;
  std::map<std::string, int> tasks, classes;
  for (const auto& e : catalog) {
    ++tasks[e.model.task()];
    ++classes[e.model.arch()];
  }
  auto largest = [](const std::map<std::string, int>& m, size_t n) {
    std::vector<std::pair<int, std::string>> v;
    for (const auto& [k, c] : m) v.emplace_back(-c, k);
    std::sort(v.begin(), v.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < std::min(n, v.size()); ++i) out.push_back(v[i].second);
    return out;
  };
  w.gate_tasks = largest(tasks, 3);
  w.gate_classes = largest(classes, 2);
  for (size_t i = 0; i < catalog.size() && w.must_pass.size() < 5; i += 97) {
    bool all = true;
    for (int64_t s : sweeps) {
      for (pb::Mode m : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
        all = all && gen.Status(catalog[i], m, s) == pb::VERDICT_PASS;
      }
    }
    if (all) w.must_pass.push_back(catalog[i].model.id());
  }
  return w;
}

const char* Target(const std::string& rpc) {
  if (rpc.rfind("ListResults", 0) == 0) return "";
  return rpc.rfind("CompareSweeps", 0) == 0 || rpc.rfind("Gate", 0) == 0 ? "<= 500" : "<= 50";
}

void PrintLatencies(const char* title, const Stats& stats, double seconds) {
  std::printf(
      "\n%s (%.0f s)\n\n| RPC | calls | p50 ms | p99 ms | max ms | errors | wrong | "
      "p99 target ms |\n|---|---|---|---|---|---|---|---|\n",
      title, seconds);
  for (const auto& [name, s] : stats) {
    std::printf("| %s | %zu | %.1f | **%.1f** | %.1f | %lld | %lld | %s |\n", name.c_str(),
                s.ms.size(), s.P(0.5), s.P(0.99), s.Max(), static_cast<long long>(s.errors),
                static_cast<long long>(s.wrong), Target(name));
  }
  for (const auto& [name, s] : stats) {
    if (!s.first_error.empty())
      std::printf("\n%s first error: %s\n", name.c_str(), s.first_error.c_str());
  }
}

nlohmann::json StatsJson(const Stats& stats) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, s] : stats) {
    j[name] = {{"calls", s.ms.size()}, {"p50_ms", s.P(0.5)}, {"p99_ms", s.P(0.99)},
               {"max_ms", s.Max()},    {"errors", s.errors}, {"wrong", s.wrong}};
  }
  return j;
}

}  // namespace

namespace {

// The database size per fill sweep: partitions, its share of the job tables, and the rest.
nlohmann::json PrintSizes(const std::string& url, const std::vector<int64_t>& sweeps) {
  auto size = ts::bench::MeasureDatabase(url, sweeps);
  if (!size.ok()) {
    std::fprintf(stderr, "sizes: %s\n", size.status().ToString().c_str());
    return nullptr;
  }
  int64_t parts = 0, state = 0, kept = 0, rows = 0, runs = 0;
  for (const auto& s : size->sweeps) {
    parts += s.partitions_bytes;
    state += s.state_bytes;
    kept += s.materialized_bytes;
    rows += s.results_rows;
    runs += s.runs_rows;
  }
  const double n = static_cast<double>(std::max<size_t>(1, sweeps.size()));
  int64_t other = 0;
  for (const auto& [name, bytes] : size->other_tables) other += bytes;
  const double mib = 1024.0 * 1024.0;
  std::printf("\n| database size | value |\n|---|---|\n");
  std::printf("| database (pg_database_size) | %.0f MiB for %zu fill sweeps |\n",
              static_cast<double>(size->database_bytes) / mib, sweeps.size());
  std::printf(
      "| **per sweep**: results + model_runs partitions (indexes, TOAST) | **%.0f MiB** "
      "(%.0f results rows, %.0f model_runs rows) |\n",
      static_cast<double>(parts) / n / mib, static_cast<double>(rows) / n,
      static_cast<double>(runs) / n);
  std::printf("| per sweep: its share of jobs, shards, regressions | %.0f MiB |\n",
              static_cast<double>(state) / n / mib);
  std::printf("| per sweep: its share of the kept query answers (sweep_* tables) | %.1f MiB |\n",
              static_cast<double>(kept) / n / mib);
  for (const auto& [name, bytes] : size->other_tables) {
    if (bytes >= 1 << 20)
      std::printf("| table %s | %.1f MiB |\n", name.c_str(), static_cast<double>(bytes) / mib);
  }
  return {{"database_bytes", size->database_bytes},
          {"sweeps", sweeps.size()},
          {"partitions_bytes_per_sweep", static_cast<double>(parts) / n},
          {"state_bytes_per_sweep", static_cast<double>(state) / n},
          {"materialized_bytes_per_sweep", static_cast<double>(kept) / n},
          {"other_tables_bytes", other}};
}

void PrintIngest(const char* what, const IngestStats& s) {
  std::printf(
      "| ingest %s | %lld models + %lld reruns in %.1f s: **%.0f models/s** (report p50 "
      "%.0f ms, p99 %.0f ms) |\n",
      what, static_cast<long long>(s.models), static_cast<long long>(s.reruns), s.seconds,
      static_cast<double>(s.models) / s.seconds, s.report_p50_ms, s.report_p99_ms);
}

void SettleOrSay(const std::string& url, int64_t sweep_id) {
  const std::string why = ts::bench::Settle(url, sweep_id);
  if (!why.empty()) std::fprintf(stderr, "query_bench: settling the database: %s\n", why.c_str());
}

// Prunes the bench's own ingest sweeps, leaving the fill's. Returns the seconds it took.
double PruneIngests(const std::string& url, const std::vector<int64_t>& ids) {
  ts::store::StoreOptions so;
  so.url = url;
  auto st = ts::store::Store::Connect(so);
  if (!st.ok()) return -1;
  ts::store::PruneRequest pr;
  pr.sweep_ids = ids;
  const auto a = std::chrono::steady_clock::now();
  auto p = (*st)->PruneSweeps(pr);
  if (!p.ok()) {
    std::fprintf(stderr, "prune: %s\n", p.status().ToString().c_str());
    return -1;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// The fill's done sweeps (at least 2), after pruning an interrupted run's ingest sweeps (their
// prune is timed: it is the retention path).
absl::StatusOr<std::vector<int64_t>> PrepareDatabase(const std::string& url) {
  auto fills = ts::bench::FillSweeps(url);
  if (!fills.ok()) return fills.status();
  std::vector<int64_t> sweeps;
  for (const auto& s : *fills) {
    if (s.state == "done") sweeps.push_back(s.sweep_id);
  }
  if (sweeps.size() < 2) {
    return absl::FailedPreconditionError("the database has " + std::to_string(sweeps.size()) +
                                         " done fill sweeps; run query_fill");
  }
  auto leftovers = ts::bench::LeftoverIngestSweeps(url);
  if (!leftovers.ok()) return leftovers.status();
  if (!leftovers->empty()) {
    std::vector<int64_t> ids;
    for (const auto& s : *leftovers) ids.push_back(s.sweep_id);
    std::printf("| prune of %zu leftover ingest sweeps | %.1f s |\n", ids.size(),
                PruneIngests(url, ids));
  }
  SettleOrSay(url, sweeps.back());
  return sweeps;
}

// What the phases measured.
struct Phases {
  IngestStats alone, loaded, again;  // ingest alone, with the readers, alone again
  Stats during, quiet;               // the readers' latencies with and without ingest
};

// An ingest sweep, then (before the next phase) its answers kept and the database settled.
absl::StatusOr<IngestStats> IngestAndSettle(const BenchArgs& a, const ts::bench::IngestOptions& io,
                                            const std::string& name, int64_t baseline,
                                            const ts::bench::RecordGenerator& gen) {
  auto r = ts::bench::IngestSweep(io, IngestRequest(a, name, baseline), gen);
  if (!r.ok()) return r.status();
  // The scheduler keeps a done sweep's answers on its query pool: let that finish first, so
  // that it is not counted against the next phase.
  if (!ts::bench::WaitKept(io.db_url, r->sweep_id, 600)) {
    std::fprintf(stderr, "query_bench: sweep %lld's answers were not kept in 600 s\n",
                 static_cast<long long>(r->sweep_id));
  }
  SettleOrSay(io.db_url, r->sweep_id);
  return r;
}

// Steps 2 to 4 against the scheduler at `target`.
absl::Status RunPhases(const BenchArgs& a, const std::string& url, const std::string& target,
                       const std::vector<int64_t>& sweeps,
                       const std::vector<ts::bench::CatalogEntry>& catalog,
                       const ts::bench::RecordGenerator& gen, Phases* out) {
  // Every ingest sweep stores the records of the sweep after the fill's last (same records,
  // same confirmation reruns: the phases differ only by the readers).
  const ts::bench::IngestOptions io{url, a.connections, sweeps.back() + 1};
  auto alone = IngestAndSettle(a, io, "query-bench-ingest-alone", sweeps.back(), gen);
  if (!alone.ok()) return alone.status();
  out->alone = *alone;
  ts::bench::Readers readers(World(a, target, sweeps, catalog, gen), a.readers);
  readers.Start();
  auto loaded = ts::bench::IngestSweep(
      io, IngestRequest(a, "query-bench-ingest-readers", sweeps.back()), gen);
  out->during = readers.Stop();
  if (!loaded.ok()) return loaded.status();
  out->loaded = *loaded;
  ts::bench::WaitKept(url, loaded->sweep_id, 600);
  SettleOrSay(url, loaded->sweep_id);
  // Alone again: the readers' phase is compared with the mean of the phases around it, which
  // cancels a drift between consecutive ingests (the database grows by a sweep each time).
  auto again = IngestAndSettle(a, io, "query-bench-ingest-alone-again", sweeps.back(), gen);
  if (!again.ok()) return again.status();
  out->again = *again;
  readers.Start();
  std::this_thread::sleep_for(std::chrono::seconds(a.quiet_seconds));
  out->quiet = readers.Stop();
  return absl::OkStatus();
}

void PrintResults(const BenchArgs& a, const std::string& url, const std::vector<int64_t>& sweeps,
                  size_t models_per_sweep, const Phases& p) {
  const double rate_alone = 0.5 * (static_cast<double>(p.alone.models) / p.alone.seconds +
                                   static_cast<double>(p.again.models) / p.again.seconds);
  const double rate_loaded = static_cast<double>(p.loaded.models) / p.loaded.seconds;
  const double drop = 100.0 * (1 - rate_loaded / rate_alone);
  std::printf("| setting | value |\n|---|---|\n");
  std::printf("| fill sweeps / models per sweep | %zu / %zu |\n", sweeps.size(), models_per_sweep);
  std::printf(
      "| readers / scheduler query + db threads / ingest connections | %d / %d + %d / %d |\n",
      a.readers, a.query_threads, a.db_threads, a.connections);
  std::printf("| reader think time | %s |\n",
              a.think_ms == 0 ? "none (back to back)"
                              : ("U(0.5, 1.5) x " + std::to_string(a.think_ms) + " ms").c_str());
  PrintIngest("alone", p.alone);
  PrintIngest("with readers", p.loaded);
  PrintIngest("alone again", p.again);
  std::printf("| **ingest drop with readers** (vs the mean of the two alone) | **%.1f%%** (target <= "
              "10%%) |\n", drop);
  PrintLatencies("Latency while a sweep ingests", p.during, p.loaded.seconds);
  PrintLatencies("Latency without ingest", p.quiet, a.quiet_seconds);
  nlohmann::json sizes = PrintSizes(url, sweeps);
  nlohmann::json j = {{"bench", "query_bench"},
                      {"readers", a.readers},
                      {"think_ms", a.think_ms},
                      {"ingest_alone_models_per_s", rate_alone},
                      {"ingest_with_readers_models_per_s", rate_loaded},
                      {"ingest_drop_pct", drop},
                      {"during_ingest", StatsJson(p.during)},
                      {"quiet", StatsJson(p.quiet)},
                      {"size", sizes}};
  std::printf("\njson: %s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  BenchArgs a;
  if (auto rc = Parse(argc, argv, a)) return *rc;
  auto db = ts::bench::OpenDatabase(a.db);
  if (!db.ok()) return ts::bench::Fail(db.status());
  auto catalog = ts::bench::LoadCatalog(a.catalog);
  if (!catalog.ok()) return ts::bench::Fail(catalog.status());
  const ts::bench::RecordGenerator gen(*catalog, a.seed);
  auto sweeps = PrepareDatabase(db->url);
  if (!sweeps.ok()) return ts::bench::Fail(sweeps.status());
  ts::scheduler::SchedulerOptions so;
  so.db_url = db->url;
  so.http_port = -1;
  so.db_threads = a.db_threads;
  if (a.query_threads > 0) so.query_threads = a.query_threads;
  a.query_threads = so.query_threads;
  auto sched = ts::scheduler::Scheduler::Start(so);
  if (!sched.ok()) return ts::bench::Fail(sched.status());
  Phases phases;
  absl::Status st = RunPhases(a, db->url, "127.0.0.1:" + std::to_string((*sched)->grpc_port()),
                              *sweeps, *catalog, gen, &phases);
  (*sched)->Shutdown();
  if (!st.ok()) return ts::bench::Fail(st);
  PrintResults(a, db->url, *sweeps, catalog->size(), phases);
  // Last, so that a slow prune never holds up the figures above.
  const double prune_s =
      PruneIngests(db->url, {phases.alone.sweep_id, phases.loaded.sweep_id, phases.again.sweep_id});
  std::printf("\n| prune of the three ingest sweeps | %.1f s |\n", prune_s);
  return 0;
}
