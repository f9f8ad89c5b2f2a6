#include "workers/zoo/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo {

WeightMap Model::InitWeights(uint64_t seed, at::ScalarType dtype) const {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  WeightMap weights;
  for (const auto& [name, shape] : WeightShapes()) {
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
    InitWeight(name, t, gen);
    weights.emplace(name, dtype == at::kFloat ? t : t.to(dtype));
  }
  return weights;
}

// Init policy (README.md): norm weights 1; biases N(0, initializer_range); every other tensor
// N(0, max(initializer_range, 1/sqrt(fan_in))) so that at tiny width each branch's output stays
// O(1) instead of vanishing (HF's 0.02 is tuned for width ~1000).
void Model::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  const double range = spec().tiny_config.value("initializer_range", 0.02);
  const bool is_weight = lower.size() >= 7 && lower.compare(lower.size() - 7, 7, ".weight") == 0;
  if (is_weight && lower.find("norm") != std::string::npos) {
    t.fill_(1.0);
    return;
  }
  const bool is_bias = lower.size() >= 4 && lower.compare(lower.size() - 4, 4, "bias") == 0;
  if (is_bias || t.dim() < 2) {
    t.normal_(0.0, range, gen);
    return;
  }
  int64_t fan_in = t.size(-1);
  if (t.dim() == 2) fan_in = t.size(1);
  if (t.dim() == 4) fan_in = t.numel() / t.size(0);
  const double std =
      std::max(range, 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1))));
  t.normal_(0.0, std, gen);
}

const std::vector<ArchInfo>& SupportedArchitectures() {
  static const std::vector<ArchInfo> kArchs = [] {
    std::vector<ArchInfo> v;
    for (const auto& e : internal::Registry()) v.push_back(e.info);
    return v;
  }();
  return kArchs;
}

StatusOr<nlohmann::json> TinyConfig(const nlohmann::json& config, const std::string& arch) {
  if (const internal::ArchEntry* e = internal::FindArch(arch)) return e->scale(config);
  return UnimplementedError("architecture '" + arch + "' is not implemented by the zoo");
}

StatusOr<nlohmann::json> ExampleConfig(const std::string& arch) {
  if (const internal::ArchEntry* e = internal::FindArch(arch)) return e->example_config;
  return NotFoundError("architecture '" + arch + "' is not built by the zoo");
}

namespace {

StatusOr<std::string> ArchFromConfig(const nlohmann::json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  auto it = config.find("architectures");
  if (it == config.end() || it->is_null()) return InvalidArgumentError("architectures: missing");
  if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
    return InvalidArgumentError("architectures: expected non-empty array of strings");
  }
  return (*it)[0].get<std::string>();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> BuildModel(const nlohmann::json& config,
                                            const BuildOptions& opts) {
  std::string arch = opts.arch;
  if (arch.empty()) {
    TS_ASSIGN_OR_RETURN(arch, ArchFromConfig(config));
  }
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  const internal::ArchEntry* entry = internal::FindArch(arch);
  if (entry == nullptr) {
    return UnimplementedError("architecture '" + arch + "' is not implemented by the zoo");
  }
  const ArchInfo& info = entry->info;
  if (!opts.task.empty() && opts.task != info.task) {
    return InvalidArgumentError("task: '" + opts.task + "' is not supported by " + arch +
                                " (its head serves '" + info.task + "')");
  }
  ModelSpec spec;
  spec.arch = arch;
  spec.task = info.task;
  spec.family = info.family;
  auto mt = config.find("model_type");
  if (mt != config.end() && mt->is_string()) spec.family = mt->get<std::string>();
  spec.config = config;
  if (opts.tiny) {
    TS_ASSIGN_OR_RETURN(spec.tiny_config, entry->scale(config));
  } else {
    spec.tiny_config = config;
  }
  return entry->build(std::move(spec));
}

namespace internal {

const at::Tensor& GetWeight(const WeightMap& weights, const std::string& name) {
  auto it = weights.find(name);
  TORCH_CHECK(it != weights.end(), "zoo: missing weight '", name, "'");
  return it->second;
}

at::Tensor GetOptionalWeight(const WeightMap& weights, const std::string& name) {
  if (name.empty()) return at::Tensor();
  return GetWeight(weights, name);
}

at::Tensor GetOptionalInput(const TensorMap& inputs, const std::string& name) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return at::Tensor();
  return it->second;
}

const at::Tensor& GetInput(const TensorMap& inputs, const std::string& name) {
  auto it = inputs.find(name);
  TORCH_CHECK(it != inputs.end(), "zoo: missing input '", name, "'");
  return it->second;
}

at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& labels) {
  return at::cross_entropy_loss(logits, labels, /*weight=*/{}, at::Reduction::Mean,
                                /*ignore_index=*/-100);
}

at::Tensor MakeAttentionMask(int64_t batch_size, int64_t seq_len) {
  at::Tensor mask = at::ones({batch_size, seq_len}, at::TensorOptions().dtype(at::kLong));
  if (batch_size >= 2) {
    const int64_t pad = seq_len / 4;
    if (pad > 0) mask[1].narrow(0, seq_len - pad, pad).fill_(0);
  }
  return mask;
}

}  // namespace internal
}  // namespace ts::zoo
