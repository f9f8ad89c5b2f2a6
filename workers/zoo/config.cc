#include "workers/zoo/config.h"

#include <cmath>
#include <limits>

namespace ts::zoo {

const char* JsonTypeName(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::binary:
      return "binary";
    case nlohmann::json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

const nlohmann::json* ConfigReader::Find(const std::string& field) const {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool ConfigReader::Has(const std::string& field) const { return Find(field) != nullptr; }

bool ConfigReader::IsNull(const std::string& field) const {
  if (!j_.is_object()) return false;
  auto it = j_.find(field);
  return it != j_.end() && it->is_null();
}

Status ConfigReader::Error(const std::string& field, const std::string& what) const {
  return InvalidArgumentError(Name(field) + ": " + what);
}

namespace {

StatusOr<int64_t> AsInt(const ConfigReader& r, const std::string& field, const nlohmann::json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return r.Error(field, "out of range");
    }
    return v.get<int64_t>();
  }
  // Some exporters write sizes as 4096.0; accept integral numbers.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return r.Error(field, std::string("expected integer, got ") + JsonTypeName(v));
}

StatusOr<double> AsDouble(const ConfigReader& r, const std::string& field,
                          const nlohmann::json& v) {
  if (!v.is_number()) return r.Error(field, std::string("expected number, got ") + JsonTypeName(v));
  return v.get<double>();
}

StatusOr<std::string> AsString(const ConfigReader& r, const std::string& field,
                               const nlohmann::json& v) {
  if (!v.is_string()) return r.Error(field, std::string("expected string, got ") + JsonTypeName(v));
  return v.get<std::string>();
}

// The field `v` (null when absent) through `as`: "missing" when absent and required (no
// `def`), `def` when absent and defaulted.
template <typename T>
StatusOr<T> ReadField(const ConfigReader& r, const std::string& field, const nlohmann::json* v,
                      const std::optional<T>& def,
                      StatusOr<T> (*as)(const ConfigReader&, const std::string&,
                                        const nlohmann::json&)) {
  if (v != nullptr) return as(r, field, *v);
  if (def) return *def;
  return r.Error(field, "missing");
}

}  // namespace

StatusOr<int64_t> ConfigReader::Int(const std::string& field) const {
  return ReadField<int64_t>(*this, field, Find(field), std::nullopt, AsInt);
}

StatusOr<int64_t> ConfigReader::Int(const std::string& field, int64_t def) const {
  return ReadField<int64_t>(*this, field, Find(field), def, AsInt);
}

StatusOr<double> ConfigReader::Double(const std::string& field) const {
  return ReadField<double>(*this, field, Find(field), std::nullopt, AsDouble);
}

StatusOr<double> ConfigReader::Double(const std::string& field, double def) const {
  return ReadField<double>(*this, field, Find(field), def, AsDouble);
}

StatusOr<bool> ConfigReader::Bool(const std::string& field, bool def) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return def;
  if (!v->is_boolean())
    return Error(field, std::string("expected boolean, got ") + JsonTypeName(*v));
  return v->get<bool>();
}

StatusOr<std::string> ConfigReader::String(const std::string& field) const {
  return ReadField<std::string>(*this, field, Find(field), std::nullopt, AsString);
}

StatusOr<std::string> ConfigReader::String(const std::string& field, const std::string& def) const {
  return ReadField<std::string>(*this, field, Find(field), def, AsString);
}

StatusOr<Activation> ParseActivation(const std::string& name, const std::string& field) {
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return Activation::kGeluTanh;
  }
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "relu") return Activation::kRelu;
  if (name == "quick_gelu") return Activation::kQuickGelu;
  return InvalidArgumentError(field + ": unknown '" + name + "'");
}

const char* RopeKindName(RopeKind kind) {
  switch (kind) {
    case RopeKind::kDefault:
      return "default";
    case RopeKind::kLinear:
      return "linear";
    case RopeKind::kDynamic:
      return "dynamic";
    case RopeKind::kLlama3:
      return "llama3";
    case RopeKind::kYarn:
      return "yarn";
  }
  return "default";
}

