// Decoder families as data (decoder_family.h): config parsing into a Recipe, the tiny scaling
// every family shares, and the registry entries of every family's head classes.
#include "workers/zoo/trunks/decoder_family.h"

#include <algorithm>
#include <memory>

#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::decoder {
namespace {

using P = TinyProfile;

StatusOr<Act> ReadAct(const ConfigReader& r, const std::string& field, const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(field, def));
  Act a;
  if (name == "xielu") {
    a.xielu = true;
    return a;
  }
  if (name == "relu2") {
    a.a = Activation::kRelu;
    a.relu2 = true;
    return a;
  }
  TS_ASSIGN_OR_RETURN(a.a, ParseActivation(name, r.Name(field)));
  return a;
}

// Vocabulary, width, depth, heads, intermediate and kv heads.
Status ReadSizes(const ConfigReader& r, const Fields& f, int64_t inter_mult, int64_t def_kv,
                 Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int(f.vocab));
  TS_RETURN_IF_ERROR(Positive(r, f.vocab, c.vocab));
  TS_ASSIGN_OR_RETURN(c.hidden, r.Int(f.hidden));
  TS_RETURN_IF_ERROR(Positive(r, f.hidden, c.hidden));
  TS_ASSIGN_OR_RETURN(c.layers, r.Int(f.layers));
  TS_RETURN_IF_ERROR(Positive(r, f.layers, c.layers));
  TS_ASSIGN_OR_RETURN(c.heads, r.Int(f.heads));
  TS_RETURN_IF_ERROR(Positive(r, f.heads, c.heads));
  if (inter_mult > 0) {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter, inter_mult * c.hidden));
  } else {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter));
  }
  TS_RETURN_IF_ERROR(Positive(r, f.inter, c.inter));
  c.kv = c.heads;
  if (!f.kv.empty()) {
    TS_ASSIGN_OR_RETURN(c.kv, r.Int(f.kv, def_kv > 0 ? def_kv : c.heads));
    TS_RETURN_IF_ERROR(Positive(r, f.kv, c.kv));
  }
  if (c.heads % c.kv != 0) {
    return r.Error(f.kv, "must divide " + f.heads + " (" + std::to_string(c.heads) + " % " +
                             std::to_string(c.kv) + " != 0)");
  }
  return OkStatus();
}

// Sizes, activation, eps, tie, pad and (but for the classic lineage, whose families read their
// own) rotary parameters and labels, shared by every family.
Status ReadCore(const json& config, const Fields& f, const Defaults& d, int64_t inter_mult,
                bool reads_rope, Recipe& c) {
  ConfigReader r(config);
  TS_RETURN_IF_ERROR(ReadSizes(r, f, inter_mult, d.kv, c));
  if (!f.head_dim.empty() && r.Has(f.head_dim)) {
    TS_ASSIGN_OR_RETURN(c.head_dim, r.Int(f.head_dim));
    TS_RETURN_IF_ERROR(Positive(r, f.head_dim, c.head_dim));
  } else if (d.head_dim > 0) {
    c.head_dim = d.head_dim;
  } else {
    if (c.hidden % c.heads != 0) {
      return r.Error(f.heads, "must divide " + f.hidden + " (" + std::to_string(c.hidden) + " % " +
                                  std::to_string(c.heads) + " != 0)");
    }
    c.head_dim = c.hidden / c.heads;
  }
  if (!f.max_pos.empty()) {
    TS_ASSIGN_OR_RETURN(c.max_pos, r.Int(f.max_pos, d.max_pos));
    TS_RETURN_IF_ERROR(Positive(r, f.max_pos, c.max_pos));
  }
  if (c.classic) {
    TS_ASSIGN_OR_RETURN(std::string act, r.String(f.act, d.act));
    TS_ASSIGN_OR_RETURN(c.act.a, ParseActivation(act, f.act));
  } else {
    TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, f.act, d.act));
  }
  TS_ASSIGN_OR_RETURN(c.eps, r.Double(f.eps, d.eps));
  if (!(c.eps > 0)) return r.Error(f.eps, "must be positive");
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", d.tie));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_token_id"));
    if (pad >= 0 && pad < c.vocab) c.pad = pad;
  }
  c.window.assign(static_cast<size_t>(c.layers), std::nullopt);
  c.rope_on.assign(static_cast<size_t>(c.layers), true);
  c.rope_local_on.assign(static_cast<size_t>(c.layers), false);
  if (c.classic) return OkStatus();
  if (reads_rope) {
    json rc = config;
    if (!r.Has("rope_theta")) rc["rope_theta"] = d.theta;
    TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rc, c.max_pos));
  } else {
    c.rope.theta = d.theta;  // what ParseRope gives a config without RoPE fields
    c.rope.max_position_embeddings = c.rope.original_max_position_embeddings = c.max_pos;
  }
  c.rope_local = c.rope;
  c.rotary_dim = c.head_dim;
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return OkStatus();
}

