// touchstone: the command-line entry point.
//
//   touchstone run-model --config FILE [--arch CLASS] [--task TASK] --profile FILE
//                        [--modes eager,compile,train] [--seed N] [--format json|text]
//                        [--timeout-s S] [--no-isolate] [--audit-ops] [--model-id ID]
//
// Exit codes: 0 a verdict was produced (whatever it is, including load_fail); 2 usage error or
// unusable input (unreadable file, invalid profile); 1 internal failure.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/db.h"
#include "cli/query.h"
#include "cli/query_text.h"
#include "cli/run_findings.h"
#include "cli/serve.h"
#include "cli/submit.h"
#include "cli/sweep.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "cli/zoo_command.h"
#include "proto/names.h"
#include "services/query/summary_builder.h"
#include "services/query/text_tables.h"
#include "workers/catalog/catalog.h"
#include "workers/engine/engine.h"
#include "workers/runner/isolate.h"
#include "workers/runner/record.h"
#include "workers/runner/record_json.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/config.h"
#include "workers/zoo/config_hash.h"
#include "workers/zoo/model.h"
#include "workers/zoo/safetensors.h"

namespace {

constexpr const char* kUsage =
    "usage: touchstone run-model --config FILE [--arch CLASS] [--task TASK] --profile FILE\n"
    "                            [--modes eager,compile,train] [--seed N] [--format json|text]\n"
    "                            [--timeout-s S] [--no-isolate] [--audit-ops] [--model-id ID]\n"
    "                            [--weights-dir DIR]   (DIR/<model id>: a checkpoint to run)\n"
    "       touchstone zoo list [--format json|text]\n"
    "       touchstone zoo supports CONFIG   (exit 0 iff its architecture is built by the zoo)\n"
    "       touchstone zoo export --arch CLASS [--config FILE] [--seed N] --out DIR\n"
    "       touchstone summarize < results.jsonl   (run-model JSON lines -> verdict table)\n"
    "       touchstone catalog generate [--seed N] [--count N] --out FILE.jsonl [--data DIR]\n"
    "       touchstone catalog import FILE.jsonl --out FILE.jsonl\n"
    "       touchstone run-catalog --catalog FILE --sample N --profile FILE [--seed N]\n"
    "                              [--modes eager,compile,train] [--format json|text]\n"
    "                              [--audit-ops] [--weights-dir DIR]\n"
    "       touchstone sweep [--sample N|all] [--profile FILE] [--workers W] [--db URL]\n"
    "                        [--baseline SWEEP] [--json FILE] [--serve]   (see cli/README.md)\n"
    "       touchstone db migrate --db URL\n"
    "       touchstone db prune [--db URL | --state-dir DIR] [--sweep ID]... [--older-than DAYS]\n"
    "                           [--keep N] [--dry-run]   (retention; see cli/README.md)\n"
    "       touchstone serve [--state-dir DIR | --db URL]   (the scheduler over stored sweeps)\n"
    "       touchstone submit --profile FILE [--sample N|all] [--baseline latest|ID] [--wait]\n"
    "                         [--gate RULES] --scheduler HOST:PORT   (a sweep on a running fleet)\n"
    "       touchstone schedule add|list|rm|enable|disable ...   (nightly sweeps; cli/README.md)\n"
    "       touchstone sweeps | summary SWEEP | model ID | ops SWEEP | breaks SWEEP |\n"
    "                  compare BASE HEAD | gate SWEEP --rules FILE | alerts [ack ID --note T] |\n"
    "                  detect SWEEP [--baseline B]\n"
    "                  [--scheduler HOST:PORT] [--token-file FILE] [--format json|text]\n"
    "                  (the query API; see cli/README.md)\n";

constexpr ts::cli::CommandText kMain = {"touchstone", "touchstone", kUsage};

int Usage(const std::string& why) { return ts::cli::Usage(kMain, why); }

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

// Reads and validates a profile up front: a bad profile is bad input (exit 2, named with its
// field), not a model verdict. Returns 0, or the exit code of the error (already printed).
int ReadProfile(const std::string& path, std::string* text, ts::simdevice::ProfileInfo* info) {
  if (!ReadFile(path, text)) return Usage("cannot read profile " + path);
  auto profile = ts::simdevice::ParseProfile(*text);
  if (!profile.ok()) {
    std::fprintf(stderr, "touchstone: profile %s: %s\n", path.c_str(),
                 profile.status().message().c_str());
    return 2;
  }
  *info = *profile;
  return 0;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) parts.push_back(cur);
  return parts;
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
        << s.value("shapes", std::string()) << " " << s.value("dtype", std::string())
        << " ratio " << s.value("ratio", 0.0) << " (" << s.value("calls", 0) << "/"
        << s.value("total_calls", 0) << " calls)";
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
  double timeout_s = 120;
  bool isolate = true;
  std::string weights_dir;  // --weights-dir: the model id's checkpoint when it has one
};

