// The model zoo: builds libtorch models from (architecture class, HF config.json).
//
// A Model is a pure function over a named weight map (HF state_dict names) and named inputs, so
// the engine can move weights and inputs to any device and dtype, run it twice, trace it, and
// train it. Weights are seeded random (no Hub downloads). Configs are scaled to a "tiny" profile
// that keeps structure (see scaling.h).
//
// Thread-safety: a Model is immutable after BuildModel; Forward/Loss may be called concurrently
// on distinct weight maps. Numerics emulation (nn.h) is thread-local.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "workers/base/status.h"

namespace ts::zoo {

using TensorMap = std::map<std::string, at::Tensor>;
using WeightMap = TensorMap;  // HF state_dict name -> tensor

struct ModelSpec {
  std::string arch;            // exact transformers class, e.g. "LlamaForCausalLM"
  std::string task;            // pipeline tag, e.g. "text-generation"
  std::string family;          // model_type, e.g. "llama"
  nlohmann::json config;       // the config as given (real shape)
  nlohmann::json tiny_config;  // after the scaling policy: what is actually built
};

struct Batch {
  TensorMap inputs;  // "input_ids", "attention_mask", "token_type_ids", "pixel_values", ...
  TensorMap labels;  // "labels" (task-specific shape and dtype)
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelSpec& spec() const { return spec_; }

  // Every weight with its shape, in a fixed order (HF state_dict names). Tied weights appear
  // once (under the name HF keeps in its state_dict for the owning module).
  virtual std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const = 0;
  // Names of Forward's outputs, in order; the first is the task output ("logits", ...).
  virtual std::vector<std::string> OutputNames() const = 0;

  // Pure forward. All tensors on one device; float weights/inputs share one dtype (float32 or
  // float64). Traceable by torch::jit::tracer (no data-dependent host control flow unless the
  // architecture itself needs it). Throws c10::Error on device faults (the engine classifies).
  virtual std::vector<at::Tensor> Forward(const WeightMap& weights,
                                          const TensorMap& inputs) const = 0;
  // Scalar training loss for `batch` (task loss against batch.labels), same device/dtype rules.
  virtual at::Tensor Loss(const WeightMap& weights, const Batch& batch) const = 0;

  // Seeded random weights on CPU (deterministic for a seed; independent of dtype: generated in
  // float32 then cast).
  WeightMap InitWeights(uint64_t seed, at::ScalarType dtype = at::kFloat) const;
  // Seeded task-aware inputs and labels on CPU (float inputs in float32). batch_size <= 0: the
  // tiny profile's batch size (2).
  virtual Batch MakeBatch(uint64_t seed, int64_t batch_size) const = 0;

 protected:
  explicit Model(ModelSpec spec) : spec_(std::move(spec)) {}
  // Init std for a weight by name (HF-like: normal(0, initializer_range) for matrices,
  // ones for norm weights, zeros for biases). Subclasses may refine.
  virtual void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const;

 private:
  ModelSpec spec_;
};

struct ArchInfo {
  std::string arch;
  std::string family;
  std::string task;  // default pipeline tag for this head
};

// Every architecture class the zoo can build, sorted by arch.
const std::vector<ArchInfo>& SupportedArchitectures();

// The tiny config BuildModel would build for (config, arch): validates the real config (errors
// name the field); UNIMPLEMENTED for a class the zoo does not build.
StatusOr<nlohmann::json> TinyConfig(const nlohmann::json& config, const std::string& arch);

// A real-shaped example config.json for `arch` (modelled on a public checkpoint of that class);
// NOT_FOUND for a class the zoo does not build.
StatusOr<nlohmann::json> ExampleConfig(const std::string& arch);

struct BuildOptions {
  std::string arch;  // empty: config["architectures"][0]
  std::string task;  // empty: the head's default task
  bool tiny = true;  // apply the tiny scaling policy (scaling.h)
};

// Builds a model. Bad or missing config fields give INVALID_ARGUMENT naming the field
// ("num_attention_heads: must divide hidden_size (4096 % 33 != 0)"); an unknown architecture
// gives UNIMPLEMENTED naming it.
StatusOr<std::unique_ptr<Model>> BuildModel(const nlohmann::json& config, const BuildOptions& opts);

}  // namespace ts::zoo