namespace {

Status CheckPositive(const ConfigReader& r, const std::string& field, int64_t v) {
  if (v <= 0) return r.Error(field, "must be positive (got " + std::to_string(v) + ")");
  return OkStatus();
}

Status CheckPositive(const ConfigReader& r, const std::string& field, double v) {
  if (!(v > 0.0) || !std::isfinite(v)) return r.Error(field, "must be positive");
  return OkStatus();
}

// Reads hidden_act (or another activation field) with a default.
StatusOr<Activation> ReadActivation(const ConfigReader& r, const std::string& field,
                                    const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(field, def));
  return ParseActivation(name, r.Name(field));
}

StatusOr<std::optional<int64_t>> ReadOptionalInt(const ConfigReader& r, const std::string& field) {
  if (!r.Has(field)) return std::optional<int64_t>();
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int(field));
  return std::optional<int64_t>(v);
}

// The structural sizes every family requires.
struct CoreSizes {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0;
};

StatusOr<CoreSizes> ReadCore(const ConfigReader& r) {
  CoreSizes c;
  TS_ASSIGN_OR_RETURN(c.hidden, r.Int("hidden_size"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "hidden_size", c.hidden));
  TS_ASSIGN_OR_RETURN(c.layers, r.Int("num_hidden_layers"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "num_hidden_layers", c.layers));
  TS_ASSIGN_OR_RETURN(c.heads, r.Int("num_attention_heads"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "num_attention_heads", c.heads));
  TS_ASSIGN_OR_RETURN(c.intermediate, r.Int("intermediate_size"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "intermediate_size", c.intermediate));
  return c;
}

Status CheckHeadsDivideHidden(const ConfigReader& r, int64_t hidden, int64_t heads) {
  if (hidden % heads != 0) {
    return r.Error("num_attention_heads", "must divide hidden_size (" + std::to_string(hidden) +
                                              " % " + std::to_string(heads) + " != 0)");
  }
  return OkStatus();
}

// The core sizes of a BERT-style config (BertConfig, VitConfig), heads dividing hidden_size.
template <typename EncoderConfig>
Status ReadEncoderCore(const ConfigReader& r, EncoderConfig& c) {
  TS_ASSIGN_OR_RETURN(CoreSizes core, ReadCore(r));
  c.hidden_size = core.hidden;
  c.num_hidden_layers = core.layers;
  c.num_attention_heads = core.heads;
  c.intermediate_size = core.intermediate;
  return CheckHeadsDivideHidden(r, c.hidden_size, c.num_attention_heads);
}

}  // namespace

StatusOr<int64_t> ParseNumLabels(const nlohmann::json& config) {
  ConfigReader r(config);
  if (r.Has("id2label")) {
    const nlohmann::json& m = config.at("id2label");
    if (!m.is_object()) {
      return r.Error("id2label", std::string("expected object, got ") + JsonTypeName(m));
    }
    if (m.empty()) return r.Error("id2label", "must not be empty");
    return static_cast<int64_t>(m.size());
  }
  TS_ASSIGN_OR_RETURN(int64_t n, r.Int("num_labels", 2));
  TS_RETURN_IF_ERROR(CheckPositive(r, "num_labels", n));
  return n;
}

std::optional<RopeParamsRef> FindRopeParams(const nlohmann::json& config,
                                            const std::string& layer_type) {
  if (!config.is_object()) return std::nullopt;
  RopeParamsRef ref;
  auto rs = config.find("rope_scaling");
  auto rp = config.find("rope_parameters");
  if (rs != config.end() && rs->is_object() && !rs->empty()) {
    ref.field = "rope_scaling";  // transformers 5: `rope_scaling or rope_parameters`
  } else if (rp != config.end() && rp->is_object()) {
    ref.field = "rope_parameters";
  } else {
    return std::nullopt;
  }
  const nlohmann::json& params = config.at(ref.field);
  auto nested = params.find(layer_type);
  if (nested != params.end() && nested->is_object()) ref.sub = layer_type;
  return ref;
}

const nlohmann::json& RopeParams(const nlohmann::json& config, const RopeParamsRef& ref) {
  const nlohmann::json& params = config.at(ref.field);
  return ref.sub.empty() ? params : params.at(ref.sub);
}

