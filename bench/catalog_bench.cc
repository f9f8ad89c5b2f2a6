// bench/catalog: per-family per-model ms over every class the zoo builds (its example config,
// defect-free sim-2.0, one core, warm), and the projected single-machine time of the full
// default catalog (104,909 rows weighted by the catalog's own class counts).
//
//   build/bench/catalog_bench [--reps N] [--cores N]
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

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, cores = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--cores" && i + 1 < argc) cores = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: catalog_bench [--reps N] [--cores N]\n");
      return 2;
    }
  }
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

  std::map<std::string, std::vector<double>> family_ms;
  std::map<std::string, int> family_classes;
  std::map<std::string, int64_t> family_rows;
  double projected_ms = 0;
  int non_pass = 0;
  for (const auto& a : ts::zoo::SupportedArchitectures()) {
    auto cfg = ts::zoo::ExampleConfig(a.arch);
    ts::engine::RunOptions o;
    (void)ts::engine::RunModel(*cfg, o);  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      auto res = ts::engine::RunModel(*cfg, o);
      ms.push_back(res.timings_ms["total"]);
      if (r == 0) {
        for (const auto& [m, mr] : res.modes) non_pass += mr.status != ts::engine::Verdict::kPass;
      }
    }
    const double med = Median(ms);
    family_ms[a.family].push_back(med);
    family_classes[a.family] += 1;
    const int64_t rows = cat->per_arch.count(a.arch) ? cat->per_arch.at(a.arch) : 0;
    family_rows[a.family] += rows;
    projected_ms += static_cast<double>(rows) * med;
  }
  std::printf("| family | classes | catalog rows | median ms/model | max class ms |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  std::vector<double> all;
  for (const auto& [family, v] : family_ms) {
    all.insert(all.end(), v.begin(), v.end());
    std::printf("| %s | %d | %lld | %.1f | %.1f |\n", family.c_str(), family_classes[family],
                static_cast<long long>(family_rows[family]), Median(v),
                *std::max_element(v.begin(), v.end()));
  }
  std::printf("\n%zu classes, median %.1f ms per model (all three modes); %d non-pass mode "
              "verdicts on the defect-free baseline.\n",
              all.size(), Median(all), non_pass);
  std::printf("Projected full catalog (%lld rows) on %d cores: **%.1f min** (target <= 60 min).\n",
              static_cast<long long>(cat->rows), cores, projected_ms / cores / 60000.0);
  return 0;
}
