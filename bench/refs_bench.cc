// Reference bundles (issue 31): a catalog sample run cold (no bundles: every model computes its
// references and stores them) and then warm (every bundle stored), in one process, side by
// side; the reference share of each pass's time; the bundles' size per model and class, and
// extrapolated to the whole catalog by its class mix; and the verdicts of the two passes
// compared (they must be equal byte for byte, timings aside).
//
//   refs_bench --catalog FILE --profile FILE [--sample N] [--seed S] [--store DIR]
//              [--modes eager,compile,train] [--audit-ops]
//
// Prints Markdown for bench/RESULTS.md. --store (default a fresh temporary folder) is emptied
// first. Exit 1 when a warm verdict differs from its cold one.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "services/common/flags.h"
#include "workers/catalog/catalog.h"
#include "workers/engine/engine.h"
#include "workers/refs/store.h"
#include "workers/simdevice/runtime.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string catalog, profile, store;
  int64_t sample = 500;
  uint64_t seed = 0;
  std::vector<std::string> modes;  // empty: every mode
  bool audit_ops = false;
};

int Usage(const std::string& why) {
  std::fprintf(stderr, "refs_bench: %s (refs_bench --help)\n", why.c_str());
  return 2;
}

// Returns the exit code when the program stops here (help, or a bad flag: printed), else
// nullopt.
std::optional<int> Parse(int argc, char** argv, Flags* f) {
  ts::flags::Program p(
      "refs_bench",
      "a catalog sample cold then warm in one process: the reference work's "
      "share, bundle sizes per class and for the whole catalog, verdicts compared");
  p.Option("--catalog", &f->catalog, "FILE", "the catalog (JSON lines)").Required().File();
  p.Option("--profile", &f->profile, "FILE", "the device profile").Required().File();
  p.Option("--sample", &f->sample, "N", "models, stratified").Min(1);
  p.Option("--seed", &f->seed, "S", "the sample's and the models' seed");
  p.Option("--store", &f->store, "DIR",
           "the bundle folder, emptied first (default: a temporary one)")
      .Dir();
  p.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices({"eager", "compile", "train"});
  p.Flag("--audit-ops", &f->audit_ops, "replay passing modes op by op too (as a sweep does)");
  p.Notes(
      "Prints Markdown for bench/RESULTS.md. exit: 0, 1 a warm verdict differs from its cold "
      "one, 2 usage");
  return p.Parse(argc, argv);
}

// The engine's reference work in a record's timings: the reference stage (a stored bundle's
// load included) and train's reference curves and fp64 step.
double ReferenceMs(const ts::engine::ModelResult& r) {
  double ms = 0;
  for (const char* t : {"reference", "train_reference", "train_declared", "train_golden_grads"}) {
    auto it = r.timings_ms.find(t);
    if (it != r.timings_ms.end()) ms += it->second;
  }
  return ms;
}

// The verdicts of a record: everything but wall-clock times and where references came from.
std::string Verdicts(const ts::engine::ModelResult& r) {
  nlohmann::json j = ts::engine::ToJson(r);
  j.erase("timings_ms");
  j.erase("references");
  std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& v) {
    if (!v.is_object()) return;
    for (const char* k : {"ms", "compile_wall_ms", "first_run_ms"}) v.erase(k);
    for (auto& [k, child] : v.items()) strip(child);
  };
  strip(j);
  return j.dump();
}

struct Pass {
  double seconds = 0, reference_s = 0;
  int64_t stored = 0, computed = 0, other = 0;
  std::vector<std::string> verdicts;
  std::vector<std::string> digests;
};

Pass Run(const std::vector<ts::catalog::Row>& rows, const Flags& f, const ts::refs::DirStore& s) {
  Pass p;
  const auto t0 = Clock::now();
  for (const auto& row : rows) {
    ts::engine::RunOptions o;
    o.arch = row.arch;
    o.modes = f.modes.empty() ? ts::engine::KnownModes()
                              : std::set<std::string>(f.modes.begin(), f.modes.end());
    o.seed = f.seed;
    o.audit_ops = f.audit_ops;
    o.model_id = row.id;
    o.references.save = [&s](const ts::refs::BundleKey& k, const std::string& b) {
      return s.Put(k, b);
    };
    o.references.load = [&s](const ts::refs::BundleKey& k) { return s.Get(k); };
    const ts::engine::ModelResult r = ts::engine::RunModel(row.config, o);
    p.reference_s += ReferenceMs(r) / 1000;
    const std::string& src = r.references.source;
    (src == "stored" ? p.stored : src == "computed" ? p.computed : p.other) += 1;
    p.verdicts.push_back(Verdicts(r));
    p.digests.push_back(r.references.content_digest);
  }
  p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return p;
}

