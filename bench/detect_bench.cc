// Regression detection at full size (issue 11): times Store::DetectRegressions on each sweep of
// a query_fill database (104,909 generated models per sweep, each sweep with the one before as
// its baseline, confirmation reruns settled), oldest first, as the scheduler's ticker would run
// it when each sweep ends. Run it once on a fresh fill: the first detection of a sweep is what
// is timed (it writes alerts, quarantine and detected_at); a second run detects again, which
// changes nothing and is not the same work. From the 4th sweep on, the numeric drift test has
// the history it needs (3 prior sweeps) and runs too.
//
//   build/bench/query_fill   --catalog catalog.jsonl --state-dir DIR --sweeps 8
//   build/bench/detect_bench --state-dir DIR        (or --db URL)
//
// Prints one Markdown row per sweep: flips, deterministic, flaky, group tests, fired, alerts
// opened/updated/resolved, drift findings, seconds.
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/bench_database.h"
#include "services/common/flags.h"
#include "services/store/store.h"

int main(int argc, char** argv) {
  ts::bench::DatabaseArgs db;
  ts::flags::Program p("detect_bench",
                       "regression detection at full size on a query_fill database");
  ts::bench::AddDatabaseFlags(p, &db);
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto env = ts::bench::OpenDatabase(db);
  if (!env.ok()) return ts::bench::Fail(env.status());
  auto sweeps = ts::bench::FillSweeps(env->url);
  if (!sweeps.ok()) return ts::bench::Fail(sweeps.status());
  auto store = ts::store::Store::Connect({env->url});
  if (!store.ok()) return ts::bench::Fail(store.status());
  std::printf("| sweep | flips | deterministic | flaky | group tests | fired | alerts opened / "
              "updated / resolved | drift | detection s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (size_t k = 1; k < sweeps->size(); ++k) {
    const auto& s = (*sweeps)[k];
    if (s.state != "done") continue;
    const auto t0 = std::chrono::steady_clock::now();
    auto d = (*store)->DetectRegressions(s.sweep_id, 0);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!d.ok()) return ts::bench::Fail(d.status());
    std::printf("| %lld | %lld | %lld | %lld | %lld | %d | %d / %d / %d | %d | %.2f |\n",
                static_cast<long long>(s.sweep_id), static_cast<long long>(d->flips()),
                static_cast<long long>(d->deterministic()), static_cast<long long>(d->flaky()),
                static_cast<long long>(d->tests()), d->fired_size(), d->opened_size(),
                d->updated_size(), d->resolved_size(), d->drift_size(), secs);
    std::fflush(stdout);
  }
  return 0;
}