nlohmann::json& RopeParams(nlohmann::json& config, const RopeParamsRef& ref) {
  nlohmann::json& params = config.at(ref.field);
  return ref.sub.empty() ? params : params.at(ref.sub);
}

namespace {

// The kind-specific parameters of `s` (the RoPE object) into `rope`.
Status ParseRopeKind(const ConfigReader& s, int64_t max_position_embeddings, RopeConfig& rope) {
  // transformers accepts both keys; "rope_type" wins (modeling_rope_utils).
  std::string key = s.Has("rope_type") ? "rope_type" : "type";
  TS_ASSIGN_OR_RETURN(std::string kind, s.String(key, "default"));
  if (kind == "default") return OkStatus();
  if (kind == "linear") {
    rope.kind = RopeKind::kLinear;
  } else if (kind == "dynamic") {
    rope.kind = RopeKind::kDynamic;
  } else if (kind == "llama3") {
    rope.kind = RopeKind::kLlama3;
  } else if (kind == "yarn") {
    rope.kind = RopeKind::kYarn;
  } else {
    return s.Error(key, "unknown '" + kind + "'");
  }
  TS_ASSIGN_OR_RETURN(rope.factor, s.Double("factor"));
  TS_RETURN_IF_ERROR(CheckPositive(s, "factor", rope.factor));
  // Dynamic NTK scales past the config's max_position_embeddings whatever the dict says
  // (transformers' _compute_dynamic_ntk_parameters and dynamic_rope_update).
  if (rope.kind == RopeKind::kLinear || rope.kind == RopeKind::kDynamic) return OkStatus();
  if (rope.kind == RopeKind::kLlama3) {
    TS_ASSIGN_OR_RETURN(rope.low_freq_factor, s.Double("low_freq_factor"));
    TS_ASSIGN_OR_RETURN(rope.high_freq_factor, s.Double("high_freq_factor"));
    TS_ASSIGN_OR_RETURN(rope.original_max_position_embeddings,
                        s.Int("original_max_position_embeddings"));
    TS_RETURN_IF_ERROR(CheckPositive(s, "low_freq_factor", rope.low_freq_factor));
    TS_RETURN_IF_ERROR(CheckPositive(s, "original_max_position_embeddings",
                                     rope.original_max_position_embeddings));
    if (!(rope.high_freq_factor > rope.low_freq_factor)) {
      return s.Error("high_freq_factor", "must exceed low_freq_factor");
    }
    return OkStatus();
  }
  // yarn
  TS_ASSIGN_OR_RETURN(rope.original_max_position_embeddings,
                      s.Int("original_max_position_embeddings", max_position_embeddings));
  TS_RETURN_IF_ERROR(
      CheckPositive(s, "original_max_position_embeddings", rope.original_max_position_embeddings));
  TS_ASSIGN_OR_RETURN(rope.beta_fast, s.Double("beta_fast", 32.0));
  TS_ASSIGN_OR_RETURN(rope.beta_slow, s.Double("beta_slow", 1.0));
  TS_ASSIGN_OR_RETURN(rope.truncate, s.Bool("truncate", true));
  auto get_mscale = [](double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
  };
  if (s.Has("attention_factor")) {
    TS_ASSIGN_OR_RETURN(rope.attention_factor, s.Double("attention_factor"));
  } else {
    TS_ASSIGN_OR_RETURN(double mscale, s.Double("mscale", 0.0));
    TS_ASSIGN_OR_RETURN(double mscale_all_dim, s.Double("mscale_all_dim", 0.0));
    rope.attention_factor =
        (mscale != 0.0 && mscale_all_dim != 0.0)
            ? get_mscale(rope.factor, mscale) / get_mscale(rope.factor, mscale_all_dim)
            : get_mscale(rope.factor, 1.0);
  }
  return OkStatus();
}

}  // namespace