std::string Mib(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024));
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (auto rc = Parse(argc, argv, &f)) return *rc;
  std::ifstream pin(f.profile);
  std::stringstream pss;
  pss << pin.rdbuf();
  const std::string profile_text = pss.str();
  ts::engine::ConfigureThreads(1);
  if (auto act = ts::simdevice::Activate(profile_text, f.seed); !act.ok()) {
    return Usage("--profile: " + act.status().ToString());
  }
  // Every row's keys (the class mix of the whole catalog), then the sample in full.
  std::ifstream in(f.catalog);
  if (!in) return Usage("cannot read " + f.catalog);
  std::vector<ts::catalog::Row> keys;
  std::vector<std::string> lines;
  std::map<std::string, int64_t> catalog_archs;
  for (std::string line; std::getline(in, line);) {
    auto k = ts::catalog::ParseKeys(line);
    if (!k.ok()) continue;
    ++catalog_archs[k->arch];
    keys.push_back(std::move(*k));
    lines.push_back(std::move(line));
  }
  std::map<std::string, size_t> line_of;
  for (size_t i = 0; i < keys.size(); ++i) line_of[keys[i].id] = i;
  std::vector<ts::catalog::Row> rows;
  for (const auto& k : ts::catalog::StratifiedSample(keys, f.sample, f.seed)) {
    auto r = ts::catalog::ParseJsonLine(lines[line_of.at(k.id)]);
    if (r.ok()) rows.push_back(std::move(*r));
  }
  lines.clear();
  const std::string root =
      f.store.empty()
          ? (fs::temp_directory_path() / ("refs_bench_" + std::to_string(::getpid()))).string()
          : f.store;
  fs::remove_all(root);
  auto store = ts::refs::DirStore::Open(root);
  if (!store.ok()) return Usage("--store: " + store.status().ToString());

  const Pass cold = Run(rows, f, *store);
  const Pass warm = Run(rows, f, *store);

  int64_t differ = 0;
  for (size_t i = 0; i < rows.size(); ++i) differ += cold.verdicts[i] != warm.verdicts[i];
  // Bundle sizes by class, from the store (the bundle each model's warm pass used).
  std::map<std::string, std::pair<int64_t, int64_t>> by_arch;  // arch -> (bundles, bytes)
  int64_t total_bytes = 0, bundles = 0;
  std::set<std::string> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& d = warm.digests[i];
    if (d.empty() || !seen.insert(d).second) continue;
    const auto bytes = store->ReadBlob(d);
    if (!bytes.ok()) continue;
    auto& a = by_arch[rows[i].arch];
    a.first += 1;
    a.second += static_cast<int64_t>(bytes->size());
    total_bytes += static_cast<int64_t>(bytes->size());
    ++bundles;
  }
  const double mean = bundles ? static_cast<double>(total_bytes) / bundles : 0;
  double catalog_bytes = 0;
  int64_t catalog_rows = 0, unsampled = 0;
  for (const auto& [arch, n] : catalog_archs) {
    auto it = by_arch.find(arch);
    const double per =
        it != by_arch.end() ? static_cast<double>(it->second.second) / it->second.first : mean;
    unsampled += it == by_arch.end() ? n : 0;
    catalog_bytes += per * static_cast<double>(n);
    catalog_rows += n;
  }

  std::printf("### Reference bundles: %zu models of %s, cold then warm\n\n", rows.size(),
              f.catalog.c_str());
  std::printf("| pass | seconds | reference work (s) | share | stored / computed |\n");
  std::printf("|---|---:|---:|---:|---|\n");
  for (const auto& [name, p] : {std::pair{"cold", &cold}, std::pair{"warm", &warm}}) {
    std::printf("| %s | %.2f | %.2f | %.0f%% | %lld / %lld |\n", name, p->seconds, p->reference_s,
                100 * p->reference_s / std::max(1e-9, p->seconds),
                static_cast<long long>(p->stored), static_cast<long long>(p->computed));
  }
  std::printf("\nwarm / cold: %.3f; verdicts differing between the passes: %lld of %zu\n\n",
              warm.seconds / std::max(1e-9, cold.seconds), static_cast<long long>(differ),
              rows.size());
  std::printf(
      "bundles: %lld, %s, mean %.1f KiB per model; the %lld-row catalog by its class mix: "
      "%s (%lld rows of classes not in the sample at the mean)\n\n",
      static_cast<long long>(bundles), Mib(static_cast<double>(total_bytes)).c_str(), mean / 1024,
      static_cast<long long>(catalog_rows), Mib(catalog_bytes).c_str(),
      static_cast<long long>(unsampled));
  // On disk the store deflates what deflates (workers/refs/store.h): the same bundles' files.
  double on_disk = 0;
  for (const std::string& d : seen) {
    std::error_code ec;
    const auto n = fs::file_size(fs::path(root) / "blobs" / d.substr(0, 2) / d, ec);
    if (!ec) on_disk += static_cast<double>(n);
  }
  const double ratio = total_bytes > 0 ? on_disk / static_cast<double>(total_bytes) : 1;
  std::printf("on disk (the store's files, deflated where that saves): %s, %.3f of the bundles' "
              "bytes; the catalog at that ratio: %s\n\n",
              Mib(on_disk).c_str(), ratio, Mib(catalog_bytes * ratio).c_str());
  std::vector<std::pair<double, std::string>> largest;
  for (const auto& [arch, a] : by_arch) {
    largest.push_back({static_cast<double>(a.second) / a.first, arch});
  }
  std::sort(largest.rbegin(), largest.rend());
  std::printf("| class | bundles | mean KiB | catalog rows |\n|---|---:|---:|---:|\n");
  for (size_t i = 0; i < largest.size() && i < 12; ++i) {
    const auto& arch = largest[i].second;
    std::printf("| %s | %lld | %.1f | %lld |\n", arch.c_str(),
                static_cast<long long>(by_arch[arch].first), largest[i].first / 1024,
                static_cast<long long>(catalog_archs[arch]));
  }
  if (f.store.empty()) fs::remove_all(root);
  return differ == 0 ? 0 : 1;
}
