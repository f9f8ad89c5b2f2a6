// The tiny-scaling policy: shrinks a real config.json to a profile that runs in milliseconds on
// one CPU core while keeping the structure that matters for device checks (GQA ratio, sliding
// window that still bites, rotary variant and its parameters, tied embeddings, norm and
// activation kinds, biases, layer-type patterns). The policy table is in README.md.
//
// The result is an HF-style config.json (what BuildModel actually builds, kept in
// ModelSpec::tiny_config) plus a "touchstone_tiny" object with the run profile
// ({"policy": 1, "seq_len": 32, "batch_size": 2}).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/base/status.h"

namespace ts::zoo {

struct TinyProfile {
  static constexpr int kPolicyVersion = 2;
  static constexpr int64_t kHidden = 64;  // target width
  static constexpr int64_t kHeads = 4;    // target query heads (GQA ratio wins if larger)
  static constexpr int64_t kMaxHeads = 8;
  static constexpr int64_t kMinHeadDim = 8;  // kept even (rotary)
  static constexpr int64_t kLayers = 2;         // depth when the real layers differ
  static constexpr int64_t kUniformLayers = 1;  // depth when every real layer is alike
  static constexpr int64_t kVocab = 512;
  static constexpr int64_t kSeqLen = 32;
  static constexpr int64_t kBatch = 2;
  static constexpr int64_t kMaxPositions = 64;      // position tables / rope max_position
  static constexpr int64_t kDynamicPositions = 16;  // dynamic NTK: below kSeqLen so it bites
  static constexpr int64_t kWindow = 8;             // sliding window (kSeqLen / 4)
  static constexpr int64_t kImageSize = 32;
  static constexpr int64_t kPatchSize = 8;
  static constexpr int64_t kMaxLabels = 10;
};

// `family` is the zoo family building the config: "llama", "mistral", "qwen2", "bert", "vit".
// Validates the real config first (errors as config.h).
StatusOr<nlohmann::json> ScaleToTiny(const nlohmann::json& config, const std::string& family);

// ---- Helpers for family scaling functions (each family file scales its own configs).

// round(value * to / from), at least min_value: keeps ratios such as intermediate/hidden.
int64_t ScaleRatio(int64_t value, int64_t from, int64_t to, int64_t min_value);
// Token-id fields (bos/eos/pad/decoder_start...) outside the tiny vocab map to its last id.
void MapTokenId(nlohmann::json& tiny, const char* field, int64_t vocab);
// num_labels capped at TinyProfile::kMaxLabels; id2label/label2id dropped.
void ScaleLabels(nlohmann::json& tiny, int64_t num_labels);
// The tiny attention shape for a real one: keeps the GQA ratio heads / kv_heads, aims at
// kHeads query heads (at most kMaxHeads; then one kv head), never more heads than the real
// model, an even head_dim of at least kMinHeadDim, hidden = heads * head_dim.
struct TinyAttention {
  int64_t heads, kv_heads, head_dim, hidden;
};
TinyAttention TinyAttentionShape(int64_t real_heads, int64_t real_kv_heads);
// Tiny depth: kUniformLayers (one) when every real layer is alike, since a second layer would
// rerun the same ops on the same shapes (about a third of a model's cost, no new coverage);
// kLayers when the real config varies by layer (sliding/full, rotary/NoPE, dense/MoE), so that
// the tiny model keeps one layer of each kind. Never more than the real model has.
int64_t TinyDepth(int64_t real_layers, bool layers_differ);
// True when some layer's entry differs from the first one's.
template <typename T>
bool VariesByLayer(const std::vector<T>& per_layer) {
  for (const auto& v : per_layer)
    if (!(v == per_layer.front())) return true;
  return false;
}
// The BERT/ViT width policy (README.md): heads min(heads, kHeads), hidden kHidden / kHeads per
// head, the intermediate/hidden ratio kept, layers per TinyDepth (alike). Writes hidden_size,
// num_attention_heads, intermediate_size and num_hidden_layers into `tiny`; returns the tiny
// hidden size.
int64_t ScaleEncoderWidth(nlohmann::json& tiny, int64_t heads, int64_t hidden,
                          int64_t intermediate, int64_t layers);
// Records the run profile {"policy", "seq_len", "batch_size": kBatch} as "touchstone_tiny".
void SetTinyRunProfile(nlohmann::json& tiny, int64_t seq_len);

// Sequence length / batch size MakeBatch uses for a (possibly tiny) config: the
// "touchstone_tiny" profile if present, else min(max_position_embeddings, 128) and 2.
int64_t RunSeqLen(const nlohmann::json& config);
int64_t RunBatchSize(const nlohmann::json& config);

}  // namespace ts::zoo