// The classic lineage after the core: the family's rope, attention and bias fields, the windows,
// the family's per-layer fields, the labels.
StatusOr<Recipe> ParseClassic(const DecoderFamily& fam, const ConfigReader& r, const json& config,
                              Recipe c) {
  if (fam.parse) TS_RETURN_IF_ERROR(fam.parse(r, config, c));
  TS_RETURN_IF_ERROR(ClassicWindows(r, fam.windows, c));
  if (fam.parse_layers) TS_RETURN_IF_ERROR(fam.parse_layers(r, config, c));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

}  // namespace

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive, got " + std::to_string(v));
  return OkStatus();
}

StatusOr<Recipe> ParseRecipe(const DecoderFamily& fam, const json& config) {
  if (fam.recipe) return fam.recipe(config);
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  int64_t inter_mult = fam.defaults.inter_mult;
  if (!fam.defaults.inter_mult_field.empty()) {
    const std::string& field = fam.defaults.inter_mult_field;
    TS_ASSIGN_OR_RETURN(inter_mult, r.Int(field, fam.defaults.inter_mult));
    TS_RETURN_IF_ERROR(Positive(r, field, inter_mult));
  }
  Recipe c;
  c.n = fam.names;
  c.classic = fam.classic;
  const Fields fields = fam.config_fields ? fam.config_fields(config) : fam.fields;
  TS_RETURN_IF_ERROR(ReadCore(config, fields, fam.defaults, inter_mult, fam.reads_rope, c));
  if (fam.classic) return ParseClassic(fam, r, config, std::move(c));
  if (fam.llama_biases) {
    TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
    c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
    TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  }
  if (fam.parse) TS_RETURN_IF_ERROR(fam.parse(r, config, c));
  if (c.act.xielu && (c.mlp != Mlp::kPlain || c.moe.experts > 0)) {
    return r.Error(fields.act, "xielu is supported by the zoo on plain (ungated, dense) MLPs only");
  }
  return c;
}

json Normalize(const DecoderFamily& fam, const json& config) {
  if (!config.is_object()) return config;
  json c = config;
  for (const auto& [alias, name] : fam.aliases) {
    if (!c.contains(alias)) continue;
    if (!c.contains(name) || c[name].is_null()) c[name] = c[alias];
    c.erase(alias);
  }
  return c;
}

Status ReadPartial(const ConfigReader& r, const std::string& field, double def, Recipe& c) {
  TS_ASSIGN_OR_RETURN(double frac, r.Double(field, def));
  if (!(frac > 0.0 && frac <= 1.0)) return r.Error(field, "must be in (0, 1]");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * frac);
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0) {
    return r.Error(field, "rotary dims int(head_dim * factor) = " + std::to_string(c.rotary_dim) +
                              " must be even and >= 2");
  }
  return OkStatus();
}

Status ReadRotaryDim(const ConfigReader& r, Recipe& c) {
  if (!r.Has("rotary_dim")) return OkStatus();
  TS_ASSIGN_OR_RETURN(c.rotary_dim, r.Int("rotary_dim"));
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) {
    return r.Error("rotary_dim",
                   "must be even and in (0, head_dim=" + std::to_string(c.head_dim) + "]");
  }
  return OkStatus();
}

Status ReadWindow(const ConfigReader& r, std::optional<int64_t>& w) {
  if (!r.Has("sliding_window")) return OkStatus();
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int("sliding_window"));
  TS_RETURN_IF_ERROR(Positive(r, "sliding_window", v));
  w = v;
  return OkStatus();
}

