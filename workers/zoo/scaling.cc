#include "workers/zoo/scaling.h"

#include <algorithm>
#include <cmath>

#include "workers/zoo/config.h"

namespace ts::zoo {

using P = TinyProfile;

int64_t ScaleRatio(int64_t value, int64_t from, int64_t to, int64_t min_value) {
  double scaled = static_cast<double>(value) * static_cast<double>(to) / static_cast<double>(from);
  return std::max<int64_t>(min_value, std::llround(scaled));
}

// Token ids outside the tiny vocabulary are mapped to its last id.
void MapTokenId(nlohmann::json& j, const char* field, int64_t vocab) {
  auto it = j.find(field);
  if (it == j.end()) return;
  auto map_one = [vocab](nlohmann::json& v) {
    if (v.is_number_integer() && (v.get<int64_t>() >= vocab || v.get<int64_t>() < 0)) v = vocab - 1;
  };
  if (it->is_array()) {
    for (auto& v : *it) map_one(v);
  } else {
    map_one(*it);
  }
}

void ScaleLabels(nlohmann::json& t, int64_t num_labels) {
  int64_t n = std::min<int64_t>(num_labels, P::kMaxLabels);
  t.erase("id2label");
  t.erase("label2id");
  t["num_labels"] = n;
}

TinyAttention TinyAttentionShape(int64_t real_heads, int64_t real_kv_heads) {
  const int64_t ratio = real_heads / real_kv_heads;
  int64_t kv = std::max<int64_t>(1, P::kHeads / ratio);
  int64_t heads = kv * ratio;
  if (heads > P::kMaxHeads) {
    heads = P::kMaxHeads;
    kv = 1;
  }
  heads = std::min(heads, real_heads);
  kv = std::min(kv, heads);
  const int64_t head_dim = std::max<int64_t>(P::kMinHeadDim, (P::kHidden / heads) / 2 * 2);
  return {heads, kv, head_dim, heads * head_dim};
}

int64_t TinyDepth(int64_t real_layers, bool layers_differ) {
  return std::min(real_layers, layers_differ ? P::kLayers : P::kUniformLayers);
}

int64_t ScaleEncoderWidth(nlohmann::json& tiny, int64_t heads, int64_t hidden,
                          int64_t intermediate, int64_t layers) {
  const int64_t tiny_heads = std::min(heads, P::kHeads);
  const int64_t tiny_hidden = tiny_heads * (P::kHidden / P::kHeads);
  tiny["hidden_size"] = tiny_hidden;
  tiny["num_attention_heads"] = tiny_heads;
  tiny["intermediate_size"] = ScaleRatio(intermediate, hidden, tiny_hidden, 8);
  tiny["num_hidden_layers"] = TinyDepth(layers, false);
  return tiny_hidden;
}

void SetTinyRunProfile(nlohmann::json& t, int64_t seq_len) {
  t["touchstone_tiny"] = {
      {"policy", P::kPolicyVersion}, {"seq_len", seq_len}, {"batch_size", P::kBatch}};
}

namespace {

StatusOr<nlohmann::json> ScaleDecoder(const nlohmann::json& config, const std::string& family) {
  TS_ASSIGN_OR_RETURN(DecoderConfig c, ParseDecoderConfig(config, family));
  nlohmann::json t = config;
  const TinyAttention a = TinyAttentionShape(c.num_attention_heads, c.num_key_value_heads);
  const int64_t heads = a.heads, kv = a.kv_heads, head_dim = a.head_dim, hidden = a.hidden;
  t["hidden_size"] = hidden;
  t["num_attention_heads"] = heads;
  t["num_key_value_heads"] = kv;
  if (config.contains("head_dim")) t["head_dim"] = head_dim;
  t["intermediate_size"] = ScaleRatio(c.intermediate_size, c.hidden_size, hidden, 8);
  const int64_t layers = TinyDepth(c.num_hidden_layers, VariesByLayer(c.layer_window));
  t["num_hidden_layers"] = layers;
  const int64_t vocab = std::min(c.vocab_size, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);

  // Positions and rotary scaling: keep kind and factors; rescale the context lengths.
  int64_t max_pos = P::kMaxPositions;
  if (c.rope.kind == RopeKind::kDynamic) max_pos = P::kDynamicPositions;
  t["max_position_embeddings"] = max_pos;
  if (const std::optional<RopeParamsRef> ref = FindRopeParams(t)) {
    nlohmann::json& rs = RopeParams(t, *ref);
    if (rs.contains("original_max_position_embeddings")) {
      if (c.rope.kind == RopeKind::kDynamic) {
        rs["original_max_position_embeddings"] = max_pos;
      } else {
        int64_t orig = ScaleRatio(c.rope.original_max_position_embeddings,
                                  c.max_position_embeddings, max_pos, 1);
        rs["original_max_position_embeddings"] = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
      }
    }
  }

  // Sliding window: shrink so it bites within kSeqLen, keep which layers use it.
  std::optional<int64_t> window;
  int64_t first_windowed = -1;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_window[static_cast<size_t>(i)]) {
      window = c.layer_window[static_cast<size_t>(i)];
      if (first_windowed < 0) first_windowed = i;
    }
  }
  if (window) {
    t["sliding_window"] = std::min<int64_t>(*window, P::kWindow);
    if (family == "qwen2") {
      // All layers windowed stays all; a full-then-windowed pattern becomes [full, windowed].
      t["max_window_layers"] = first_windowed == 0 ? 0 : std::min<int64_t>(1, layers - 1);
    }
  } else if (family == "qwen2") {
    t["max_window_layers"] = std::min<int64_t>(t.value("max_window_layers", 28), layers);
  }
  if (t.contains("sliding_window") && t["sliding_window"].is_number() && !window) {
    // Inactive window (e.g. qwen2 use_sliding_window=false): scale it too, it stays inactive.
    t["sliding_window"] = P::kWindow;
  }
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  return t;
}

