#include "workers/engine/engine.h"

#include <dlfcn.h>

#include <chrono>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "workers/engine/stages_internal.h"
#include "workers/zoo/model.h"

namespace ts::engine {
namespace {

using Clock = std::chrono::steady_clock;
using TensorList = std::vector<at::Tensor>;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

zoo::TensorMap ToDevice(const zoo::TensorMap& m, const c10::Device& d, at::ScalarType float_type) {
  zoo::TensorMap out;
  for (const auto& [k, v] : m) {
    at::Tensor t = at::isFloatingType(v.scalar_type()) ? v.to(d, float_type) : v.to(d);
    out.emplace(k, t);
  }
  return out;
}

namespace {

// A private copy of `init` on `device` (dtype `float_type` for float tensors, else kept) that
// records gradients. copy=true: on the CPU, to() would alias `init` and updates would corrupt it.
zoo::WeightMap TrainableCopy(const zoo::WeightMap& init, const c10::Device& device,
                             std::optional<at::ScalarType> float_type = std::nullopt) {
  zoo::WeightMap w;
  for (const auto& [k, v] : init) {
    const at::ScalarType type =
        float_type && at::isFloatingType(v.scalar_type()) ? *float_type : v.scalar_type();
    w.emplace(k, v.to(device, type, /*non_blocking=*/false, /*copy=*/true)
                     .detach()
                     .requires_grad_(true));
  }
  return w;
}

// The gradients of `w` after a backward pass, on the CPU.
zoo::WeightMap GradsOf(const zoo::WeightMap& w) {
  zoo::WeightMap grads;
  for (const auto& [k, p] : w) {
    if (p.grad().defined()) grads.emplace(k, p.grad().detach().to(at::kCPU, /*non_blocking=*/false,
                                                                  /*copy=*/true));
  }
  return grads;
}

}  // namespace

namespace {

// FNV-1a, 64 bit: a stable hash of the model id (std::hash is not specified to be).
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

zoo::WeightMap ModelWeights(const zoo::Model& model, const RunOptions& opts) {
  zoo::WeightMap w = model.InitWeights(opts.seed);
  if (opts.model_id.empty()) return w;
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(Fnv1a(opts.model_id) ^ (opts.seed * 0x9E3779B97F4A7C15ull));
  for (auto& [name, t] : w) {  // by name: the draw order is fixed
    if (!at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    double spread = t.numel() > 1 ? t.std().item<double>() : 0.0;
    if (spread == 0) spread = t.abs().mean().item<double>();
    if (spread == 0) continue;
    t.add_(at::randn(t.sizes(), gen, t.options()), kFineTuneScale * spread);
  }
  return w;
}

std::vector<double> TrainLosses(const zoo::Model& model, const zoo::WeightMap& init,
                                const zoo::Batch& batch, const c10::Device& device, int steps,
                                double lr, zoo::WeightMap* first_grads,
                                const std::function<void(int step)>& on_step) {
  zoo::WeightMap w = TrainableCopy(init, device);
  zoo::Batch b{ToDevice(batch.inputs, device), ToDevice(batch.labels, device)};
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    if (on_step) on_step(s);
    at::Tensor loss = model.Loss(w, b);
    losses.push_back(loss.detach().to(at::kCPU).item<double>());
    loss.backward();
    if (s == 0 && first_grads != nullptr) *first_grads = GradsOf(w);
    torch::NoGradGuard no_grad;
    for (auto& [k, p] : w) {
      if (!p.grad().defined()) continue;
      p.add_(p.grad(), -lr);
      p.mutable_grad().reset();
    }
  }
  if (on_step) on_step(steps);
  return losses;
}

zoo::WeightMap StepGradients(const zoo::Model& model, const zoo::WeightMap& weights,
                             const zoo::Batch& batch, const c10::Device& device,
                             at::ScalarType float_type) {
  zoo::WeightMap w = TrainableCopy(weights, device, float_type);
  zoo::Batch b{ToDevice(batch.inputs, device, float_type),
               ToDevice(batch.labels, device, float_type)};
  model.Loss(w, b).backward();
  return GradsOf(w);
}

FlatForward Flatten(const zoo::Model& model, const zoo::WeightMap& weights,
                    const zoo::TensorMap& inputs) {
  FlatForward f;
  std::vector<std::string> weight_names, input_names;
  for (const auto& [k, v] : weights) {
    weight_names.push_back(k);
    f.flat.push_back(v);
  }
  for (const auto& [k, v] : inputs) {
    input_names.push_back(k);
    f.flat.push_back(v);
  }
  f.fn = [&model, weight_names, input_names](const TensorList& xs) {
    zoo::WeightMap w;
    zoo::TensorMap in;
    for (size_t i = 0; i < weight_names.size(); ++i) w.emplace(weight_names[i], xs[i]);
    for (size_t i = 0; i < input_names.size(); ++i) {
      in.emplace(input_names[i], xs[weight_names.size() + i]);
    }
    return model.Forward(w, in);
  };
  return f;
}

const std::set<std::string>& KnownModes() {
  static const std::set<std::string> kModes = {"eager", "compile", "train"};
  return kModes;
}

void ConfigureThreads(int n) {
  at::set_num_threads(n);
  // libtorch calls the system BLAS; OpenBLAS (scripts/setup installs it) keeps its own pool.
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(n);
  }
}

ModelResult RunModel(const nlohmann::json& config, const RunOptions& opts) {
  const auto t_total = Clock::now();
  internal::StageContext ctx(config, opts);
  for (const internal::Stage& stage : internal::Stages()) {
    if (stage.mode != nullptr && !opts.modes.count(stage.mode)) continue;
    if (opts.on_stage) opts.on_stage(stage.name);
    if (stage.run(ctx) == internal::StageEnd::kStopModel) break;
  }
  internal::FinishReferences(ctx);
  internal::SummarizeCoverage(ctx);
  ctx.result.timings_ms["total"] = MsSince(t_total);
  return std::move(ctx.result);
}

}  // namespace ts::engine
