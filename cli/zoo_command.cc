// `touchstone zoo` (zoo_command.h): the registry, and export of a class's tiny model as files
// (workers/zoo/export.h).
#include "cli/zoo_command.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/usage.h"
#include "workers/zoo/config.h"
#include "workers/zoo/export.h"
#include "workers/zoo/model.h"

namespace ts::cli {
namespace {

constexpr const char* kZooUsage =
    "usage: touchstone zoo list [--format json|text]\n"
    "       touchstone zoo supports CONFIG   (exit 0 iff its architecture is built by the zoo)\n"
    "       touchstone zoo export --arch CLASS [--config FILE] [--seed N] --out DIR\n"
    "           (config.json, model.safetensors, inputs.safetensors, outputs.safetensors of the\n"
    "            class's tiny model; --config defaults to the class's example config)\n";

constexpr CommandText kZoo = {"touchstone zoo", "touchstone zoo", kZooUsage};

bool ReadText(const std::string& path, std::string* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

int Supports(const std::string& file) {
  std::string text;
  if (!ReadText(file, &text)) return Usage(kZoo, "cannot read config " + file);
  auto config = nlohmann::json::parse(text, nullptr, false);
  const std::string arch = zoo::ArchOf(config);  // "" for a discarded parse
  if (arch.empty()) return 1;
  for (const auto& a : zoo::SupportedArchitectures()) {
    if (a.arch == arch) return 0;
  }
  return 1;
}

int List(const std::vector<std::string>& args) {
  std::string format = "text";
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--format" && i + 1 < args.size()) {
      format = args[++i];
      if (format != "json" && format != "text") return Usage(kZoo, "--format must be json or text");
    } else {
      return Usage(kZoo, "list: unknown argument '" + args[i] + "'");
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : zoo::SupportedArchitectures()) {
    if (format == "json") {
      out.push_back({{"arch", a.arch}, {"family", a.family}, {"task", a.task}});
    } else {
      std::cout << a.arch << "\t" << a.task << "\t" << a.family << "\n";
    }
  }
  if (format == "json") std::cout << out.dump() << std::endl;
  return 0;
}

int Export(const std::vector<std::string>& args) {
  std::string arch, config_file, out;
  int64_t seed = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const bool has = i + 1 < args.size();
    if (args[i] == "--arch" && has) {
      arch = args[++i];
    } else if (args[i] == "--config" && has) {
      config_file = args[++i];
    } else if (args[i] == "--out" && has) {
      out = args[++i];
    } else if (args[i] == "--seed" && has) {
      if (!ParseNonNegative(args[++i], &seed)) return Usage(kZoo, "--seed: expected N >= 0");
    } else {
      return Usage(kZoo, "export: unknown argument '" + args[i] + "'");
    }
  }
  if (out.empty()) return Usage(kZoo, "export: --out DIR is required");
  nlohmann::json config;
  if (!config_file.empty()) {
    std::string text;
    if (!ReadText(config_file, &text)) return Usage(kZoo, "cannot read config " + config_file);
    config = nlohmann::json::parse(text, nullptr, false);
    if (config.is_discarded()) return Fail(kZoo, config_file + ": not JSON");
  } else {
    if (arch.empty()) return Usage(kZoo, "export: --arch or --config is required");
    auto example = zoo::ExampleConfig(arch);
    if (!example.ok()) return Fail(kZoo, example.status().message());
    config = *example;
  }
  zoo::ExportOptions o;
  o.arch = arch;
  o.seed = static_cast<uint64_t>(seed);
  const Status s = zoo::ExportModel(config, o, out);
  if (!s.ok()) return Fail(kZoo, "export: " + s.message());
  return 0;
}

}  // namespace

int ZooCommand(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "supports") return Supports(args[1]);
  if (!args.empty() && args[0] == "list") return List(args);
  if (!args.empty() && args[0] == "export") return Export(args);
  return Usage(kZoo, "expected 'list', 'supports FILE' or 'export ...'");
}

}  // namespace ts::cli
