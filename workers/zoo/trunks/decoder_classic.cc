// The classic lineage's config reading and tiny scaling (decoder_family.h): rotary with partial
// and longrope variants, per-pattern sliding windows, MoE checks, and the policy-2 scaling these
// families have always had (README.md).
#include <algorithm>
#include <cmath>

#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/decoder_family.h"

namespace ts::zoo::internal::decoder {
namespace {

using P = TinyProfile;

StatusOr<std::vector<double>> DoubleList(const json& rs, const std::string& prefix,
                                         const std::string& field, size_t want) {
  ConfigReader r(rs, prefix);
  auto it = rs.find(field);
  if (it == rs.end() || it->is_null()) return r.Error(field, "missing");
  if (!it->is_array())
    return r.Error(field, std::string("expected array, got ") + JsonTypeName(*it));
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number()) return r.Error(field, "expected numbers");
    out.push_back(v.get<double>());
  }
  if (out.size() != want) {
    return r.Error(field, "expected " + std::to_string(want) + " factors (rotary_dim / 2), got " +
                              std::to_string(out.size()));
  }
  return out;
}

// Partial rotary: keep the fraction (phi-msft: rotary_dim scaled to the tiny head_dim); longrope
// factors subsampled to the tiny rotary width; the original context scaled with the positions.
void ScaleRotary(const Recipe& c, int64_t head_dim, int64_t max_pos, json& t) {
  if (c.partial_is_dim) {
    t["rotary_dim"] = std::max<int64_t>(
        2, static_cast<int64_t>(std::lround(c.partial_rotary * static_cast<double>(head_dim))) /
               2 * 2);
  }
  const int64_t tiny_rot = static_cast<int64_t>(static_cast<double>(head_dim) * c.partial_rotary);
  const bool rotary = c.pos == Pos::kRotary;
  if (rotary && (tiny_rot < 2 || tiny_rot % 2 != 0) && !c.partial_is_dim) {
    // Keep the partial fraction but round to an even rotary width the tiny head_dim allows.
    const int64_t rd = std::max<int64_t>(2, tiny_rot / 2 * 2);
    t[c.partial_field] = static_cast<double>(rd) / static_cast<double>(head_dim);
  }
  const std::optional<RopeParamsRef> ref = FindRopeParams(t);
  if (!rotary || !ref) return;
  json& rs = RopeParams(t, *ref);
  if (c.longrope.on) {
    // The 32-token run uses the long factors once the original context is scaled down.
    const int64_t rd = c.partial_is_dim ? t["rotary_dim"].get<int64_t>() : tiny_rot / 2 * 2;
    const size_t half = static_cast<size_t>(std::max<int64_t>(1, rd / 2));
    for (const char* key : {"short_factor", "long_factor"}) {
      const std::vector<double>& src =
          key[0] == 's' ? c.longrope.short_factor : c.longrope.long_factor;
      json out = json::array();
      for (size_t i = 0; i < half; ++i) out.push_back(src[i * src.size() / half]);
      rs[key] = out;
    }
    int64_t orig = ScaleRatio(c.longrope.original, c.max_pos, max_pos, 1);
    orig = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
    if (rs.contains("original_max_position_embeddings"))
      rs["original_max_position_embeddings"] = orig;
    t["original_max_position_embeddings"] = orig;
  } else if (rs.contains("original_max_position_embeddings")) {
    if (c.rope.kind == RopeKind::kDynamic) {
      rs["original_max_position_embeddings"] = max_pos;
    } else {
      const int64_t orig =
          ScaleRatio(c.rope.original_max_position_embeddings, c.max_pos, max_pos, 1);
      rs["original_max_position_embeddings"] = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
    }
  }
}

// Sliding window: bites within the tiny sequence; the layer pattern is kept.
void ScaleWindow(const Recipe& c, WindowPattern pattern, int64_t layers, json& t) {
  const bool qwen = pattern == WindowPattern::kQwen;
  if (c.window_size) {
    t["sliding_window"] = std::min<int64_t>(*c.window_size, P::kWindow);
    if (qwen) {
      int64_t first = -1;
      for (int64_t i = 0; i < c.layers; ++i)
        if (c.window[static_cast<size_t>(i)] && first < 0) first = i;
      t["max_window_layers"] = first == 0 ? 0 : std::min<int64_t>(1, layers - 1);
    }
  } else if (t.contains("sliding_window") && t["sliding_window"].is_number()) {
    // Inactive (use_sliding_window false, or no shorter than the context): stays inactive.
    if (qwen) {
      t["sliding_window"] = P::kWindow;
      t["max_window_layers"] = std::min<int64_t>(t.value("max_window_layers", 28), layers);
    } else {
      t["sliding_window"] = nullptr;
    }
  }
}

}  // namespace