// Returns 0, or the exit code of a usage error (already printed).
int ParseRunModelFlags(const std::vector<std::string>& args, RunModelFlags* f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--config") {
      if (!value(&f->config_path)) return Usage("--config needs a file");
    } else if (a == "--profile") {
      if (!value(&f->profile_path)) return Usage("--profile needs a file");
    } else if (a == "--arch") {
      if (!value(&f->opts.arch)) return Usage("--arch needs a class name");
    } else if (a == "--task") {
      if (!value(&f->opts.task)) return Usage("--task needs a pipeline tag");
    } else if (a == "--modes") {
      if (!value(&v)) return Usage("--modes needs a list");
      f->opts.modes.clear();
      for (const auto& m : Split(v, ',')) {
        if (!ts::engine::KnownModes().count(m)) return Usage("--modes: unknown mode '" + m + "'");
        f->opts.modes.insert(m);
      }
      if (f->opts.modes.empty()) return Usage("--modes: empty");
    } else if (a == "--seed") {
      if (!value(&v)) return Usage("--seed needs a number");
      char* end = nullptr;
      f->opts.seed = std::strtoull(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0') return Usage("--seed: not a number: " + v);
    } else if (a == "--format") {
      if (!value(&f->format) || (f->format != "json" && f->format != "text"))
        return Usage("--format must be json or text");
    } else if (a == "--timeout-s") {
      if (!value(&v)) return Usage("--timeout-s needs seconds");
      char* end = nullptr;
      f->timeout_s = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || f->timeout_s <= 0) {
        return Usage("--timeout-s: bad value " + v);
      }
    } else if (a == "--no-isolate") {
      f->isolate = false;
    } else if (a == "--audit-ops") {
      f->opts.audit_ops = true;
    } else if (a == "--model-id") {
      if (!value(&f->opts.model_id)) return Usage("--model-id needs an id");
    } else if (a == "--weights-dir") {
      if (!value(&f->weights_dir)) return Usage("--weights-dir needs a folder");
    } else {
      return Usage("unknown argument '" + a + "'");
    }
  }
  if (f->config_path.empty()) return Usage("--config is required");
  if (f->profile_path.empty()) return Usage("--profile is required");
  f->opts.checkpoint_dir = ts::zoo::CheckpointDirFor(f->weights_dir, f->opts.model_id);
  return 0;
}

// The load_fail verdict for every requested mode, for a config that is not JSON.
nlohmann::json LoadFailResult(const RunModelFlags& f, const std::string& config_text,
                              const std::string& config_error) {
  ts::engine::ModelResult r;
  r.arch = f.opts.arch;
  r.task = f.opts.task;
  r.config_hash = ts::zoo::ConfigHash(nlohmann::json(config_text));
  for (const auto& mode : ts::engine::KnownModes()) {
    r.modes[mode].status =
        f.opts.modes.count(mode) ? ts::engine::Verdict::kLoadFail : ts::engine::Verdict::kSkipped;
    if (f.opts.modes.count(mode)) r.modes[mode].error = config_error;
  }
  return ts::runner::RecordToJson(ts::runner::ToRecord(r));
}