StatusOr<RopeConfig> ParseRope(const nlohmann::json& config, int64_t max_position_embeddings,
                               const std::string& layer_type) {
  ConfigReader r(config);
  for (const char* field : {"rope_scaling", "rope_parameters"}) {
    if (r.Has(field) && !config.at(field).is_object()) {
      return r.Error(field, std::string("expected object, got ") + JsonTypeName(config.at(field)));
    }
  }
  RopeConfig rope;
  rope.max_position_embeddings = max_position_embeddings;
  rope.original_max_position_embeddings = max_position_embeddings;
  const std::optional<RopeParamsRef> ref = FindRopeParams(config, layer_type);
  const nlohmann::json empty = nlohmann::json::object();
  ConfigReader s(ref ? RopeParams(config, *ref) : empty, ref ? ref->Prefix() : "");
  if (s.Has("rope_theta")) {
    TS_ASSIGN_OR_RETURN(rope.theta, s.Double("rope_theta"));
    TS_RETURN_IF_ERROR(CheckPositive(s, "rope_theta", rope.theta));
  } else {
    TS_ASSIGN_OR_RETURN(rope.theta, r.Double("rope_theta", 10000.0));
    TS_RETURN_IF_ERROR(CheckPositive(r, "rope_theta", rope.theta));
  }
  if (!ref) return rope;
  TS_RETURN_IF_ERROR(ParseRopeKind(s, max_position_embeddings, rope));
  return rope;
}

StatusOr<DecoderConfig> ParseDecoderConfig(const nlohmann::json& config,
                                           const std::string& family) {
  ConfigReader r(config);
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  DecoderConfig c;
  c.family = family;
  TS_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "vocab_size", c.vocab_size));
  TS_ASSIGN_OR_RETURN(CoreSizes core, ReadCore(r));
  c.hidden_size = core.hidden;
  c.num_hidden_layers = core.layers;
  c.num_attention_heads = core.heads;
  c.intermediate_size = core.intermediate;
  TS_ASSIGN_OR_RETURN(c.num_key_value_heads, r.Int("num_key_value_heads", core.heads));
  TS_RETURN_IF_ERROR(CheckPositive(r, "num_key_value_heads", c.num_key_value_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.Error("num_key_value_heads", "must divide num_attention_heads (" +
                                              std::to_string(c.num_attention_heads) + " % " +
                                              std::to_string(c.num_key_value_heads) + " != 0)");
  }
  if (r.Has("head_dim")) {
    TS_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim"));
    TS_RETURN_IF_ERROR(CheckPositive(r, "head_dim", c.head_dim));
  } else {
    TS_RETURN_IF_ERROR(CheckHeadsDivideHidden(r, c.hidden_size, c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) return r.Error("head_dim", "must be even for rotary embeddings");

  const bool mistral = family == "mistral";
  const bool qwen2 = family == "qwen2";
  const int64_t def_max_pos = mistral ? 4096 * 32 : qwen2 ? 32768 : 2048;
  TS_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("max_position_embeddings", def_max_pos));
  TS_RETURN_IF_ERROR(CheckPositive(r, "max_position_embeddings", c.max_position_embeddings));
  TS_ASSIGN_OR_RETURN(c.hidden_act, ReadActivation(r, "hidden_act", "silu"));
  TS_ASSIGN_OR_RETURN(c.rms_norm_eps, r.Double("rms_norm_eps", 1e-6));
  TS_RETURN_IF_ERROR(CheckPositive(r, "rms_norm_eps", c.rms_norm_eps));
  TS_ASSIGN_OR_RETURN(c.initializer_range, r.Double("initializer_range", 0.02));
  TS_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  TS_ASSIGN_OR_RETURN(c.attention_bias, r.Bool("attention_bias", false));
  TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  c.qkv_bias = qwen2;
  TS_ASSIGN_OR_RETURN(c.pad_token_id, ReadOptionalInt(r, "pad_token_id"));
  if (c.pad_token_id && (*c.pad_token_id < 0 || *c.pad_token_id >= c.vocab_size)) {
    c.pad_token_id.reset();  // transformers ignores out-of-vocab pad ids for the embedding.
  }
  TS_ASSIGN_OR_RETURN(c.rope, ParseRope(config, c.max_position_embeddings));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));

  // Sliding window: Mistral windows every layer (default 4096; null disables); Qwen2 windows
  // layers >= max_window_layers when use_sliding_window.
  c.layer_window.assign(static_cast<size_t>(c.num_hidden_layers), std::nullopt);
  std::optional<int64_t> window;
  if (mistral || qwen2) {
    if (!r.IsNull("sliding_window")) {
      TS_ASSIGN_OR_RETURN(int64_t w, r.Int("sliding_window", 4096));
      TS_RETURN_IF_ERROR(CheckPositive(r, "sliding_window", w));
      window = w;
    }
  }
  if (mistral && window) {
    for (auto& lw : c.layer_window) lw = window;
  }
  if (qwen2) {
    TS_ASSIGN_OR_RETURN(bool use, r.Bool("use_sliding_window", false));
    TS_ASSIGN_OR_RETURN(int64_t mwl, r.Int("max_window_layers", 28));
    if (use && window) {
      for (int64_t i = std::max<int64_t>(mwl, 0); i < c.num_hidden_layers; ++i) {
        c.layer_window[static_cast<size_t>(i)] = window;
      }
    }
  }
  return c;
}

