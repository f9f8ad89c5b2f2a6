// `touchstone run-model` (one model through every requested mode, isolated in a child process)
// and `touchstone summarize` (run-model JSON lines -> verdict table). commands.h.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/profile_file.h"
#include "cli/usage.h"
#include "workers/engine/engine.h"
#include "workers/runner/isolate.h"
#include "workers/runner/record.h"
#include "workers/runner/record_json.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/config_hash.h"
#include "workers/zoo/safetensors.h"

namespace ts::cli {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string TextOf(const nlohmann::json& r) {
  std::ostringstream o;
  // Copies, not references to temporaries: value() returns by value.
  const nlohmann::json m = r.value("model", nlohmann::json::object());
  const nlohmann::json modes = r.value("modes", nlohmann::json::object());
  o << m.value("arch", std::string("?")) << " (" << m.value("task", std::string("?")) << ")\n";
  for (const auto& [mode, v] : modes.items()) {
    o << "  " << mode << ": " << v.value("status", std::string("?"));
    if (v.contains("rmse_ratio") && v["rmse_ratio"].is_number())
      o << "  rmse_ratio=" << v["rmse_ratio"].get<double>();
    if (v.contains("graph_breaks")) o << "  graph_breaks=" << v["graph_breaks"].get<int>();
    if (v.contains("compile_ms") && v["compile_ms"].is_number())
      o << "  compile_ms=" << v["compile_ms"].get<double>();
    if (v.contains("error") && v["error"].is_string())
      o << "\n      " << v["error"].get<std::string>();
    for (const auto& s : v.value("suspects", nlohmann::json::array())) {
      o << "\n      suspect " << s.value("op", std::string()) << " "
        << s.value("shapes", std::string()) << " " << s.value("dtype", std::string()) << " ratio "
        << s.value("ratio", 0.0) << " (" << s.value("calls", 0) << "/" << s.value("total_calls", 0)
        << " calls)";
    }
    o << "\n";
  }
  if (r.contains("op_coverage")) {
    const auto& c = r["op_coverage"];
    o << "  op coverage: " << c.value("native_ops", 0) << "/" << c.value("distinct_ops", 0)
      << " native\n";
  }
  if (r.contains("fallback_ops") && !r["fallback_ops"].empty()) {
    o << "  fallback ops:";
    for (const auto& [op, u] : r["fallback_ops"].items())
      o << " " << op << " x" << u.value("calls", 0);
    o << "\n";
  }
  return o.str();
}

struct RunModelFlags {
  std::string config_path, profile_path, format = "json";
  ts::engine::RunOptions opts;
  std::vector<std::string> modes;  // empty: every mode
  double timeout_s = 120;
  bool isolate = true;
  std::string weights_dir;  // --weights-dir: the model id's checkpoint when it has one
};

// The load_fail verdict for every requested mode, for a config that is not JSON.
nlohmann::json LoadFailResult(const engine::RunOptions& opts, const std::string& config_text,
                              const std::string& config_error) {
  engine::ModelResult r;
  r.arch = opts.arch;
  r.task = opts.task;
  r.config_hash = zoo::ConfigHash(nlohmann::json(config_text));
  for (const auto& mode : engine::KnownModes()) {
    r.modes[mode].status =
        opts.modes.count(mode) ? engine::Verdict::kLoadFail : engine::Verdict::kSkipped;
    if (opts.modes.count(mode)) r.modes[mode].error = config_error;
  }
  return runner::RecordToJson(runner::ToRecord(r));
}

// The record of one model: load_fail for a config that is not JSON, else the engine's, in a
// child process unless `isolate` is off. Returns 0 or the exit code (printed).
int RunOne(const RunModelFlags& f, const engine::RunOptions& opts, const ProfileFile& profile,
           const std::string& config_text, nlohmann::json* result) {
  nlohmann::json config;
  std::string config_error;
  try {
    config = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::parse_error& e) {
    config_error = "config: not valid JSON (" + std::string(e.what()) + ")";
  }
  const std::string profile_text = profile.text;
  const uint64_t seed = opts.seed;
  auto setup = [profile_text, seed]() -> std::string {
    engine::ConfigureThreads(1);
    auto r = simdevice::Activate(profile_text, seed);
    return r.ok() ? "" : r.status().ToString();
  };
  if (!config_error.empty()) {
    // Nothing to build: the verdict is load_fail for every requested mode.
    *result = LoadFailResult(opts, config_text, config_error);
    return 0;
  }
  if (f.isolate) {
    runner::IsolateOptions iso;
    iso.timeout_s = f.timeout_s;
    iso.child_setup = setup;
    auto record = runner::RunModelIsolated(config, opts, iso);
    if (!record.ok()) return Error(2, record.status().ToString());
    *result = runner::RecordToJson(*record);
    return 0;
  }
  if (std::string err = setup(); !err.empty()) return Error(2, err);
  *result = runner::RecordToJson(runner::ToRecord(engine::RunModel(config, opts)));
  return 0;
}

int RunModel(const RunModelFlags& f) {
  engine::RunOptions opts = f.opts;
  if (!f.modes.empty()) opts.modes = {f.modes.begin(), f.modes.end()};
  opts.checkpoint_dir = zoo::CheckpointDirFor(f.weights_dir, opts.model_id);
  std::string config_text;
  if (!ReadFile(f.config_path, &config_text)) return Usage("cannot read config " + f.config_path);
  ProfileFile profile;
  if (int rc = ReadProfileFile(f.profile_path, &profile); rc != 0) return rc;
  nlohmann::json result;
  if (int rc = RunOne(f, opts, profile, config_text, &result); rc != 0) return rc;
  result["profile"] = {{"name", profile.info.name}, {"sdk_version", profile.info.sdk_version}};
  result["seed"] = opts.seed;
  if (f.format == "json") {
    std::cout << result.dump() << std::endl;
  } else {
    std::cout << TextOf(result);
  }
  return 0;
}

// Reads run-model JSON lines and prints one row per model plus pass rates per mode.
int Summarize() {
  std::string line;
  std::map<std::string, int> passes, runs;
  double opcov_sum = 0;
  int models = 0, bad_lines = 0;
  std::printf("%-34s %-22s %-18s %-18s %-18s %6s %6s\n", "arch", "task", "eager", "compile",
              "train", "opcov", "breaks");
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_discarded() || !r.contains("modes")) {
      ++bad_lines;
      continue;
    }
    ++models;
    auto status = [&](const char* mode) -> std::string {
      if (!r["modes"].contains(mode)) return "-";
      std::string s = r["modes"][mode].value("status", std::string("?"));
      if (s != "skipped") {
        runs[mode] += 1;
        passes[mode] += s == "pass";
      }
      return s;
    };
    const double opcov = r.contains("op_coverage") && r["op_coverage"]["ratio"].is_number()
                             ? r["op_coverage"]["ratio"].get<double>()
                             : 0.0;
    opcov_sum += opcov;
    const auto& m = r.value("model", nlohmann::json::object());
    const std::string eager = status("eager"), compile = status("compile"), train = status("train");
    int breaks = 0;
    if (r["modes"].contains("compile")) breaks = r["modes"]["compile"].value("graph_breaks", 0);
    std::printf("%-34s %-22s %-18s %-18s %-18s %5.1f%% %6d\n",
                m.value("arch", std::string("?")).c_str(),
                m.value("task", std::string("?")).c_str(), eager.c_str(), compile.c_str(),
                train.c_str(), 100 * opcov, breaks);
  }
  auto pct = [&](const char* mode) { return runs[mode] ? 100.0 * passes[mode] / runs[mode] : 0.0; };
  std::printf("\n%d models: Eager %.1f%%  Compile %.1f%%  Train %.1f%%  Mean OpCov %.1f%%\n",
              models, pct("eager"), pct("compile"), pct("train"),
              models ? 100 * opcov_sum / models : 0.0);
  if (bad_lines) std::printf("%d unreadable lines skipped\n", bad_lines);
  return 0;
}

}  // namespace