StatusOr<nlohmann::json> ScaleBert(const nlohmann::json& config) {
  TS_ASSIGN_OR_RETURN(BertConfig c, ParseBertConfig(config));
  nlohmann::json t = config;
  ScaleEncoderWidth(t, c.num_attention_heads, c.hidden_size, c.intermediate_size,
                    c.num_hidden_layers);
  const int64_t vocab = std::min(c.vocab_size, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
  t["max_position_embeddings"] = std::min(c.max_position_embeddings, P::kMaxPositions);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, std::min(P::kSeqLen, t["max_position_embeddings"].get<int64_t>()));
  return t;
}

StatusOr<nlohmann::json> ScaleVit(const nlohmann::json& config) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(config));
  nlohmann::json t = config;
  ScaleEncoderWidth(t, c.num_attention_heads, c.hidden_size, c.intermediate_size,
                    c.num_hidden_layers);
  t["image_size"] = P::kImageSize;
  t["patch_size"] = P::kPatchSize;
  ScaleLabels(t, c.num_labels);
  const int64_t grid = P::kImageSize / P::kPatchSize;
  SetTinyRunProfile(t, grid * grid + 1);
  return t;
}

}  // namespace

StatusOr<nlohmann::json> ScaleToTiny(const nlohmann::json& config, const std::string& family) {
  if (family == "llama" || family == "mistral" || family == "qwen2") {
    return ScaleDecoder(config, family);
  }
  if (family == "bert") return ScaleBert(config);
  if (family == "vit") return ScaleVit(config);
  return UnimplementedError("no tiny scaling policy for family '" + family + "'");
}

int64_t RunSeqLen(const nlohmann::json& config) {
  if (config.contains("touchstone_tiny") && config["touchstone_tiny"].is_object()) {
    return config["touchstone_tiny"].value("seq_len", P::kSeqLen);
  }
  int64_t max_pos = 128;
  auto it = config.find("max_position_embeddings");
  if (it != config.end() && it->is_number_integer()) max_pos = it->get<int64_t>();
  return std::min<int64_t>(max_pos, 128);
}

int64_t RunBatchSize(const nlohmann::json& config) {
  if (config.contains("touchstone_tiny") && config["touchstone_tiny"].is_object()) {
    return config["touchstone_tiny"].value("batch_size", P::kBatch);
  }
  return P::kBatch;
}

}  // namespace ts::zoo
