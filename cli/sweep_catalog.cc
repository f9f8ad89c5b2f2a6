#include "cli/sweep_catalog.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace ts::cli {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;

std::string DefaultDataDir() {
  const char* env = std::getenv("TS_DATA_DIR");
  if (env && *env) return env;
  // The binary lives in <repo>/build/bin; the reference data sits beside the repo.
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  for (auto dir = exe.parent_path(); !ec && !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (fs::exists(dir / ".." / "shared" / "data"))
      return (dir / ".." / "shared" / "data").string();
  }
  return "../shared/data";
}

absl::StatusOr<std::string> SweepCatalogPath(const std::string& catalog,
                                             const std::string& state_dir,
                                             const std::string& data_dir) {
  if (!catalog.empty()) return catalog;
  const std::string path = state_dir + "/catalog-seed0.jsonl";
  if (fs::exists(path)) return path;
  std::fprintf(stderr, "touchstone sweep: generating the 104,909-model catalog\n");
  std::ofstream out(path + ".tmp");
  catalog::GenerateOptions go;
  go.data_dir = data_dir;
  auto g = catalog::Generate(go, out);
  out.close();
  if (!g.ok()) return absl::InternalError("catalog: " + g.status().message());
  // Written aside and renamed, so that an interrupted generation is never taken for a catalog.
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  return path;
}

absl::StatusOr<CatalogSample> SampleCatalog(
    const std::string& path, int64_t sample, uint64_t seed,
    const std::function<void(int64_t, const std::string&)>& on_bad_line) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read " + path);
  std::vector<catalog::Row> keys;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto k = catalog::ParseKeys(line);
    if (!k.ok()) {
      if (on_bad_line) on_bad_line(line_no, k.status().message());
      continue;
    }
    k->config_hash = std::to_string(line_no);  // carries the line number through the sampler
    keys.push_back(std::move(*k));
  }
  const std::vector<catalog::Row> picked =
      sample > 0 ? catalog::StratifiedSample(keys, sample, seed) : keys;
  CatalogSample out;
  out.rows = static_cast<int64_t>(keys.size());
  for (const auto& r : picked) out.lines.insert(std::stoll(r.config_hash));
  return out;
}

absl::Status ForEachRow(const std::string& path, const std::set<int64_t>& lines,
                        const std::function<absl::Status(catalog::Row)>& each) {
  std::ifstream in(path);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!lines.count(line_no)) continue;
    auto r = catalog::ParseJsonLine(line);
    if (!r.ok()) continue;
    if (absl::Status st = each(std::move(*r)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status UploadRows(const std::string& path, const std::set<int64_t>& lines,
                        cluster::SweepDriver* driver, pb::CreateSweepRequest* create) {
  absl::Status st = ForEachRow(path, lines, [&](catalog::Row r) {
    pb::CatalogModel m;
    m.set_id(r.id);
    m.set_task(r.task);
    m.set_arch(r.arch);
    m.set_family(r.family);
    m.set_config_json(r.config.dump());
    m.set_config_hash(r.config_hash);
    create->mutable_filter()->add_model_ids(r.id);
    return driver->AddModel(std::move(m));
  });
  if (!st.ok()) return st;
  return driver->FlushModels();
}

}  // namespace ts::cli