Status ReadClassicRotary(const ConfigReader& r, const json& rope_config,
                         const std::string& partial_field, double def_partial, bool is_dim,
                         Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rope_config, c.max_pos));
  c.rope_local = c.rope;
  c.partial_field = partial_field;
  c.partial_is_dim = is_dim;
  if (is_dim) {
    TS_ASSIGN_OR_RETURN(int64_t rd, r.Int("rotary_dim"));
    if (rd <= 0 || rd > c.head_dim || rd % 2 != 0) {
      return r.Error("rotary_dim",
                     "must be even and in (0, head_dim=" + std::to_string(c.head_dim) + "]");
    }
    c.partial_rotary = static_cast<double>(rd) / static_cast<double>(c.head_dim);
  } else if (!partial_field.empty()) {
    TS_ASSIGN_OR_RETURN(c.partial_rotary, r.Double(partial_field, def_partial));
    if (!(c.partial_rotary > 0.0 && c.partial_rotary <= 1.0)) {
      return r.Error(partial_field, "must be in (0, 1]");
    }
  }
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary);
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0) {
    return r.Error(partial_field.empty() ? "head_dim" : partial_field,
                   "rotary dims int(head_dim * factor) = " + std::to_string(c.rotary_dim) +
                       " must be even and >= 2");
  }
  return OkStatus();
}

Status ReadAttentionBias(const ConfigReader& r, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
  c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
  return OkStatus();
}

Status RejectQkLayerNorm(const ConfigReader& r) {
  TS_ASSIGN_OR_RETURN(bool on, r.Bool("qk_layernorm", false));
  if (on) return r.Error("qk_layernorm", "true is not supported by the zoo");
  return OkStatus();
}

Status ReadLongRope(const ConfigReader& r, const json& config, Recipe& c) {
  const std::optional<RopeParamsRef> ref = FindRopeParams(config);
  if (!ref) return r.Error("rope_scaling", "missing");
  const json& rs = RopeParams(config, *ref);
  const std::string prefix = ref->Prefix();
  const size_t half = static_cast<size_t>(c.rotary_dim / 2);
  TS_ASSIGN_OR_RETURN(c.longrope.short_factor, DoubleList(rs, prefix, "short_factor", half));
  TS_ASSIGN_OR_RETURN(c.longrope.long_factor, DoubleList(rs, prefix, "long_factor", half));
  ConfigReader s(rs, prefix);
  // transformers 5 standardize_rope_params: Phi3Config always has the top-level
  // original_max_position_embeddings (default 4096), and it wins over the dict's own.
  if (r.Has("original_max_position_embeddings")) {
    TS_ASSIGN_OR_RETURN(c.longrope.original, r.Int("original_max_position_embeddings"));
    TS_RETURN_IF_ERROR(Positive(r, "original_max_position_embeddings", c.longrope.original));
  } else {
    c.longrope.original = 4096;
  }
  for (const char* field : {"factor", "attention_factor"}) {
    if (!s.Has(field)) continue;
    TS_ASSIGN_OR_RETURN(double v, s.Double(field));
    if (!(v > 0.0)) return s.Error(field, "must be positive");
    (field[0] == 'f' ? c.longrope.factor : c.longrope.attention_factor) = v;
  }
  return OkStatus();
}

