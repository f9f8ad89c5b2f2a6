// bench/catalog: per-family per-model ms over every class the zoo builds (its example config,
// defect-free sim-2.0, one core, warm), and the projected single-machine time of the full
// default catalog (104,909 rows weighted by the catalog's own class counts).
//
//   build/bench/catalog_bench [--reps N] [--cores N] [--audit-ops]
//
// Of each model's time, the columns also give what the first-step gradient check costs (the
// fp64 step and the comparison: timings "train_golden_grads" + "train_grad_check", always on)
// and, with --audit-ops, what the op-by-op replays of its three passing modes cost ("audit_*"),
// each as a share of the time without it; and the projection with and without them.
//
// Projection = sum over classes of (rows of that class x its median ms) / cores. It assumes
// the sweep keeps every core busy with one runner each (the scheduler's job) and no other
// overhead; bench/RESULTS.md records the measured end-to-end figure separately.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "services/common/flags.h"
#include "workers/catalog/catalog.h"
#include "workers/engine/engine.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/model.h"

namespace {

class NullBuf : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double Sum(const std::map<std::string, double>& timings, const std::string& prefix) {
  double ms = 0;
  for (auto it = timings.lower_bound(prefix); it != timings.end() && it->first.rfind(prefix, 0) == 0;
       ++it) {
    ms += it->second;
  }
  return ms;
}

// One class's median per-model ms over the reps: in all, of which the gradient check and the
// op audit.
struct ClassTimes {
  std::vector<double> total_v, grad_v, audit_v;
  void Add(const std::map<std::string, double>& t) {
    total_v.push_back(t.at("total"));
    grad_v.push_back(Sum(t, "train_golden_grads") + Sum(t, "train_grad_check"));
    audit_v.push_back(Sum(t, "audit_"));
  }
  double total() const { return Median(total_v); }
  double grad() const { return Median(grad_v); }
  double audit() const { return Median(audit_v); }
};

// Row-weighted sums over the catalog.
struct Projection {
  double total = 0, grad = 0, audit = 0;
  void Add(const ClassTimes& t, int64_t rows) {
    total += static_cast<double>(rows) * t.total();
    grad += static_cast<double>(rows) * t.grad();
    audit += static_cast<double>(rows) * t.audit();
  }
};

struct Family {
  std::vector<double> total, grad, audit;
  int classes = 0;
  int64_t rows = 0;
  void Add(const ClassTimes& t, int64_t r) {
    total.push_back(t.total());
    grad.push_back(t.grad());
    audit.push_back(t.audit());
    ++classes;
    rows += r;
  }
};

void PrintTable(const std::map<std::string, Family>& families, bool audit_ops) {
  std::printf("| family | classes | catalog rows | median ms/model | max class ms | grad check "
              "ms | grad check +%% |%s\n",
              audit_ops ? " op audit ms | op audit +% |" : "");
  std::printf("|---|---:|---:|---:|---:|---:|---:|%s\n", audit_ops ? "---:|---:|" : "");
  std::vector<double> all;
  for (const auto& [name, f] : families) {
    all.insert(all.end(), f.total.begin(), f.total.end());
    const double total = Median(f.total), grad = Median(f.grad), audit = Median(f.audit);
    std::printf("| %s | %d | %lld | %.1f | %.1f | %.1f | %.0f%% |", name.c_str(), f.classes,
                static_cast<long long>(f.rows), total,
                *std::max_element(f.total.begin(), f.total.end()), grad,
                100 * grad / (total - grad - audit));
    if (audit_ops) std::printf(" %.1f | %.0f%% |", audit, 100 * audit / (total - audit));
    std::printf("\n");
  }
  std::printf("\n%zu classes, median %.1f ms per model (all three modes%s).\n", all.size(),
              Median(all), audit_ops ? ", with the op audit" : "");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, cores = 2;
  bool audit_ops = false;
  ts::flags::Program program(
      "catalog_bench",
      "per-family per-model ms over every class the zoo builds, and the projected "
      "time of the full catalog");
  program.Option("--reps", &reps, "N", "timed runs of each class after a warm-up").Min(1);
  program.Option("--cores", &cores, "N", "cores the projection divides by").Min(1);
  program.Flag("--audit-ops", &audit_ops,
               "replay passing modes op by op too (its cost in the table)");
  if (auto rc = program.Parse(argc, argv)) return *rc;
  ts::engine::ConfigureThreads(1);
  std::ifstream pin(std::string(TS_PROFILE_DIR) + "/sim-2.0.json");
  std::stringstream ps;
  ps << pin.rdbuf();
  auto pj = nlohmann::json::parse(ps.str());
  pj.erase("defects");
  auto profile = ts::simdevice::Activate(pj.dump(), 0);
  if (!profile.ok()) return 2;

  NullBuf null_buf;
  std::ostream null_out(&null_buf);
  ts::catalog::GenerateOptions go;
  go.data_dir = std::string(TS_SOURCE_DIR) + "/../shared/data";
  auto cat = ts::catalog::Generate(go, null_out);
  if (!cat.ok()) {
    std::fprintf(stderr, "%s\n", cat.status().ToString().c_str());
    return 2;
  }

  std::map<std::string, Family> families;
  Projection projected;
  int non_pass = 0;
  for (const auto& a : ts::zoo::SupportedArchitectures()) {
    auto cfg = ts::zoo::ExampleConfig(a.arch);
    ts::engine::RunOptions o;
    o.audit_ops = audit_ops;
    (void)ts::engine::RunModel(*cfg, o);  // warm-up
    ClassTimes t;
    for (int r = 0; r < reps; ++r) {
      auto res = ts::engine::RunModel(*cfg, o);
      t.Add(res.timings_ms);
      if (r == 0) {
        for (const auto& [m, mr] : res.modes) non_pass += mr.status != ts::engine::Verdict::kPass;
      }
    }
    const int64_t rows = cat->per_arch.count(a.arch) ? cat->per_arch.at(a.arch) : 0;
    families[a.family].Add(t, rows);
    projected.Add(t, rows);
  }
  PrintTable(families, audit_ops);
  std::printf("\n%d non-pass mode verdicts on the defect-free baseline.\n", non_pass);
  const auto minutes = [&](double ms) { return ms / cores / 60000.0; };
  std::printf("Projected full catalog (%lld rows) on %d cores: **%.1f min**%s (target <= 60 min); "
              "without the gradient check%s: %.1f min.\n",
              static_cast<long long>(cat->rows), cores, minutes(projected.total),
              audit_ops ? " with the gradient check and the op audit" : "",
              audit_ops ? " and the audit" : "",
              minutes(projected.total - projected.grad - projected.audit));
  if (audit_ops) {
    std::printf("Without the op audit (gradient check on): %.1f min.\n",
                minutes(projected.total - projected.audit));
  }
  return 0;
}