int RunModelCommand(const std::vector<std::string>& args) {
  RunModelFlags f;
  if (int rc = ParseRunModelFlags(args, &f); rc != 0) return rc;
  std::string config_text, profile_text;
  if (!ReadFile(f.config_path, &config_text)) return Usage("cannot read config " + f.config_path);
  ts::simdevice::ProfileInfo profile;
  if (int rc = ReadProfile(f.profile_path, &profile_text, &profile); rc != 0) return rc;
  nlohmann::json config;
  std::string config_error;
  try {
    config = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::parse_error& e) {
    config_error = "config: not valid JSON (" + std::string(e.what()) + ")";
  }

  const uint64_t seed = f.opts.seed;
  auto setup = [profile_text, seed]() -> std::string {
    ts::engine::ConfigureThreads(1);
    auto r = ts::simdevice::Activate(profile_text, seed);
    return r.ok() ? "" : r.status().ToString();
  };
  nlohmann::json result;
  if (!config_error.empty()) {
    // Nothing to build: the verdict is load_fail for every requested mode.
    result = LoadFailResult(f, config_text, config_error);
  } else if (f.isolate) {
    ts::runner::IsolateOptions iso;
    iso.timeout_s = f.timeout_s;
    iso.child_setup = setup;
    auto record = ts::runner::RunModelIsolated(config, f.opts, iso);
    if (!record.ok()) {
      std::fprintf(stderr, "touchstone: %s\n", record.status().ToString().c_str());
      return 2;
    }
    result = ts::runner::RecordToJson(*record);
  } else {
    std::string err = setup();
    if (!err.empty()) {
      std::fprintf(stderr, "touchstone: %s\n", err.c_str());
      return 2;
    }
    result = ts::runner::RecordToJson(ts::runner::ToRecord(ts::engine::RunModel(config, f.opts)));
  }
  result["profile"] = {{"name", profile.name}, {"sdk_version", profile.sdk_version}};
  result["seed"] = seed;
  if (f.format == "json") {
    std::cout << result.dump() << std::endl;
  } else {
    std::cout << TextOf(result);
  }
  return 0;
}

// Reads run-model JSON lines and prints one row per model plus pass rates per mode.
int SummarizeCommand() {
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

std::string DefaultDataDir() {
  const char* env = std::getenv("TS_DATA_DIR");
  if (env && *env) return env;
  // The binary lives in <repo>/build/cli; the reference data sits beside the repo.
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (auto dir = exe.parent_path(); !ec && !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / ".." / "shared" / "data"))
      return (dir / ".." / "shared" / "data").string();
  }
  return "../shared/data";
}

bool ParseUint(const std::string& v, uint64_t* out) {
  char* end = nullptr;
  *out = std::strtoull(v.c_str(), &end, 10);
  return end != v.c_str() && *end == '\0';
}