Status ClassicWindows(const ConfigReader& r, WindowPattern pattern, Recipe& c) {
  if (pattern == WindowPattern::kNone) return OkStatus();
  std::optional<int64_t> w;
  if (r.Has("sliding_window")) {
    TS_ASSIGN_OR_RETURN(int64_t v, r.Int("sliding_window"));
    TS_RETURN_IF_ERROR(Positive(r, "sliding_window", v));
    w = v;
  } else if (pattern == WindowPattern::kAlternate && !r.IsNull("sliding_window")) {
    w = 4096;
  }
  bool use = w.has_value();
  int64_t max_window_layers = 0;
  if (pattern == WindowPattern::kQwen) {
    TS_ASSIGN_OR_RETURN(use, r.Bool("use_sliding_window", false));
    TS_ASSIGN_OR_RETURN(max_window_layers, r.Int("max_window_layers", 28));
    if (use && !w) w = 4096;
  }
  // A window no shorter than the context never bites: treated as off (Phi-3.5's 262144).
  if (w && *w >= c.max_pos) use = false;
  if (!use) return OkStatus();
  c.window_size = w;
  for (int64_t i = 0; i < c.layers; ++i) {
    bool on = true;
    if (pattern == WindowPattern::kAlternate) on = i % 2 == 0;  // sliding, full, sliding, ...
    if (pattern == WindowPattern::kQwen) on = i >= max_window_layers;
    if (on) c.window[static_cast<size_t>(i)] = w;
  }
  return OkStatus();
}

Status CheckExperts(const ConfigReader& r, const Recipe& c) {
  TS_RETURN_IF_ERROR(Positive(r, "num_experts_per_tok", c.moe.top_k));
  if (c.moe.top_k > c.moe.experts) {
    return r.Error("num_experts_per_tok", "must not exceed the number of experts (" +
                                              std::to_string(c.moe.top_k) + " > " +
                                              std::to_string(c.moe.experts) + ")");
  }
  return OkStatus();
}

StatusOr<Recipe> RecipeFromDecoderConfig(const json& config, const std::string& family) {
  TS_ASSIGN_OR_RETURN(DecoderConfig d, ParseDecoderConfig(config, family));
  Recipe c;
  c.classic = c.view_heads = true;
  c.vocab = d.vocab_size;
  c.hidden = d.hidden_size;
  c.inter = d.intermediate_size;
  c.layers = d.num_hidden_layers;
  c.heads = d.num_attention_heads;
  c.kv = d.num_key_value_heads;
  c.head_dim = c.rotary_dim = d.head_dim;
  c.max_pos = d.max_position_embeddings;
  c.act.a = d.hidden_act;
  c.eps = d.rms_norm_eps;
  c.init_range = d.initializer_range;
  c.tie = d.tie_word_embeddings;
  c.pad = d.pad_token_id;
  c.rope = c.rope_local = d.rope;
  c.q_bias = c.k_bias = c.v_bias = d.attention_bias || d.qkv_bias;
  c.o_bias = d.attention_bias;
  c.mlp_bias = d.mlp_bias;
  c.window = d.layer_window;
  c.rope_on.assign(static_cast<size_t>(c.layers), true);
  c.rope_local_on.assign(static_cast<size_t>(c.layers), false);
  c.num_labels = d.num_labels;
  return c;
}

StatusOr<json> ScaleClassic(const DecoderFamily& fam, const json& config) {
  TS_ASSIGN_OR_RETURN(Recipe c, ParseRecipe(fam, config));
  const Fields f = fam.config_fields ? fam.config_fields(config) : fam.fields;
  json t = config;
  const TinyAttention a = TinyAttentionShape(c.heads, c.kv);
  t[f.hidden] = a.hidden;
  t[f.heads] = a.heads;
  if (!f.kv.empty() && (config.contains(f.kv) || a.kv_heads != a.heads)) t[f.kv] = a.kv_heads;
  if (!f.head_dim.empty()) t[f.head_dim] = a.head_dim;
  if (!f.inter.empty()) t[f.inter] = ScaleRatio(c.inter, c.hidden, a.hidden, 8);
  const int64_t layers = TinyLayers(c);
  t[f.layers] = layers;
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t[f.vocab] = vocab;
  for (const char* fld : {"pad_token_id", "bos_token_id", "eos_token_id"})
    MapTokenId(t, fld, vocab);
  const bool dynamic = c.pos == Pos::kRotary && c.rope.kind == RopeKind::kDynamic;
  const int64_t max_pos = dynamic ? P::kDynamicPositions : P::kMaxPositions;
  t[f.max_pos] = max_pos;
  ScaleRotary(c, a.head_dim, max_pos, t);
  ScaleWindow(c, fam.windows, layers, t);
  if (fam.scale_extra) fam.scale_extra(config, c, t);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  return t;
}

}  // namespace ts::zoo::internal::decoder
