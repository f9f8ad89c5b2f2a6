// Test helpers for reference bundles: a full key, and the bytes of a bundle file with no
// tensors (what the torch-free store needs to see). Test-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workers/refs/format.h"
#include "workers/refs/key.h"

namespace ts::refs::testing {

inline BundleKey SampleKey(const std::string& model_id = "org/model") {
  BundleKey k;
  k.model_id = model_id;
  k.config_hash = "0123456789abcdef";
  k.arch = "LlamaForCausalLM";
  k.task = "text-generation";
  k.weights_seed = 7;
  k.batch_seed = 7;
  k.batch_size = 2;
  k.train_steps = 5;
  k.learning_rate = 0.05;
  k.modes = {kForwardPart, kTrainPart};
  k.zoo_version = "00112233aabbccdd";
  k.torch_version = "1.13.0";
  k.device = kCpuDevice;
  k.dtype = "float32";
  k.numerics = "bf16_in_fp32_acc:linear,batched,conv";
  return k;
}

// A safetensors file holding only the bundle metadata of `key` (and `extra` fields in it).
inline std::string HeaderOnlyBundle(const BundleKey& key,
                                    const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json meta = {{"format", kFormatVersion}, {"key", KeyToJson(key)}};
  for (const auto& [k, v] : extra.items()) meta[k] = v;
  std::string header = nlohmann::json{{"__metadata__", {{kMetadataEntry, meta.dump()}}}}.dump();
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header;
}

}  // namespace ts::refs::testing