int CatalogCommand(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("catalog: expected 'generate' or 'import'");
  if (args[0] == "generate") {
    ts::catalog::GenerateOptions o;
    o.data_dir = DefaultDataDir();
    std::string out_path;
    for (size_t i = 1; i < args.size(); ++i) {
      const bool has = i + 1 < args.size();
      uint64_t n = 0;
      if (args[i] == "--seed" && has) {
        if (!ParseUint(args[++i], &o.seed)) return Usage("--seed: not a number");
      } else if (args[i] == "--count" && has) {
        if (!ParseUint(args[++i], &n) || n == 0) return Usage("--count: must be a positive number");
        o.count = static_cast<int64_t>(n);
      } else if (args[i] == "--out" && has) {
        out_path = args[++i];
      } else if (args[i] == "--data" && has) {
        o.data_dir = args[++i];
      } else {
        return Usage("catalog generate: unknown argument '" + args[i] + "'");
      }
    }
    if (out_path.empty()) return Usage("catalog generate: --out is required");
    std::ofstream out(out_path);
    if (!out) return Usage("cannot write " + out_path);
    auto st = ts::catalog::Generate(o, out);
    if (!st.ok()) {
      std::fprintf(stderr, "touchstone: catalog generate: %s\n", st.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %lld rows (%lld real Hub ids, %zu classes, %zu tasks) to %s\n",
                 static_cast<long long>(st->rows), static_cast<long long>(st->real_ids),
                 st->per_arch.size(), st->per_task.size(), out_path.c_str());
    return 0;
  }
  if (args[0] == "import") {
    if (args.size() != 4 || args[2] != "--out")
      return Usage("catalog import FILE.jsonl --out FILE.jsonl");
    std::ifstream in(args[1]);
    if (!in) return Usage("cannot read " + args[1]);
    std::ofstream out(args[3]);
    if (!out) return Usage("cannot write " + args[3]);
    auto st = ts::catalog::Import(in, out);
    for (const auto& e : st.errors)
      std::fprintf(stderr, "%s: %s (skipped)\n", args[1].c_str(), e.c_str());
    std::fprintf(
        stderr,
        "imported %lld rows (%lld of classes the zoo does not build), skipped %zu bad lines\n",
        static_cast<long long>(st.imported), static_cast<long long>(st.unsupported),
        st.errors.size());
    return 0;
  }
  return Usage("catalog: unknown subcommand '" + args[0] + "'");
}

struct RunCatalogFlags {
  std::string catalog_path, profile_path, format = "text";
  uint64_t sample = 1000, seed = 0;
  std::set<std::string> modes = ts::engine::KnownModes();
  bool audit_ops = false;
  std::string weights_dir;  // --weights-dir: Hub-mirror checkpoints by model id
};

// Returns 0, or the exit code of a usage error (already printed).
int ParseRunCatalogFlags(const std::vector<std::string>& args, RunCatalogFlags* f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has = i + 1 < args.size();
    if (args[i] == "--catalog" && has) {
      f->catalog_path = args[++i];
    } else if (args[i] == "--profile" && has) {
      f->profile_path = args[++i];
    } else if (args[i] == "--sample" && has) {
      if (!ParseUint(args[++i], &f->sample) || f->sample == 0) {
        return Usage("--sample: must be a positive number");
      }
    } else if (args[i] == "--seed" && has) {
      if (!ParseUint(args[++i], &f->seed)) return Usage("--seed: not a number");
    } else if (args[i] == "--weights-dir" && has) {
      f->weights_dir = args[++i];
    } else if (args[i] == "--audit-ops") {
      f->audit_ops = true;
    } else if (args[i] == "--format" && has) {
      f->format = args[++i];
      if (f->format != "json" && f->format != "text") return Usage("--format must be json or text");
    } else if (args[i] == "--modes" && has) {
      f->modes.clear();
      for (const auto& m : Split(args[++i], ',')) {
        if (!ts::engine::KnownModes().count(m)) return Usage("--modes: unknown mode '" + m + "'");
        f->modes.insert(m);
      }
    } else {
      return Usage("run-catalog: unknown argument '" + args[i] + "'");
    }
  }
  if (f->catalog_path.empty() || f->profile_path.empty()) {
    return Usage("run-catalog: --catalog and --profile are required");
  }
  return 0;
}

