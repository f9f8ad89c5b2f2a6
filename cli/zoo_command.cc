// `touchstone zoo list | supports | export` (commands.h): the registry, and export of a class's
// tiny model as files (workers/zoo/export.h).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/usage.h"
#include "workers/zoo/config.h"
#include "workers/zoo/export.h"
#include "workers/zoo/model.h"

namespace ts::cli {
namespace {

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
  if (!ReadText(file, &text)) return Usage("cannot read config " + file);
  auto config = nlohmann::json::parse(text, nullptr, false);
  const std::string arch = zoo::ArchOf(config);  // "" for a discarded parse
  if (arch.empty()) return 1;
  for (const auto& a : zoo::SupportedArchitectures()) {
    if (a.arch == arch) return 0;
  }
  return 1;
}

int List(const std::string& format) {
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

struct ExportFlags {
  std::string arch, config_file, out;
  uint64_t seed = 0;
};

int Export(const ExportFlags& f) {
  nlohmann::json config;
  if (!f.config_file.empty()) {
    std::string text;
    if (!ReadText(f.config_file, &text)) return Usage("cannot read config " + f.config_file);
    config = nlohmann::json::parse(text, nullptr, false);
    if (config.is_discarded()) return Fail(f.config_file + ": not JSON");
  } else {
    if (f.arch.empty()) return Usage("--arch or --config is required");
    auto example = zoo::ExampleConfig(f.arch);
    if (!example.ok()) return Fail(example.status().message());
    config = *example;
  }
  zoo::ExportOptions o;
  o.arch = f.arch;
  o.seed = f.seed;
  const Status s = zoo::ExportModel(config, o, f.out);
  if (!s.ok()) return Fail(s.message());
  return 0;
}

}  // namespace

void AddZooCommands(flags::Command& root) {
  flags::Command& zoo = root.Group("zoo", "the architecture classes the zoo builds");
  auto format = std::make_shared<std::string>("text");
  flags::Command& list =
      zoo.Add("list", "the classes, with task and family", [format] { return List(*format); });
  list.Option("--format", format.get(), "json|text", "tab-separated lines, or a JSON array")
      .Choices({"json", "text"});

  auto config = std::make_shared<std::string>();
  zoo.Add("supports", "exit 0 iff the config's architectures[0] is built by the zoo (else 1)",
          [config] { return Supports(*config); })
      .Positional("CONFIG", config.get(), "a Hugging Face config.json")
      .Required()
      .File();

  auto f = std::make_shared<ExportFlags>();
  flags::Command& e =
      zoo.Add("export",
              "the class's tiny model as config.json, model.safetensors, inputs.safetensors and "
              "outputs.safetensors (workers/zoo/README.md, \"Checkpoints\")",
              [f] { return Export(*f); });
  e.Option("--arch", &f->arch, "CLASS", "the class");
  e.Option("--config", &f->config_file, "FILE", "the config (default: the class's example)").File();
  e.Option("--seed", &f->seed, "N", "the weights' and inputs' seed");
  e.Option("--out", &f->out, "DIR", "the folder to write").Required().Dir();
}

}  // namespace ts::cli
