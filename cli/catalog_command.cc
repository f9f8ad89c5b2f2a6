// `touchstone catalog generate | import` (the model catalog) and `touchstone run-catalog` (a
// stratified sample of it in this process: the per-task table, then what its non-pass modes
// and op-by-op replays found). commands.h.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/profile_file.h"
#include "cli/query_text.h"
#include "cli/run_findings.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "proto/names.h"
#include "services/query/summary_builder.h"
#include "services/query/text_tables.h"
#include "workers/catalog/catalog.h"
#include "workers/engine/engine.h"
#include "workers/runner/record.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/safetensors.h"

namespace ts::cli {
namespace {

struct GenerateFlags {
  catalog::GenerateOptions options;
  std::string out_path;
};

int Generate(const GenerateFlags& f) {
  catalog::GenerateOptions o = f.options;
  if (o.data_dir.empty()) o.data_dir = DefaultDataDir();
  std::ofstream out(f.out_path);
  if (!out) return Usage("--out: cannot write " + f.out_path);
  auto st = catalog::Generate(o, out);
  if (!st.ok()) return Fail(st.status().ToString());
  std::fprintf(stderr, "wrote %lld rows (%lld real Hub ids, %zu classes, %zu tasks) to %s\n",
               static_cast<long long>(st->rows), static_cast<long long>(st->real_ids),
               st->per_arch.size(), st->per_task.size(), f.out_path.c_str());
  return 0;
}

struct ImportFlags {
  std::string in_path, out_path;
};

int Import(const ImportFlags& f) {
  std::ifstream in(f.in_path);
  if (!in) return Usage("cannot read " + f.in_path);
  std::ofstream out(f.out_path);
  if (!out) return Usage("--out: cannot write " + f.out_path);
  auto st = catalog::Import(in, out);
  for (const auto& e : st.errors) {
    std::fprintf(stderr, "%s: %s (skipped)\n", f.in_path.c_str(), e.c_str());
  }
  std::fprintf(
      stderr,
      "imported %lld rows (%lld of classes the zoo does not build), skipped %zu bad lines\n",
      static_cast<long long>(st.imported), static_cast<long long>(st.unsupported),
      st.errors.size());
  return 0;
}

struct RunCatalogFlags {
  std::string catalog_path, profile_path, format = "text";
  int64_t sample = 1000;
  uint64_t seed = 0;
  std::vector<std::string> modes;  // empty: every mode
  bool audit_ops = false;
  std::string weights_dir;  // --weights-dir: Hub-mirror checkpoints by model id
};

// The sampled rows, in full (the sweep's sample too): pass 1 reads the keys and samples, pass 2
// the sampled lines. `population`: the rows the sample was drawn from. Returns 0 or the exit
// code (printed); the first 10 bad lines are named on stderr.
int LoadSample(const RunCatalogFlags& f, std::vector<catalog::Row>* rows, int64_t* population) {
  int bad = 0;
  auto sample =
      SampleCatalog(f.catalog_path, f.sample, f.seed, [&](int64_t line_no, const std::string& why) {
        if (bad++ < 10) {
          std::fprintf(stderr, "%s: line %lld: %s (skipped)\n", f.catalog_path.c_str(),
                       static_cast<long long>(line_no), why.c_str());
        }
      });
  if (!sample.ok()) return Usage("cannot read catalog " + f.catalog_path);
  *population = sample->rows;
  (void)ForEachRow(f.catalog_path, sample->lines, [&](catalog::Row r) {
    rows->push_back(std::move(r));
    return absl::OkStatus();
  });
  return 0;
}

// A row's run: its class and id, the requested modes, and its weights: the row's own
// checkpoint, else weights_dir/<id> when it holds one, else seeded.
engine::RunOptions RowOptions(const RunCatalogFlags& f, const std::set<std::string>& modes,
                              const catalog::Row& row) {
  engine::RunOptions o;
  o.arch = row.arch;
  o.modes = modes;
  o.seed = f.seed;
  o.audit_ops = f.audit_ops;
  o.model_id = row.id;
  o.checkpoint_dir = row.checkpoint.empty()
                         ? zoo::CheckpointDirFor(f.weights_dir, row.id)
                         : (std::filesystem::path(f.weights_dir) / row.checkpoint).string();
  return o;
}

// What a run of the sample adds up to.
struct CatalogRun {
  explicit CatalogRun(std::vector<std::string> modes)
      : summary(touchstone::v1::GROUP_BY_TASK, std::move(modes)) {}
  query::SummaryBuilder summary;  // the same arithmetic as the Query service's GetSummary
  RunFindings findings;
  std::map<std::string, double> stage_ms;  // each engine stage's time, summed over the models
  double seconds = 0;
};

void RunRows(const RunCatalogFlags& f, const std::set<std::string>& modes,
             const std::vector<catalog::Row>& rows, CatalogRun* run) {
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < rows.size(); ++i) {
    const engine::ModelResult result =
        engine::RunModel(rows[i].config, RowOptions(f, modes, rows[i]));
    for (const auto& [stage, ms] : result.timings_ms) run->stage_ms[stage] += ms;
    const auto record = runner::ToRecord(result);
    run->findings.Add(rows[i].id, record);
    touchstone::v1::ResultRow row;
    row.set_model_id(rows[i].id);
    row.set_task(rows[i].task);
    row.set_arch(rows[i].arch);
    row.set_family(rows[i].family);
    for (const auto& m : record.modes()) {
      (*row.mutable_status())[proto::ModeName(m.mode())] = proto::VerdictName(m.status());
      if (m.has_perf()) (*row.mutable_perf())[proto::ModeName(m.mode())] = m.perf();
    }
    row.set_opcov_ratio(record.opcov_ratio());
    run->summary.Add(row);
    if (f.format == "text" && isatty(2)) {
      std::fprintf(stderr, "\r%zu/%zu models", i + 1, rows.size());
    }
  }
  run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void PrintRun(const RunCatalogFlags& f, const simdevice::ProfileInfo& profile, size_t sampled,
              int64_t population, CatalogRun& run) {
  const touchstone::v1::Summary table = run.summary.Build();
  if (f.format == "json") {
    auto j = SummaryJson(table);
    j["profile"] = {{"name", profile.name}, {"sdk_version", profile.sdk_version}};
    j["sample"] = sampled;
    j["seconds"] = run.seconds;
    for (const auto& [stage, ms] : run.stage_ms) j["stage_seconds"][stage] = ms / 1000.0;
    j["suspects"] = run.findings.Json();
    std::cout << j.dump() << std::endl;
    return;
  }
  if (isatty(2)) std::fprintf(stderr, "\n");
  std::cout << "profile " << profile.name << " " << profile.sdk_version << ", " << sampled
            << " models sampled from " << population << " in " << run.seconds << " s\n"
            << query::FormatSummary(table) << run.findings.Text();
}

int RunCatalog(const RunCatalogFlags& f) {
  ProfileFile profile;
  if (int rc = ReadProfileFile(f.profile_path, &profile); rc != 0) return rc;
  std::vector<catalog::Row> rows;
  int64_t population = 0;
  if (int rc = LoadSample(f, &rows, &population); rc != 0) return rc;
  engine::ConfigureThreads(1);
  auto act = simdevice::Activate(profile.text, f.seed);
  if (!act.ok()) return Usage(act.status().ToString());
  std::set<std::string> modes = engine::KnownModes();
  if (!f.modes.empty()) modes = {f.modes.begin(), f.modes.end()};
  std::vector<std::string> ordered;  // the requested ones, in stage order
  for (auto m : proto::AllModes()) {
    if (modes.count(proto::ModeName(m))) ordered.push_back(proto::ModeName(m));
  }
  CatalogRun run(ordered);
  RunRows(f, modes, rows, &run);
  PrintRun(f, *act, rows.size(), population, run);
  return 0;
}

}  // namespace

void AddCatalogCommands(flags::Command& root) {
  flags::Command& catalog = root.Group("catalog", "the model catalog (JSON lines)");
  {
    auto f = std::make_shared<GenerateFlags>();
    flags::Command& c =
        catalog.Add("generate", "the catalog from the reference data (HF configs, task tables)",
                    [f] { return Generate(*f); });
    c.Option("--seed", &f->options.seed, "N", "the generator's seed");
    c.Option("--count", &f->options.count, "N", "rows").Min(1);
    c.Option("--out", &f->out_path, "FILE", "the catalog to write").Required().File();
    c.Option("--data", &f->options.data_dir, "DIR", "the reference data")
        .Dir()
        .Default("$TS_DATA_DIR, else ../shared/data beside the repo");
  }
  {
    auto f = std::make_shared<ImportFlags>();
    flags::Command& c = catalog.Add("import", "rows of another catalog, checked, into ours",
                                    [f] { return Import(*f); });
    c.Positional("FILE", &f->in_path, "the catalog to import (JSON lines)").Required().File();
    c.Option("--out", &f->out_path, "FILE", "the catalog to write").Required().File();
  }
  auto f = std::make_shared<RunCatalogFlags>();
  flags::Command& c =
      root.Add("run-catalog",
               "a stratified sample of the catalog in this process: the per-task table, then its "
               "non-pass modes and what the op-by-op replays found",
               [f] { return RunCatalog(*f); });
  c.Option("--catalog", &f->catalog_path, "FILE", "the catalog").Required().File();
  c.Option("--sample", &f->sample, "N", "models, stratified by task and class").Min(1);
  c.Option("--profile", &f->profile_path, "FILE", "the device profile").Required().File();
  c.Option("--seed", &f->seed, "N", "the sample's and the models' seed");
  c.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices(ModeNames());
  c.Option("--format", &f->format, "json|text", "the table as text, or JSON with stage_seconds")
      .Choices({"json", "text"});
  c.Flag("--audit-ops", &f->audit_ops, "replay passing modes op by op too (suspects)");
  c.Option("--weights-dir", &f->weights_dir, "DIR",
           "a row's checkpoint (relative to DIR), else DIR/<id>/ when it holds one, replaces "
           "its seeded weights")
      .Dir();
}

}  // namespace ts::cli