int RunCatalogCommand(const std::vector<std::string>& args) {
  RunCatalogFlags f;
  if (int rc = ParseRunCatalogFlags(args, &f); rc != 0) return rc;
  std::string profile_text;
  ts::simdevice::ProfileInfo profile;
  if (int rc = ReadProfile(f.profile_path, &profile_text, &profile); rc != 0) return rc;
  // Pass 1: keys only; sample; pass 2: the sampled lines in full (the sweep's sample too).
  int bad = 0;
  auto sample = ts::cli::SampleCatalog(
      f.catalog_path, static_cast<int64_t>(f.sample), f.seed,
      [&](int64_t line_no, const std::string& why) {
        if (bad++ < 10) {
          std::fprintf(stderr, "%s: line %lld: %s (skipped)\n", f.catalog_path.c_str(),
                       static_cast<long long>(line_no), why.c_str());
        }
      });
  if (!sample.ok()) return Usage("cannot read catalog " + f.catalog_path);
  std::vector<ts::catalog::Row> rows;
  (void)ts::cli::ForEachRow(f.catalog_path, sample->lines, [&](ts::catalog::Row r) {
    rows.push_back(std::move(r));
    return absl::OkStatus();
  });
  ts::engine::ConfigureThreads(1);
  auto act = ts::simdevice::Activate(profile_text, f.seed);
  if (!act.ok()) return Usage(act.status().ToString());
  std::vector<std::string> modes;  // the requested ones, in stage order
  for (auto m : ts::proto::AllModes()) {
    if (f.modes.count(ts::proto::ModeName(m))) modes.push_back(ts::proto::ModeName(m));
  }
  // The same arithmetic as the Query service's GetSummary (services/query).
  ts::query::SummaryBuilder summary(touchstone::v1::GROUP_BY_TASK, modes);
  ts::cli::RunFindings suspects;
  std::map<std::string, double> stage_ms;  // each engine stage's time, summed over the models
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < rows.size(); ++i) {
    ts::engine::RunOptions o;
    o.arch = rows[i].arch;
    o.modes = f.modes;
    o.seed = f.seed;
    o.audit_ops = f.audit_ops;
    o.model_id = rows[i].id;
    // The row's own checkpoint, else weights_dir/<id> when it holds one, else seeded weights.
    o.checkpoint_dir = rows[i].checkpoint.empty()
                           ? ts::zoo::CheckpointDirFor(f.weights_dir, rows[i].id)
                           : (std::filesystem::path(f.weights_dir) / rows[i].checkpoint).string();
    const ts::engine::ModelResult result = ts::engine::RunModel(rows[i].config, o);
    for (const auto& [stage, ms] : result.timings_ms) stage_ms[stage] += ms;
    const auto record = ts::runner::ToRecord(result);
    suspects.Add(rows[i].id, record);
    touchstone::v1::ResultRow row;
    row.set_model_id(rows[i].id);
    row.set_task(rows[i].task);
    row.set_arch(rows[i].arch);
    row.set_family(rows[i].family);
    for (const auto& m : record.modes()) {
      (*row.mutable_status())[ts::proto::ModeName(m.mode())] = ts::proto::VerdictName(m.status());
      if (m.has_perf()) (*row.mutable_perf())[ts::proto::ModeName(m.mode())] = m.perf();
    }
    row.set_opcov_ratio(record.opcov_ratio());
    summary.Add(row);
    if (f.format == "text" && isatty(2)) {
      std::fprintf(stderr, "\r%zu/%zu models", i + 1, rows.size());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const touchstone::v1::Summary table = summary.Build();
  if (f.format == "json") {
    auto j = ts::cli::SummaryJson(table);
    j["profile"] = {{"name", act->name}, {"sdk_version", act->sdk_version}};
    j["sample"] = rows.size();
    j["seconds"] = secs;
    for (const auto& [stage, ms] : stage_ms) j["stage_seconds"][stage] = ms / 1000.0;
    j["suspects"] = suspects.Json();
    std::cout << j.dump() << std::endl;
  } else {
    if (isatty(2)) std::fprintf(stderr, "\n");
    std::cout << "profile " << act->name << " " << act->sdk_version << ", " << rows.size()
              << " models sampled from " << sample->rows << " in " << secs << " s\n"
              << ts::query::FormatSummary(table) << suspects.Text();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fprintf(args.empty() ? stderr : stdout, "%s", kUsage);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "run-model") return RunModelCommand(args);
  if (cmd == "zoo") return ts::cli::ZooCommand(args);
  if (cmd == "summarize") return SummarizeCommand();
  if (cmd == "catalog") return CatalogCommand(args);
  if (cmd == "run-catalog") return RunCatalogCommand(args);
  if (cmd == "sweep") return ts::cli::SweepCommand(args, DefaultDataDir());
  if (cmd == "db") return ts::cli::DbCommand(args);
  if (cmd == "serve") return ts::cli::ServeCommand(args);
  if (cmd == "submit") return ts::cli::SubmitCommand(args, DefaultDataDir());
  if (cmd == "schedule") return ts::cli::ScheduleCommand(args);
  if (ts::cli::IsQueryCommand(cmd)) return ts::cli::QueryCommand(cmd, args);
  return Usage("unknown command '" + cmd + "'");
}
