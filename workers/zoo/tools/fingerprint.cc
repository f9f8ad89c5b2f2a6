// zoo_fingerprint: one line per registered class that pins down what the zoo computes, so that
// a refactor of the zoo can be shown to change nothing (diff the output before and after).
//
//   zoo_fingerprint [SUBSTRING]     classes whose name contains SUBSTRING (default: all)
//
// Per class, built from its example config at the tiny scale: the tiny config, every weight's
// name, shape and value sum (seed 1), the batch (seed 2), the ordered list of ATen ops that
// Forward dispatches (RecordFunction), every output's sum and the training loss, all printed
// with 17 significant digits or hashed (FNV-1a) where a list is long; also the example config and
// the transformers state_dict view (state_dict.h: names, shapes, dtypes, tied copies in order).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "services/common/flags.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace {

std::vector<std::string>* g_ops = nullptr;

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void Add(const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  }
};

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

double Sum(const at::Tensor& t) { return t.defined() ? t.to(at::kDouble).sum().item<double>() : 0; }

std::string Shape(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d : t.sizes()) s += std::to_string(d) + ",";
  return s + "]";
}

std::unique_ptr<at::ObserverContext> OnOp(const at::RecordFunction& fn) {
  if (g_ops != nullptr) g_ops->push_back(fn.name());
  return nullptr;
}

void PrintClass(const ts::zoo::ArchInfo& info) {
  auto cfg = ts::zoo::ExampleConfig(info.arch);
  ts::zoo::BuildOptions opts;
  opts.arch = info.arch;
  auto built = cfg.ok() ? ts::zoo::BuildModel(*cfg, opts) : cfg.status();
  if (!built.ok()) {
    std::printf("%s error %s\n", info.arch.c_str(), built.status().message().c_str());
    return;
  }
  const ts::zoo::Model& model = **built;
  Fnv weights;
  const ts::zoo::WeightMap w = model.InitWeights(1);
  for (const auto& [name, shape] : model.WeightShapes()) {
    weights.Add(name);
    for (int64_t d : shape) weights.Add(std::to_string(d));
    weights.Add(Num(Sum(w.at(name))));
  }
  Fnv batch;
  const ts::zoo::Batch b = model.MakeBatch(2, 0);
  for (const auto* m : {&b.inputs, &b.labels}) {
    for (const auto& [name, t] : *m) {
      batch.Add(name + Shape(t) + Num(Sum(t)));
    }
  }
  std::vector<std::string> ops;
  g_ops = &ops;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OnOp).scopes({at::RecordScope::FUNCTION}));
  const std::vector<at::Tensor> outs = model.Forward(w, b.inputs);
  at::removeCallback(handle);
  g_ops = nullptr;
  Fnv op_seq;
  for (const auto& op : ops) op_seq.Add(op);
  const double loss = model.Loss(w, b).item<double>();
  std::string line = info.arch + " family=" + info.family + " task=" + info.task;
  Fnv tiny;
  tiny.Add(model.spec().tiny_config.dump());
  Fnv example;
  example.Add(cfg->dump());
  Fnv state_dict;
  const std::vector<ts::zoo::StateDictEntry> entries = ts::zoo::StateDictShapes(model);
  for (const ts::zoo::StateDictEntry& e : entries) {
    state_dict.Add(e.name);
    for (int64_t d : e.shape) state_dict.Add(std::to_string(d));
    state_dict.Add(std::string(c10::toString(e.dtype)) + ">" + e.tied_to);
  }
  char hex[300];
  std::snprintf(hex, sizeof(hex),
                " example=%016llx tiny=%016llx weights=%zu:%016llx batch=%016llx ops=%zu:%016llx"
                " state_dict=%zu:%016llx",
                static_cast<unsigned long long>(example.h), static_cast<unsigned long long>(tiny.h),
                model.WeightShapes().size(), static_cast<unsigned long long>(weights.h),
                static_cast<unsigned long long>(batch.h), ops.size(),
                static_cast<unsigned long long>(op_seq.h), entries.size(),
                static_cast<unsigned long long>(state_dict.h));
  line += hex;
  const auto names = model.OutputNames();
  for (size_t i = 0; i < outs.size(); ++i) {
    line += " " + (i < names.size() ? names[i] : std::to_string(i)) + Shape(outs[i]) + "=" +
            Num(Sum(outs[i]));
  }
  line += " loss=" + Num(loss);
  std::printf("%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter;
  ts::flags::Program p("zoo_fingerprint",
                       "prints one line per registered class: what the zoo computes for it");
  p.Positional("SUBSTRING", &filter, "only the classes whose name contains it");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  at::set_num_threads(1);
  for (const auto& info : ts::zoo::SupportedArchitectures()) {
    if (!filter.empty() && info.arch.find(filter) == std::string::npos) continue;
    PrintClass(info);
  }
  return 0;
}
