// Fills a database for the query benchmark: the catalog, then N full sweeps of generated
// records (bench/query_records.h) through the real ingest path (bench/sweep_ingest.h), each
// sweep with the previous one as its baseline, so that new failures get their confirmation
// reruns and every sweep ends done with its final counts kept, as a real nightly does.
//
//   build/touchstone catalog generate --out catalog.jsonl
//   build/bench/query_fill --catalog catalog.jsonl --state-dir DIR [--sweeps 30]
//                          [--connections 3] [--shard 500] [--seed 1]
//   build/bench/query_fill --catalog catalog.jsonl --db URL ...
//
// --state-dir DIR: the embedded PostgreSQL under DIR/pg/data (the layout `touchstone sweep
// --state-dir` and `touchstone serve --state-dir` use), created on first use. Rerun with the same
// arguments to carry on after an interruption: sweeps already done are kept, a sweep left
// running is finished, and the fill stops at --sweeps sweeps.
//
// Prints one line per sweep and a Markdown summary (fill rate) at the end.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_database.h"
#include "bench/sweep_ingest.h"
#include "services/common/flags.h"
#include "services/store/store.h"

namespace {

namespace pb = ::touchstone::v1;
using ts::bench::IngestStats;

struct FillArgs {
  ts::bench::DatabaseArgs db;
  std::string catalog;
  int sweeps = 30;
  int connections = 3;
  int shard = 500;
  uint64_t seed = 1;
};

pb::CreateSweepRequest FillSweep(const FillArgs& a, int number, int64_t baseline) {
  pb::CreateSweepRequest cs;
  cs.set_name("query-bench-fill-" + std::to_string(number));
  cs.mutable_profile()->set_name("query-bench");
  cs.mutable_profile()->set_body(R"({"name": "query-bench"})");
  cs.set_shard_max_models(a.shard);
  cs.set_shard_target_s(1e9);  // pack by count only
  cs.set_baseline_sweep_id(baseline);
  cs.set_seed(a.seed);
  return cs;
}

void PrintSweep(const char* what, const IngestStats& s) {
  std::printf(
      "sweep %lld %s: %lld models + %lld reruns in %.1f s (%.0f models/s), "
      "%lld reports, report p50 %.0f ms p99 %.0f ms, regressions %lld deterministic "
      "%lld flaky\n",
      static_cast<long long>(s.sweep_id), what, static_cast<long long>(s.models),
      static_cast<long long>(s.reruns), s.seconds, static_cast<double>(s.models) / s.seconds,
      static_cast<long long>(s.reports), s.report_p50_ms, s.report_p99_ms,
      static_cast<long long>(s.deterministic), static_cast<long long>(s.flaky));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  FillArgs a;
  ts::flags::Program p("query_fill", "fills a database with N sweeps of the catalog's records");
  ts::bench::AddDatabaseFlags(p, &a.db);
  p.Option("--catalog", &a.catalog, "FILE", "the catalog (touchstone catalog generate)")
      .Required()
      .File();
  p.Option("--sweeps", &a.sweeps, "N", "sweeps in the database at the end").Min(1);
  p.Option("--connections", &a.connections, "N", "store connections reporting").Min(1);
  p.Option("--shard", &a.shard, "N", "models per shard").Min(1);
  p.Option("--seed", &a.seed, "N", "the records' seed");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto env = ts::bench::OpenDatabase(a.db);
  if (!env.ok()) return ts::bench::Fail(env.status());
  auto catalog = ts::bench::LoadCatalog(a.catalog);
  if (!catalog.ok()) return ts::bench::Fail(catalog.status());
  const ts::bench::RecordGenerator gen(*catalog, a.seed);
  const auto t0 = std::chrono::steady_clock::now();
  auto upserted = ts::bench::UpsertCatalog(env->url, *catalog);
  if (!upserted.ok()) return ts::bench::Fail(upserted.status());
  std::printf("catalog: %zu models upserted in %.1f s\n", catalog->size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  auto existing = ts::bench::FillSweeps(env->url);
  if (!existing.ok()) return ts::bench::Fail(existing.status());
  ts::bench::IngestOptions io{env->url, a.connections};
  int64_t models = 0;
  double seconds = 0;
  int done = 0;
  int64_t last = 0;
  for (const auto& s : *existing) {
    if (s.state == "running") {
      auto r = ts::bench::ResumeSweep(io, s.sweep_id, gen);
      if (!r.ok()) return ts::bench::Fail(r.status());
      PrintSweep("resumed", *r);
    }
    ++done;
    last = s.sweep_id;
  }
  for (int n = done + 1; n <= a.sweeps; ++n) {
    auto r = ts::bench::IngestSweep(io, FillSweep(a, n, last), gen);
    if (!r.ok()) return ts::bench::Fail(r.status());
    PrintSweep("filled", *r);
    models += r->models;
    seconds += r->seconds;
    last = r->sweep_id;
  }
  std::printf("\n| fill | value |\n|---|---|\n");
  std::printf("| sweeps filled now / in the database | %d / %d |\n", a.sweeps - done,
              std::max(done, a.sweeps));
  std::printf("| models per sweep | %zu |\n", catalog->size());
  std::printf("| store connections reporting / shard size | %d / %d |\n", a.connections, a.shard);
  if (seconds > 0) {
    std::printf("| **fill rate** | **%.0f model records/s** (%lld in %.0f s) |\n",
                static_cast<double>(models) / seconds, static_cast<long long>(models), seconds);
  }
  return 0;
}
