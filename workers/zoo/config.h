// Typed, validated access to Hugging Face config.json fields, and the parsed per-family configs
// the zoo builds from.
//
// Every error is INVALID_ARGUMENT and starts with the field's dotted name:
//   "hidden_size: missing", "vocab_size: expected integer, got string",
//   "num_attention_heads: must divide hidden_size (64 % 5 != 0)",
//   "rope_scaling.type: unknown 'foo'".
// Structural sizes (vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// intermediate_size) are required; every other field falls back to the default the
// transformers config class of the family has (LlamaConfig, MistralConfig, Qwen2Config,
// BertConfig, ViTConfig). A JSON null counts as absent, except where transformers gives null a
// meaning of its own (sliding_window: null disables the window).
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/base/status.h"

namespace ts::zoo {

// Reads fields of one JSON object; `prefix` is prepended to field names in errors
// ("rope_scaling.").
class ConfigReader {
 public:
  explicit ConfigReader(const nlohmann::json& j, std::string prefix = "")
      : j_(j), prefix_(std::move(prefix)) {}

  // True if the field is present and not null.
  bool Has(const std::string& field) const;
  // True if the field is present with value null.
  bool IsNull(const std::string& field) const;

  // Required fields: "<field>: missing" when absent or null.
  StatusOr<int64_t> Int(const std::string& field) const;
  StatusOr<double> Double(const std::string& field) const;
  StatusOr<std::string> String(const std::string& field) const;
  // Defaulted fields: `def` when absent or null.
  StatusOr<int64_t> Int(const std::string& field, int64_t def) const;
  StatusOr<double> Double(const std::string& field, double def) const;
  StatusOr<bool> Bool(const std::string& field, bool def) const;
  StatusOr<std::string> String(const std::string& field, const std::string& def) const;

  // Field name as it appears in errors.
  std::string Name(const std::string& field) const { return prefix_ + field; }
  Status Error(const std::string& field, const std::string& what) const;

 private:
  const nlohmann::json* Find(const std::string& field) const;

  const nlohmann::json& j_;
  std::string prefix_;
};

// Name of a JSON value's type as errors print it ("integer", "number", "string", ...).
const char* JsonTypeName(const nlohmann::json& j);

enum class Activation { kGeluErf, kGeluTanh, kSilu, kRelu, kQuickGelu };
// HF hidden_act names: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, silu, swish, relu,
// quick_gelu. Error names `field`.
StatusOr<Activation> ParseActivation(const std::string& name, const std::string& field);

enum class RopeKind { kDefault, kLinear, kDynamic, kLlama3, kYarn };
const char* RopeKindName(RopeKind kind);

// Rotary embedding parameters (transformers' modeling_rope_utils semantics).
struct RopeConfig {
  RopeKind kind = RopeKind::kDefault;
  double theta = 10000.0;
  double factor = 1.0;
  // Dynamic NTK: scaling starts past this many positions: the config's max_position_embeddings,
  // as transformers' _compute_dynamic_ntk_parameters reads it (an
  // original_max_position_embeddings in the RoPE dict is ignored there).
  int64_t max_position_embeddings = 2048;
  // llama3 / yarn.
  int64_t original_max_position_embeddings = 2048;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // yarn: scales cos/sin
  // yarn: the correction range's bounds floored / ceiled (transformers' `truncate`, default
  // true; gpt_oss: false).
  bool truncate = true;
};

// Llama, Mistral, Qwen2 (decoder-only, RMSNorm, RoPE, SwiGLU).
struct DecoderConfig {
  std::string family;  // "llama", "mistral", "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  Activation hidden_act = Activation::kSilu;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q,k,v,o bias (llama attention_bias)
  bool qkv_bias = false;        // q,k,v bias only (qwen2)
  bool mlp_bias = false;
  std::optional<int64_t> pad_token_id;
  RopeConfig rope;
  // Sliding window per layer (nullopt: full attention in that layer).
  std::vector<std::optional<int64_t>> layer_window;
  int64_t num_labels = 2;  // sequence classification heads
};

// BERT encoder.
struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  Activation hidden_act = Activation::kGeluErf;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  std::optional<int64_t> pad_token_id;
  int64_t num_labels = 2;
};

// ViT image classifier.
struct VitConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  bool qkv_bias = true;
  Activation hidden_act = Activation::kGeluErf;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  int64_t num_labels = 2;
};

// The class a config names: config["architectures"][0], or "" when it names none (not an
// object, no list, an empty list or a non-string first entry).
std::string ArchOf(const nlohmann::json& config);

// num_labels as transformers derives it: len(id2label) if present, else num_labels, else 2.
StatusOr<int64_t> ParseNumLabels(const nlohmann::json& config);
// Where a config keeps its RoPE parameters, as transformers 5 reads them
// (modeling_rope_utils.py RotaryEmbeddingConfigMixin.convert_rope_params_to_dict and
// standardize_rope_params): `rope_scaling` when it is a non-empty object, else
// `rope_parameters` when it is an object; `sub` is the per-layer-type entry ("full_attention",
// "sliding_attention") when that object is nested by layer type, else "".
struct RopeParamsRef {
  std::string field, sub;
  std::string Prefix() const { return field + "." + (sub.empty() ? "" : sub + "."); }
};
// nullopt when the config has neither object. `layer_type` picks a nested entry.
std::optional<RopeParamsRef> FindRopeParams(const nlohmann::json& config,
                                            const std::string& layer_type = "full_attention");
// The object `ref` names in `config` (which must hold it).
const nlohmann::json& RopeParams(const nlohmann::json& config, const RopeParamsRef& ref);
nlohmann::json& RopeParams(nlohmann::json& config, const RopeParamsRef& ref);

// Parses the RoPE parameters (FindRopeParams): the kind ("rope_type", else "type", else
// "default"), its factors, and the base: the object's rope_theta, else the config's top-level
// rope_theta, else 10000 (transformers 5: the dict's value wins). `max_position_embeddings` is
// the config's. Errors name the field ("rope_parameters.factor: missing").
StatusOr<RopeConfig> ParseRope(const nlohmann::json& config, int64_t max_position_embeddings,
                               const std::string& layer_type = "full_attention");

// `family` selects the defaults ("llama", "mistral", "qwen2").
StatusOr<DecoderConfig> ParseDecoderConfig(const nlohmann::json& config, const std::string& family);
StatusOr<BertConfig> ParseBertConfig(const nlohmann::json& config);
StatusOr<VitConfig> ParseVitConfig(const nlohmann::json& config);

}  // namespace ts::zoo
