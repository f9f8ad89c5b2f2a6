// The key of a reference bundle: everything that changes what a model run's references hold
// (README.md, "The key"). Two runs with equal keys have bit-identical references; a bundle is
// used only by a run whose key equals the key written inside it.
//
// Torch-free: the worker, the scheduler's clients and the store use it without libtorch.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "workers/base/status.h"

namespace ts::refs {

// The reference parts a run needs: "forward" (eager and compile judge outputs against it),
// "train" (the loss curves and the first step's gradients).
inline constexpr const char* kForwardPart = "forward";
inline constexpr const char* kTrainPart = "train";

// The reference device of the engine's own references.
inline constexpr const char* kCpuDevice = "cpu";

struct BundleKey {
  // The model run: the catalog row and the inputs of its references.
  std::string model_id;     // "org/name"; empty for a run without one (run-model)
  std::string config_hash;  // zoo::ConfigHash of the config.json
  std::string arch, task;   // as built (an --arch override builds another model)
  uint64_t weights_seed = 0;
  uint64_t batch_seed = 0;
  int64_t batch_size = 0;
  int train_steps = 0;
  double learning_rate = 0;
  std::vector<std::string> modes;  // reference parts, sorted: "forward", "train"
  // Who computed them, and how.
  std::string zoo_version;    // ZooVersion(): a digest of the sources that build the model
  std::string torch_version;  // "1.13.0"
  std::string device;         // "cpu", "cuda:NVIDIA H100 80GB HBM3"
  std::string dtype;          // the reference's own dtype: "float32", "bfloat16"
  // The device's declared numerics that the "declared" references emulate: "fp32" (none) or
  // "bf16_in_fp32_acc:linear,batched,conv" (bf16 matmul inputs on those op classes).
  std::string numerics;

  friend bool operator==(const BundleKey&, const BundleKey&) = default;
};

// The key as a JSON object (every field, sorted keys): its canonical form.
nlohmann::json KeyToJson(const BundleKey& key);
// The key a JSON object holds; INVALID_ARGUMENT naming the field that is missing or mistyped.
StatusOr<BundleKey> KeyFromJson(const nlohmann::json& j);

// SHA-256 (hex) of the canonical JSON: the name of the key in a store.
std::string KeyDigest(const BundleKey& key);
// SHA-256 (hex) of the model-run fields alone (model id ... learning rate): bundles of one run
// computed on other devices, dtypes or builds share it (a store groups them by it).
std::string RunDigest(const BundleKey& key);

// The key field that differs between `a` and `b` ("zoo_version"), or "" when they are equal.
std::string FirstDifference(const BundleKey& a, const BundleKey& b);

// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);
// Whether `s` is 64 lowercase hex digits (a digest as the store names files).
bool IsDigest(std::string_view s);

}  // namespace ts::refs
