// zoo_export_all: `touchstone zoo export` for every registered class in one process (export.h),
// for scripts/hf_export_all on a build without the full `touchstone` command.
//
//   zoo_export_all --out ROOT [--seed N] [--compact] [SUBSTRING]
//
// Writes ROOT/<class>/{config.json, model.safetensors, inputs.safetensors, outputs.safetensors}
// from each class's example config (--compact: ExportOptions::compact); exit 1 when any class
// fails (each failure printed).
#include <cstdio>
#include <filesystem>
#include <string>

#include "services/common/flags.h"
#include "workers/zoo/export.h"
#include "workers/zoo/model.h"

int main(int argc, char** argv) {
  std::string out, filter;
  uint64_t seed = 0;
  bool compact = false;
  ts::flags::Program p("zoo_export_all",
                       "writes `touchstone zoo export` of every registered class under ROOT");
  p.Option("--out", &out, "ROOT", "the folder to write ROOT/<class>/ into").Required();
  p.Option("--seed", &seed, "N", "the weights and batch seed");
  p.Flag("--compact", &compact, "the compact export (ExportOptions::compact)");
  p.Positional("SUBSTRING", &filter, "only the classes whose name contains it");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  int failed = 0, done = 0;
  for (const auto& a : ts::zoo::SupportedArchitectures()) {
    if (!filter.empty() && a.arch.find(filter) == std::string::npos) continue;
    ts::zoo::ExportOptions o;
    o.arch = a.arch;
    o.seed = seed;
    o.compact = compact;
    const ts::Status s = ts::zoo::ExportModel(*ts::zoo::ExampleConfig(a.arch), o,
                                              (std::filesystem::path(out) / a.arch).string());
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", a.arch.c_str(), s.ToString().c_str());
      ++failed;
    } else {
      ++done;
    }
  }
  std::printf("exported %d classes to %s, %d failed\n", done, out.c_str(), failed);
  return failed ? 1 : 0;
}