void AddRunModelCommands(flags::Command& root) {
  auto f = std::make_shared<RunModelFlags>();
  flags::Command& c =
      root.Add("run-model", "one model through every requested mode, isolated in a child process",
               [f] { return RunModel(*f); });
  c.Option("--config", &f->config_path, "FILE", "the model's Hugging Face config.json")
      .Required()
      .File();
  c.Option("--profile", &f->profile_path, "FILE", "the device profile").Required().File();
  c.Option("--arch", &f->opts.arch, "CLASS", "the class to build (default: architectures[0])");
  c.Option("--task", &f->opts.task, "TASK", "the pipeline tag (default: the class's head)");
  c.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices(ModeNames());
  c.Option("--seed", &f->opts.seed, "N", "the seed of weights and inputs");
  c.Option("--format", &f->format, "json|text", "one JSON object, or text")
      .Choices({"json", "text"});
  c.Option("--timeout-s", &f->timeout_s, "S", "each mode's time limit in the child").Positive();
  c.Flag("--no-isolate", &f->isolate, "run in this process (a crash ends it)", false);
  c.Flag("--audit-ops", &f->opts.audit_ops, "replay passing modes op by op too (suspects)");
  c.Option("--model-id", &f->opts.model_id, "ID",
           "seeds the model's own weights, as a sweep's row id does");
  c.Option("--weights-dir", &f->weights_dir, "DIR",
           "runs the checkpoint in DIR/<model id>/ when there is one (built at its own size)")
      .Dir();
  c.Notes(
      "exit: 0 a verdict was produced (including load_fail); 2 usage or unusable input\n"
      "(unreadable file, invalid profile, named with its field); 1 internal failure");

  root.Add("summarize", "verdict table and pass rates from run-model JSON lines on stdin",
           [] { return Summarize(); })
      .Notes("usage: touchstone summarize < results.jsonl");
}

}  // namespace ts::cli