StatusOr<std::vector<bool>> SlidingLayers(const json& config, int64_t layers, bool def_sliding) {
  ConfigReader r(config);
  std::vector<bool> out(static_cast<size_t>(layers), def_sliding);
  if (r.Has("layer_types")) {
    const json& lt = config["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != layers) {
      return r.Error("layer_types", "expected an array of num_hidden_layers strings");
    }
    for (size_t i = 0; i < lt.size(); ++i) {
      if (!lt[i].is_string()) return r.Error("layer_types", "expected strings");
      const std::string k = lt[i].get<std::string>();
      if (k != "sliding_attention" && k != "full_attention") {
        return r.Error("layer_types", "unknown '" + k + "'");
      }
      out[i] = k == "sliding_attention";
    }
    return out;
  }
  if (r.Has("sliding_window_pattern")) {
    const json& p = config["sliding_window_pattern"];
    if (p.is_string()) {  // EXAONE-4 "LLLG"
      const std::string s = p.get<std::string>();
      if (s.empty()) return r.Error("sliding_window_pattern", "empty");
      for (int64_t i = 0; i < layers; ++i)
        out[static_cast<size_t>(i)] = s[static_cast<size_t>(i) % s.size()] == 'L';
      return out;
    }
    TS_ASSIGN_OR_RETURN(int64_t pat, r.Int("sliding_window_pattern"));
    TS_RETURN_IF_ERROR(Positive(r, "sliding_window_pattern", pat));
    for (int64_t i = 0; i < layers; ++i) out[static_cast<size_t>(i)] = (i + 1) % pat != 0;
  }
  return out;
}

Status MistralWindow(const ConfigReader& r, const json& config, Recipe& c) {
  std::optional<int64_t> w;
  TS_RETURN_IF_ERROR(ReadWindow(r, w));
  if (!w || *w >= c.max_pos) return OkStatus();
  TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(config, c.layers, true));
  for (int64_t i = 0; i < c.layers; ++i)
    if (sl[static_cast<size_t>(i)]) c.window[static_cast<size_t>(i)] = w;
  return OkStatus();
}

Status SlidingWithPattern(const ConfigReader& r, const json& config, int64_t pattern_default,
                          bool rope_local, Recipe& c) {
  std::optional<int64_t> w;
  if (pattern_default > 0) w = 4096;
  TS_RETURN_IF_ERROR(ReadWindow(r, w));
  if (!w) return OkStatus();
  json cfg = config;
  if (pattern_default > 0 && !r.Has("layer_types") && !r.Has("sliding_window_pattern"))
    cfg["sliding_window_pattern"] = pattern_default;
  TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(cfg, c.layers, true));
  for (int64_t i = 0; i < c.layers; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (sl[u]) c.window[u] = *w < c.max_pos ? w : std::nullopt;
    (rope_local ? c.rope_local_on : c.rope_on)[u] = sl[u];
  }
  return OkStatus();
}

void BartDecoderLayers(Recipe& c) {
  c.norm = Norm::kLayerNorm;
  c.mlp = Mlp::kPlain;
  c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
  Names& n = c.n;
  n.ln1 = "self_attn_layer_norm";
  n.ln2 = "final_layer_norm";
  n.o = "out_proj";
  n.mlp = "";
  n.up = "fc1";
  n.down = "fc2";
}

}  // namespace ts::zoo::internal::decoder

namespace ts::zoo::internal::decoder {

std::vector<ArchEntry> Archs(DecoderFamily family) {
  // The entries' functions share the family, which lives as long as they do.
  const auto fam = std::make_shared<const DecoderFamily>(std::move(family));
  const DecoderFamily& f = *fam;
  std::vector<ArchEntry> out;
  const std::pair<TextHeadKind, const std::string&> heads[] = {
      {TextHeadKind::kCausalLM, f.classes.causal_lm},
      {TextHeadKind::kSequenceClassification, f.classes.seq_cls},
      {TextHeadKind::kTokenClassification, f.classes.token_cls},
      {TextHeadKind::kQuestionAnswering, f.classes.qa},
      {TextHeadKind::kBase, f.classes.base}};
  for (const auto& [head, arch] : heads) {
    if (arch.empty()) continue;
    nlohmann::json cfg = nlohmann::json::parse(f.example);
    cfg["model_type"] = f.model_type;
    cfg["architectures"] = {arch};
    if (head == TextHeadKind::kSequenceClassification || head == TextHeadKind::kTokenClassification)
      cfg["num_labels"] = 2;
    ArchEntry a;
    a.info = {arch, f.model_type, TextHeadTask(head)};
    a.example_config = cfg;
    a.scale = [fam](const nlohmann::json& c) { return Scale(*fam, c); };
    a.build = [fam, h = head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(Recipe r, ParseRecipe(*fam, Normalize(*fam, spec.tiny_config)));
      if (h == TextHeadKind::kQuestionAnswering && !fam->qa_base.empty())
        r.n.head_base = fam->qa_base;
      return BuildDecoderModel(std::move(spec), std::move(r), h);
    };
    a.state_dict = f.state_dict;
    a.pools_last_non_pad = head == TextHeadKind::kSequenceClassification;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace ts::zoo::internal::decoder
