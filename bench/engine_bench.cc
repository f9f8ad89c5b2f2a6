// bench/engine: per-model milliseconds by stage for each zoo family at tiny scale, and the
// harness overhead relative to the pure compute of the same forward/backward calls.
//
//   build/bench/engine_bench [--reps N] [--profile FILE]
//
// One core (ConfigureThreads(1)), one process, warm (the first run of each family is discarded:
// the runner child is long-lived, so steady state is what a sweep sees). "Pure compute" times,
// directly and with the same tensors, the calls RunModel makes: CPU forward x2, fp64 forward,
// declared-numerics forward, device eager forward, the compiled graph's run, and the three
// K-step training runs (reference, declared numerics, device). Overhead = total / pure - 1.
// Prints a Markdown table (paste into bench/RESULTS.md with the command line).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "services/common/flags.h"
#include "workers/engine/compiler.h"
#include "workers/engine/engine.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Times the pure model compute RunModel performs for this model.
double PureComputeMs(const json& config, const std::string& arch,
                     const ts::simdevice::ProfileInfo& profile) {
  ts::zoo::BuildOptions bo;
  bo.arch = arch;
  auto built = ts::zoo::BuildModel(config, bo);
  const auto& model = **built;
  auto w = model.InitWeights(0);
  auto batch = model.MakeBatch(0, 2);
  const auto dev = ts::simdevice::SimDevice();
  // Compiled graph prepared outside the timed region (tracing/partitioning is harness work).
  auto [flat, fn] = ts::engine::Flatten(model, w, batch.inputs);
  auto graph = ts::engine::TraceToGraph(fn, flat);
  auto compiled = ts::engine::CompiledGraph::Compile(*graph, profile, flat);
  auto w64 = ts::engine::ToDevice(w, at::kCPU, at::kDouble);
  auto in64 = ts::engine::ToDevice(batch.inputs, at::kCPU, at::kDouble);
  auto wd = ts::engine::ToDevice(w, dev);
  auto ind = ts::engine::ToDevice(batch.inputs, dev);

  const auto t0 = Clock::now();
  {
    torch::NoGradGuard ng;
    model.Forward(w, batch.inputs);
    model.Forward(w, batch.inputs);
    model.Forward(w64, in64);
    {
      ts::zoo::ScopedBf16MatmulEmulation emulate;
      model.Forward(w, batch.inputs);
    }
    model.Forward(wd, ind);
    if (compiled.ok()) (*compiled)->Run(flat);
  }
  ts::engine::TrainLosses(model, w, batch, at::kCPU, 5, 0.05);
  {
    ts::zoo::ScopedBf16MatmulEmulation emulate;
    ts::engine::TrainLosses(model, w, batch, at::kCPU, 5, 0.05);
  }
  ts::engine::TrainLosses(model, w, batch, dev, 5, 0.05);
  return Ms(t0);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  std::string profile_path = std::string(TS_PROFILE_DIR) + "/sim-2.0.json";
  ts::flags::Program program(
      "engine_bench",
      "per-model ms by stage for each zoo family at tiny scale, and the harness "
      "overhead over the pure compute");
  program.Option("--reps", &reps, "N", "timed runs of each family after a warm-up").Min(1);
  program.Option("--profile", &profile_path, "FILE", "the device profile (its defects dropped)")
      .File();
  if (auto rc = program.Parse(argc, argv)) return *rc;
  ts::engine::ConfigureThreads(1);
  // Benchmark the defect-free baseline, so every stage runs to completion.
  json pj = json::parse(Read(profile_path));
  pj.erase("defects");
  auto profile = ts::simdevice::Activate(pj.dump(), 0);
  if (!profile.ok()) {
    std::fprintf(stderr, "%s\n", profile.status().ToString().c_str());
    return 2;
  }
  const std::string data = std::string(TS_SOURCE_DIR) + "/../shared/data/hf-configs/";
  json vit = {{"architectures", {"ViTForImageClassification"}}, {"model_type", "vit"},
              {"hidden_size", 768}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
              {"intermediate_size", 3072}, {"hidden_act", "gelu"}, {"image_size", 224},
              {"patch_size", 16}, {"num_channels", 3}, {"num_labels", 1000}};
  struct Family {
    std::string name;
    json config;
    std::string arch;
  };
  std::vector<Family> families = {
      {"llama (Llama-2-7b)", json::parse(Read(data + "llama2_7b.json")), ""},
      {"llama (Llama-3.2-3B, rope llama3)", json::parse(Read(data + "llama3_2_3b.json")), ""},
      {"mistral (7B, sliding window)", json::parse(Read(data + "mistral_7b.json")), ""},
      {"qwen2 (1.5B)", json::parse(Read(data + "qwen2_1_5b.json")), ""},
      {"bert (BertModel)", json::parse(Read(data + "snowflake-arctic-embed-m.json")), ""},
      {"bert (SequenceClassification)", json::parse(Read(data + "snowflake-arctic-embed-m.json")),
       "BertForSequenceClassification"},
      {"bert (MaskedLM)", json::parse(Read(data + "snowflake-arctic-embed-m.json")), "BertForMaskedLM"},
      {"vit (ImageClassification)", vit, ""},
  };
  std::printf("| family | build | reference | eager | compile | train | total | pure compute | overhead | statuses |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<double> all_totals;
  double sum_total = 0, sum_pure = 0;
  for (const auto& f : families) {
    ts::engine::RunOptions o;
    o.arch = f.arch;
    (void)ts::engine::RunModel(f.config, o);  // warm-up
    (void)PureComputeMs(f.config, f.arch, *profile);
    std::map<std::string, std::vector<double>> stages;
    std::vector<double> pure;
    std::string statuses;
    for (int r = 0; r < reps; ++r) {
      auto res = ts::engine::RunModel(f.config, o);
      for (const auto& [k, v] : res.timings_ms) stages[k].push_back(v);
      pure.push_back(PureComputeMs(f.config, f.arch, *profile));
      if (r == 0) {
        for (const auto& [m, mr] : res.modes) statuses += m + "=" + ts::engine::VerdictName(mr.status) + " ";
      }
    }
    const double total = Median(stages["total"]), p = Median(pure);
    all_totals.insert(all_totals.end(), stages["total"].begin(), stages["total"].end());
    sum_total += total;
    sum_pure += p;
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | **%.1f** | %.1f | %+.0f%% | %s|\n",
                f.name.c_str(), Median(stages["build"]), Median(stages["reference"]),
                Median(stages["eager"]), Median(stages["compile"]), Median(stages["train"]), total, p,
                100 * (total / p - 1), statuses.c_str());
  }
  std::printf("\nMedian per model over all families and reps: **%.1f ms** (target <= 70 ms); "
              "harness overhead over pure compute (sum of medians): %+.0f%%.\n",
              Median(all_totals), 100 * (sum_total / sum_pure - 1));
  std::printf("Projected 104,909 models at this median on 2 cores: %.0f min.\n",
              104909 * Median(all_totals) / 1000 / 60 / 2);
  return 0;
}