std::string ArchOf(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("architectures")) return "";
  const nlohmann::json& archs = config["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string()) return "";
  return archs[0].get<std::string>();
}

StatusOr<BertConfig> ParseBertConfig(const nlohmann::json& config) {
  ConfigReader r(config);
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  BertConfig c;
  TS_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(CheckPositive(r, "vocab_size", c.vocab_size));
  TS_RETURN_IF_ERROR(ReadEncoderCore(r, c));
  TS_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("max_position_embeddings", 512));
  TS_RETURN_IF_ERROR(CheckPositive(r, "max_position_embeddings", c.max_position_embeddings));
  TS_ASSIGN_OR_RETURN(c.type_vocab_size, r.Int("type_vocab_size", 2));
  TS_RETURN_IF_ERROR(CheckPositive(r, "type_vocab_size", c.type_vocab_size));
  TS_ASSIGN_OR_RETURN(c.hidden_act, ReadActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-12));
  TS_RETURN_IF_ERROR(CheckPositive(r, "layer_norm_eps", c.layer_norm_eps));
  TS_ASSIGN_OR_RETURN(c.initializer_range, r.Double("initializer_range", 0.02));
  TS_ASSIGN_OR_RETURN(c.pad_token_id, ReadOptionalInt(r, "pad_token_id"));
  if (!r.Has("pad_token_id") && !r.IsNull("pad_token_id")) c.pad_token_id = 0;  // BertConfig
  if (c.pad_token_id && (*c.pad_token_id < 0 || *c.pad_token_id >= c.vocab_size)) {
    c.pad_token_id.reset();
  }
  TS_ASSIGN_OR_RETURN(std::string pos_type, r.String("position_embedding_type", "absolute"));
  if (pos_type != "absolute")
    return r.Error("position_embedding_type", "unsupported '" + pos_type + "'");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<VitConfig> ParseVitConfig(const nlohmann::json& config) {
  ConfigReader r(config);
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  VitConfig c;
  TS_RETURN_IF_ERROR(ReadEncoderCore(r, c));
  TS_ASSIGN_OR_RETURN(c.image_size, r.Int("image_size", 224));
  TS_RETURN_IF_ERROR(CheckPositive(r, "image_size", c.image_size));
  TS_ASSIGN_OR_RETURN(c.patch_size, r.Int("patch_size", 16));
  TS_RETURN_IF_ERROR(CheckPositive(r, "patch_size", c.patch_size));
  if (c.image_size % c.patch_size != 0) {
    return r.Error("patch_size", "must divide image_size (" + std::to_string(c.image_size) + " % " +
                                     std::to_string(c.patch_size) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.num_channels, r.Int("num_channels", 3));
  TS_RETURN_IF_ERROR(CheckPositive(r, "num_channels", c.num_channels));
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.hidden_act, ReadActivation(r, "hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Double("layer_norm_eps", 1e-12));
  TS_RETURN_IF_ERROR(CheckPositive(r, "layer_norm_eps", c.layer_norm_eps));
  TS_ASSIGN_OR_RETURN(c.initializer_range, r.Double("initializer_range", 0.02));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

}  // namespace ts::zoo
