// Family builders behind BuildModel (model.cc), and helpers shared by the families.
// Private to the zoo.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workers/zoo/model.h"

namespace ts::zoo::internal {

// One architecture class the zoo builds. `scale` turns the real config into the tiny one
// (validating it first; errors name the field); `build` builds from spec.tiny_config.
struct ArchEntry {
  ArchInfo info;  // exact transformers class, family (model_type), default pipeline tag
  // A real-shaped config.json for this class, modelled on a public checkpoint (sizes, heads,
  // vocab, rope/norm settings as that checkpoint has them). Tests build every class from it;
  // the catalog varies it.
  nlohmann::json example_config;
  std::function<StatusOr<nlohmann::json>(const nlohmann::json& config)> scale;
  std::function<StatusOr<std::unique_ptr<Model>>(ModelSpec spec)> build;
};

// `config` with architectures = [arch] (one example config per class of a family).
inline nlohmann::json WithArchitecture(nlohmann::json config, const std::string& arch) {
  config["architectures"] = {arch};
  return config;
}

// The registry is the concatenation of these lists (registry.cc), one per family file, so
// families can be added without touching each other's files.
std::vector<ArchEntry> VitArchs();          // families/vit.cc
// Further vision and multimodal families (families/<model_type>.cc).
std::vector<ArchEntry> DeitArchs();
std::vector<ArchEntry> SwinArchs();
std::vector<ArchEntry> ConvNextArchs();
std::vector<ArchEntry> ResNetArchs();
std::vector<ArchEntry> MobileNetV2Archs();
std::vector<ArchEntry> EfficientNetArchs();
std::vector<ArchEntry> ClipArchs();

// Every registered architecture, sorted by class name (built once).
const std::vector<ArchEntry>& Registry();

// The weight `name`; throws c10::Error naming it when absent.
const at::Tensor& GetWeight(const WeightMap& weights, const std::string& name);
// The weight `name`, or an undefined tensor when `name` is empty.
at::Tensor GetOptionalWeight(const WeightMap& weights, const std::string& name);
// The input `name`, or an undefined tensor when absent.
at::Tensor GetOptionalInput(const TensorMap& inputs, const std::string& name);
// The input `name`; throws c10::Error naming it when absent.
const at::Tensor& GetInput(const TensorMap& inputs, const std::string& name);

// HF cross entropy: logits [N, C], labels [N] int64, ignore_index -100, mean.
at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& labels);

// Right padding used by every text batch: row 1 (if any) has its last seq_len / 4 tokens padded.
at::Tensor MakeAttentionMask(int64_t batch_size, int64_t seq_len);

}  // namespace ts::zoo::internal
