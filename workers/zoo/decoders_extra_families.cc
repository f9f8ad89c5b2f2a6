// Zoo: the families of the recipe-driven decoder (decoders_extra_internal.h): their config
// parsing into a Recipe, their example configs and their registration. See decoders_extra.cc.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/decoders_extra_internal.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::dextra {
namespace {

using P = TinyProfile;

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive, got " + std::to_string(v));
  return OkStatus();
}

StatusOr<Act> ReadAct(const ConfigReader& r, const std::string& field, const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(field, def));
  Act a;
  if (name == "relu2") {
    a.a = Activation::kRelu;
    a.relu2 = true;
    return a;
  }
  TS_ASSIGN_OR_RETURN(a.a, ParseActivation(name, r.Name(field)));
  return a;
}

// Sizes, activation, eps, tie, pad and rotary parameters shared by every family.
Status ReadCore(const json& config, const Fields& f, const Defaults& d, Recipe& c) {
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int(f.vocab));
  TS_RETURN_IF_ERROR(Positive(r, f.vocab, c.vocab));
  TS_ASSIGN_OR_RETURN(c.hidden, r.Int(f.hidden));
  TS_RETURN_IF_ERROR(Positive(r, f.hidden, c.hidden));
  TS_ASSIGN_OR_RETURN(c.layers, r.Int(f.layers));
  TS_RETURN_IF_ERROR(Positive(r, f.layers, c.layers));
  TS_ASSIGN_OR_RETURN(c.heads, r.Int(f.heads));
  TS_RETURN_IF_ERROR(Positive(r, f.heads, c.heads));
  if (d.inter_mult > 0) {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter, d.inter_mult * c.hidden));
  } else {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter));
  }
  TS_RETURN_IF_ERROR(Positive(r, f.inter, c.inter));
  c.kv = c.heads;
  if (!f.kv.empty()) {
    TS_ASSIGN_OR_RETURN(c.kv, r.Int(f.kv, c.heads));
    TS_RETURN_IF_ERROR(Positive(r, f.kv, c.kv));
  }
  if (c.heads % c.kv != 0) {
    return r.Error(f.kv, "must divide " + f.heads + " (" + std::to_string(c.heads) + " % " +
                             std::to_string(c.kv) + " != 0)");
  }
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
  TS_ASSIGN_OR_RETURN(c.act, ReadAct(r, f.act, d.act));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double(f.eps, d.eps));
  if (!(c.eps > 0)) return r.Error(f.eps, "must be positive");
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", d.tie));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_token_id"));
    if (pad >= 0 && pad < c.vocab) c.pad = pad;
  }
  json rc = config;
  if (!r.Has("rope_theta")) rc["rope_theta"] = d.theta;
  TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rc, c.max_pos));
  c.rope_local = c.rope;
  c.rotary_dim = c.head_dim;
  c.window.assign(static_cast<size_t>(c.layers), std::nullopt);
  c.rope_on.assign(static_cast<size_t>(c.layers), true);
  c.rope_local_on.assign(static_cast<size_t>(c.layers), false);
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return OkStatus();
}

// A rotary fraction field (partial_rotary_factor, ...): rotary_dim = int(head_dim * factor).
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

// An absolute rotary_dim field (GPT-J, CodeGen); null: the whole head.
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

// Per-layer kinds: "layer_types" (transformers' list of "sliding_attention" / "full_attention"),
// else sliding_window_pattern p (layer i slides iff (i + 1) % p != 0), else `def_sliding`.
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


json LayerTypes(const std::vector<bool>& sliding) {
  json out = json::array();
  for (bool s : sliding) out.push_back(s ? "sliding_attention" : "full_attention");
  return out;
}

Family LlamaLike(const std::string& type, Defaults d, Fields f,
                 std::function<Status(const ConfigReader&, const json&, Recipe&)> tweak,
                 std::function<void(const json&, const Recipe&, json&)> extra = nullptr) {
  Family fam;
  fam.model_type = type;
  fam.f = f;
  fam.parse = [f, d, tweak](const json& config) -> StatusOr<Recipe> {
    if (!config.is_object()) return InvalidArgumentError("config: expected object");
    Recipe c;
    TS_RETURN_IF_ERROR(ReadCore(config, f, d, c));
    ConfigReader r(config);
    TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
    c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
    TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
    if (tweak) TS_RETURN_IF_ERROR(tweak(r, config, c));
    return c;
  };
  fam.scale_extra = std::move(extra);
  return fam;
}

Fields LlamaFields(bool head_dim, const std::string& eps = "rms_norm_eps",
                   const std::string& act = "hidden_act") {
  Fields f;
  if (head_dim) f.head_dim = "head_dim";
  f.eps = eps;
  f.act = act;
  return f;
}

Status NoTweak(const ConfigReader&, const json&, Recipe&) { return OkStatus(); }

// Mistral-style window on every layer (or per layer_types), off when null or >= the context.
Status MistralWindow(const ConfigReader& r, const json& config, Recipe& c) {
  std::optional<int64_t> w;
  TS_RETURN_IF_ERROR(ReadWindow(r, w));
  if (!w || *w >= c.max_pos) return OkStatus();
  TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(config, c.layers, true));
  for (int64_t i = 0; i < c.layers; ++i)
    if (sl[static_cast<size_t>(i)]) c.window[static_cast<size_t>(i)] = w;
  return OkStatus();
}

void ScaleWindowPattern(const json& real, const Recipe& rc, json& t) {
  bool any = false;
  for (const auto& w : rc.window) any = any || w.has_value();
  if (!any) {
    if (t.contains("sliding_window") && t["sliding_window"].is_number())
      t["sliding_window"] = nullptr;
    t.erase("layer_types");
    return;
  }
  std::vector<bool> sl;
  for (const auto& w : rc.window) sl.push_back(w.has_value());
  t["sliding_window"] = std::min<int64_t>(real["sliding_window"].get<int64_t>(), P::kWindow);
  if (real.contains("layer_types") || real.contains("sliding_window_pattern")) {
    t.erase("sliding_window_pattern");
    t["layer_types"] = LayerTypes(TinyPattern(sl, rc));
  }
}

}  // namespace

std::vector<Family> Families() {
  std::vector<Family> v;
  v.push_back(LlamaLike("helium", Defaults{0, 4096, "silu", 1e-8, false, 100000.0, 128},
                        LlamaFields(true), NoTweak));
  v.push_back(LlamaLike("ministral", Defaults{0, 32768, "silu", 1e-6, false, 10000.0, 0},
                        LlamaFields(true), MistralWindow, ScaleWindowPattern));
  v.push_back(LlamaLike("arcee", Defaults{0, 4096, "relu2", 1e-5, false, 10000.0, 0},
                        LlamaFields(true), [](const ConfigReader&, const json&, Recipe& c) {
                          c.mlp = Mlp::kPlain;  // ArceeMLP: down(act(up(x)))
                          return OkStatus();
                        }));
  v.push_back(LlamaLike("seed_oss", Defaults{0, 524288, "silu", 1e-6, false, 10000.0, 0},
                        LlamaFields(true),
                        [](const ConfigReader& r, const json&, Recipe& c) -> Status {
                          TS_ASSIGN_OR_RETURN(c.o_bias, r.Bool("attention_out_bias", false));
                          return OkStatus();
                        }));
  v.push_back(LlamaLike(
      "smollm3", Defaults{0, 32768, "silu", 1e-6, true, 2000000.0, 0}, LlamaFields(false),
      [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        // no_rope_layers[i] == 1: layer i uses rotary; default every no_rope_layer_interval-th
        // layer is NoPE.
        TS_ASSIGN_OR_RETURN(int64_t interval, r.Int("no_rope_layer_interval", 4));
        TS_RETURN_IF_ERROR(Positive(r, "no_rope_layer_interval", interval));
        for (int64_t i = 0; i < c.layers; ++i)
          c.rope_on[static_cast<size_t>(i)] = (i + 1) % interval != 0;
        if (r.Has("no_rope_layers")) {
          const json& l = config["no_rope_layers"];
          if (!l.is_array() || static_cast<int64_t>(l.size()) != c.layers) {
            return r.Error("no_rope_layers", "expected num_hidden_layers integers");
          }
          for (size_t i = 0; i < l.size(); ++i) {
            if (!l[i].is_number_integer()) return r.Error("no_rope_layers", "expected integers");
            c.rope_on[i] = l[i].get<int64_t>() != 0;
          }
        }
        TS_ASSIGN_OR_RETURN(bool sw, r.Bool("use_sliding_window", false));
        if (sw) return r.Error("use_sliding_window", "true is not supported by the zoo");
        return OkStatus();
      },
      [](const json&, const Recipe& rc, json& t) {
        json l = json::array();
        for (bool b : TinyPattern(rc.rope_on, rc)) l.push_back(b ? 1 : 0);
        t["no_rope_layers"] = l;
        t["no_rope_layer_interval"] = 2;
      }));
  auto glm = [](bool glm4) {
    return [glm4](const ConfigReader& r, const json&, Recipe& c) -> Status {
      c.mlp = Mlp::kFusedGateUp;
      c.interleaved = true;
      TS_RETURN_IF_ERROR(ReadPartial(r, "partial_rotary_factor", 0.5, c));
      TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", true));
      c.q_bias = c.k_bias = c.v_bias = ab;  // o_proj has no bias
      c.o_bias = false;
      c.mlp_bias = false;
      if (glm4) {
        c.block = Block::kSandwich;
        c.n.post1 = "post_self_attn_layernorm";
        c.n.post2 = "post_mlp_layernorm";
      }
      return OkStatus();
    };
  };
  v.push_back(LlamaLike("glm", Defaults{0, 131072, "silu", 1.5625e-07, false, 10000.0, 0},
                        LlamaFields(true), glm(false)));
  v.push_back(LlamaLike("glm4", Defaults{0, 32768, "silu", 1.5625e-07, false, 10000.0, 0},
                        LlamaFields(true), glm(true)));
  v.push_back(LlamaLike("ernie4_5", Defaults{0, 131072, "silu", 1e-5, true, 500000.0, 0},
                        LlamaFields(true),
                        [](const ConfigReader& r, const json&, Recipe& c) -> Status {
                          c.interleaved = true;  // GLM-style rotary over the whole head
                          TS_ASSIGN_OR_RETURN(bool b, r.Bool("use_bias", false));
                          c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = b;
                          return OkStatus();
                        }));
  v.push_back(LlamaLike(
      "granite", Defaults{0, 2048, "silu", 1e-6, true, 10000.0, 0}, LlamaFields(false),
      [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.embed_scale, r.Double("embedding_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(c.residual_mult, r.Double("residual_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(c.attn_scale, r.Double("attention_multiplier", 1.0));
        TS_ASSIGN_OR_RETURN(double ls, r.Double("logits_scaling", 1.0));
        if (!(ls > 0)) return r.Error("logits_scaling", "must be positive");
        if (!(c.attn_scale > 0)) return r.Error("attention_multiplier", "must be positive");
        c.logit_mult = 1.0 / ls;
        return OkStatus();
      },
      [](const json& real, const Recipe&, json& t) {
        // attention_multiplier is 1/head_dim in the checkpoints: keep that relation.
        const double real_hd = static_cast<double>(real["hidden_size"].get<int64_t>()) /
                               static_cast<double>(real["num_attention_heads"].get<int64_t>());
        const double tiny_hd = static_cast<double>(t["hidden_size"].get<int64_t>()) /
                               static_cast<double>(t["num_attention_heads"].get<int64_t>());
        t["attention_multiplier"] = real.value("attention_multiplier", 1.0) * real_hd / tiny_hd;
      }));
  v.push_back(LlamaLike("olmo", Defaults{0, 2048, "silu", 1e-5, false, 10000.0, 0},
                        LlamaFields(false),
                        [](const ConfigReader& r, const json&, Recipe& c) -> Status {
                          c.norm = Norm::kNonParam;  // OlmoLayerNorm: no weight, no bias
                          c.eps = 1e-5;
                          if (r.Has("clip_qkv")) {
                            TS_ASSIGN_OR_RETURN(c.clip_qkv, r.Double("clip_qkv"));
                            if (!(c.clip_qkv > 0)) return r.Error("clip_qkv", "must be positive");
                          }
                          return OkStatus();
                        }));
  {
    Family nem = LlamaLike("nemotron", Defaults{0, 4096, "relu2", 1e-5, false, 10000.0, 0},
                           LlamaFields(true, "norm_eps"),
                           [](const ConfigReader& r, const json&, Recipe& c) -> Status {
                             c.norm = Norm::kLayerNorm1P;
                             c.mlp = Mlp::kPlain;
                             return ReadPartial(r, "partial_rotary_factor", 0.5, c);
                           });
    v.push_back(nem);
  }
  {
    Family ex = LlamaLike(
        "exaone4", Defaults{0, 2048, "silu", 1e-5, true, 10000.0, 0}, LlamaFields(true),
        [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
          c.block = Block::kPost;
          c.qk_norm = QkNorm::kPerHeadRms;
          c.n.ln1 = "";
          c.n.ln2 = "";
          c.n.post1 = "post_attention_layernorm";
          c.n.post2 = "post_feedforward_layernorm";
          std::optional<int64_t> w;
          TS_RETURN_IF_ERROR(ReadWindow(r, w));
          if (!w) return OkStatus();
          // With a window, sliding layers use rotary and full layers are NoPE.
          TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(config, c.layers, true));
          for (int64_t i = 0; i < c.layers; ++i) {
            const size_t u = static_cast<size_t>(i);
            if (sl[u]) c.window[u] = *w < c.max_pos ? w : std::nullopt;
            c.rope_on[u] = sl[u];
          }
          return OkStatus();
        },
        [](const json& real, const Recipe& rc, json& t) {
          if (!real.contains("sliding_window") || real["sliding_window"].is_null()) return;
          std::vector<bool> sl;
          for (bool b : rc.rope_on) sl.push_back(b);
          t["sliding_window"] =
              std::min<int64_t>(real["sliding_window"].get<int64_t>(), P::kWindow);
          t.erase("sliding_window_pattern");
          t["layer_types"] = LayerTypes(TinyPattern(sl, rc));
        });
    v.push_back(ex);
  }
  {
    Family g3 = LlamaLike(
        "gemma3_text", Defaults{0, 131072, "gelu_pytorch_tanh", 1e-6, true, 1000000.0, 256},
        LlamaFields(true, "rms_norm_eps", "hidden_activation"),
        [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
          c.norm = Norm::kGemmaRms;
          c.qk_norm = QkNorm::kPerHeadGemma;
          c.block = Block::kSandwich;
          c.n.ln2 = "pre_feedforward_layernorm";
          c.n.post1 = "post_attention_layernorm";
          c.n.post2 = "post_feedforward_layernorm";
          c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
          TS_ASSIGN_OR_RETURN(double qpas, r.Double("query_pre_attn_scalar", 256.0));
          if (!(qpas > 0)) return r.Error("query_pre_attn_scalar", "must be positive");
          c.attn_scale = 1.0 / std::sqrt(qpas);
          for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
            if (r.Has(cap))
              return r.Error(cap, "soft-capping is not supported by the zoo (use gemma2)");
          }
          TS_ASSIGN_OR_RETURN(double local, r.Double("rope_local_base_freq", 10000.0));
          c.rope_local = RopeConfig();
          c.rope_local.theta = local;
          c.rope_local.max_position_embeddings = c.max_pos;
          std::optional<int64_t> w = 4096;
          TS_RETURN_IF_ERROR(ReadWindow(r, w));
          json cfg = config;
          if (!r.Has("layer_types") && !r.Has("sliding_window_pattern"))
            cfg["sliding_window_pattern"] = 6;
          TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(cfg, c.layers, true));
          for (int64_t i = 0; i < c.layers; ++i) {
            const size_t u = static_cast<size_t>(i);
            if (sl[u]) c.window[u] = *w < c.max_pos ? w : std::nullopt;
            c.rope_local_on[u] = sl[u];
          }
          return OkStatus();
        },
        [](const json& real, const Recipe& rc, json& t) {
          t["query_pre_attn_scalar"] = std::max<int64_t>(
              1, std::llround(real.value("query_pre_attn_scalar", 256.0) *
                              static_cast<double>(t["head_dim"].get<int64_t>()) /
                              static_cast<double>(real.value("head_dim", int64_t{256}))));
          t["sliding_window"] =
              std::min<int64_t>(real.value("sliding_window", int64_t{4096}), P::kWindow);
          t.erase("sliding_window_pattern");
          t["layer_types"] = LayerTypes(TinyPattern(rc.rope_local_on, rc));
        });
    v.push_back(g3);
  }
  auto cohere = [](bool v2) {
    return [v2](const ConfigReader& r, const json& config, Recipe& c) -> Status {
      c.norm = Norm::kLayerNormNoBias;
      c.block = Block::kParallel1;
      c.interleaved = true;
      TS_ASSIGN_OR_RETURN(c.logit_mult, r.Double("logit_scale", 0.0625));
      TS_ASSIGN_OR_RETURN(bool qk, r.Bool("use_qk_norm", false));
      if (qk) return r.Error("use_qk_norm", "true is not supported by the zoo");
      if (!v2) return OkStatus();
      // Cohere2: sliding layers use rotary; full layers are NoPE.
      std::optional<int64_t> w = 4096;
      TS_RETURN_IF_ERROR(ReadWindow(r, w));
      json cfg = config;
      if (!r.Has("layer_types") && !r.Has("sliding_window_pattern"))
        cfg["sliding_window_pattern"] = 4;
      TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(cfg, c.layers, true));
      for (int64_t i = 0; i < c.layers; ++i) {
        const size_t u = static_cast<size_t>(i);
        if (sl[u]) c.window[u] = *w < c.max_pos ? w : std::nullopt;
        c.rope_on[u] = sl[u];
      }
      return OkStatus();
    };
  };
  {
    Family co = LlamaLike("cohere", Defaults{0, 8192, "silu", 1e-5, true, 10000.0, 0},
                          LlamaFields(false, "layer_norm_eps"), cohere(false));
    v.push_back(co);
    Family co2 = LlamaLike("cohere2", Defaults{0, 8192, "silu", 1e-5, true, 10000.0, 0},
                           LlamaFields(false, "layer_norm_eps"), cohere(true),
                           [](const json& real, const Recipe& rc, json& t) {
                             t["sliding_window"] = std::min<int64_t>(
                                 real.value("sliding_window", int64_t{4096}), P::kWindow);
                             t.erase("sliding_window_pattern");
                             t["layer_types"] = LayerTypes(TinyPattern(rc.rope_on, rc));
                           });
    v.push_back(co2);
  }
  {
    Fields pf = LlamaFields(false, "layer_norm_eps");
    pf.kv = "";
    Family pe = LlamaLike("persimmon", Defaults{0, 16384, "relu2", 1e-5, false, 25000.0, 0}, pf,
                          [](const ConfigReader& r, const json&, Recipe& c) -> Status {
                            c.norm = Norm::kLayerNorm;
                            c.qkv = Qkv::kPerHead;
                            c.mlp = Mlp::kPlain;
                            c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
                            TS_ASSIGN_OR_RETURN(bool qk, r.Bool("qk_layernorm", true));
                            if (qk) c.qk_norm = QkNorm::kPerHeadLayerNorm;
                            c.n.qkv = "query_key_value";
                            c.n.o = "dense";
                            c.n.qn = "q_layernorm";
                            c.n.kn = "k_layernorm";
                            c.n.up = "dense_h_to_4h";
                            c.n.down = "dense_4h_to_h";
                            c.n.final_norm = "final_layernorm";
                            return ReadPartial(r, "partial_rotary_factor", 0.5, c);
                          });
    v.push_back(pe);
  }

  // ---- Non-llama layouts.
  {
    // GPT-J and CodeGen: parallel block over one LayerNorm, interleaved rotary on rotary_dim.
    auto gptj_like = [](bool codegen) {
      Family fam;
      fam.model_type = codegen ? "codegen" : "gptj";
      fam.f.hidden = "n_embd";
      fam.f.inter = "n_inner";
      fam.f.layers = "n_layer";
      fam.f.heads = "n_head";
      fam.f.kv = "";
      fam.f.max_pos = "n_positions";
      fam.f.act = "activation_function";
      fam.f.eps = "layer_norm_epsilon";
      const Fields f = fam.f;
      fam.parse = [f, codegen](const json& config) -> StatusOr<Recipe> {
        if (!config.is_object()) return InvalidArgumentError("config: expected object");
        Recipe c;
        TS_RETURN_IF_ERROR(
            ReadCore(config, f, Defaults{4, 2048, "gelu_new", 1e-5, false, 10000.0, 0}, c));
        ConfigReader r(config);
        TS_RETURN_IF_ERROR(ReadRotaryDim(r, c));
        c.rope = RopeConfig();  // fixed base 10000 (create_sinusoidal_positions)
        c.rope.max_position_embeddings = c.max_pos;
        c.norm = Norm::kLayerNorm;
        c.block = Block::kParallel1;
        c.interleaved = true;
        c.mlp = Mlp::kPlain;
        c.mlp_bias = c.lm_head_bias = true;
        c.embed_padding_idx = false;
        Names& n = c.n;
        n.head_base = "transformer.";
        n.embed = "wte";
        n.layers = "h.";
        n.ln1 = "ln_1";
        n.attn = "attn.";
        n.o = "out_proj";
        n.up = "fc_in";
        n.down = "fc_out";
        n.final_norm = "ln_f";
        if (codegen) {
          c.qkv = Qkv::kCodeGen;
          n.qkv = "qkv_proj";
          if (c.heads % 4 != 0) return r.Error("n_head", "must be a multiple of mp_num = 4");
        }
        return c;
      };
      fam.scale_extra = [](const json& real, const Recipe& rc, json& t) {
        if (!real.contains("rotary_dim") || real["rotary_dim"].is_null()) return;
        const int64_t hd = t["n_embd"].get<int64_t>() / t["n_head"].get<int64_t>();
        const double frac = static_cast<double>(rc.rotary_dim) / static_cast<double>(rc.head_dim);
        t["rotary_dim"] = std::max<int64_t>(2, std::lround(frac * static_cast<double>(hd)) / 2 * 2);
      };
      return fam;
    };
    v.push_back(gptj_like(false));
    v.push_back(gptj_like(true));
  }
  {
    Family fam;
    fam.model_type = "falcon";
    fam.aliases = {{"n_head", "num_attention_heads"}, {"n_layer", "num_hidden_layers"}};
    fam.f.inter = "ffn_hidden_size";
    fam.f.kv = "num_kv_heads";
    fam.f.act = "activation";
    fam.f.eps = "layer_norm_epsilon";
    const Fields f = fam.f;
    fam.parse = [f](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(ReadCore(config, f, Defaults{4, 2048, "gelu", 1e-5, true, 10000.0, 0}, c));
      ConfigReader r(config);
      TS_ASSIGN_OR_RETURN(bool new_arch, r.Bool("new_decoder_architecture", false));
      TS_ASSIGN_OR_RETURN(bool mq, r.Bool("multi_query", true));
      TS_ASSIGN_OR_RETURN(bool parallel, r.Bool("parallel_attn", true));
      TS_ASSIGN_OR_RETURN(bool alibi, r.Bool("alibi", false));
      TS_ASSIGN_OR_RETURN(bool bias, r.Bool("bias", false));
      TS_ASSIGN_OR_RETURN(bool post, r.Bool("apply_residual_connection_post_layernorm", false));
      if (post)
        return r.Error("apply_residual_connection_post_layernorm",
                       "true is not supported by the zoo");
      if (!new_arch) c.kv = mq ? 1 : c.heads;
      c.qkv = new_arch || mq ? Qkv::kGrouped : Qkv::kPerHead;
      c.norm = Norm::kLayerNorm;
      c.mlp = Mlp::kPlain;
      c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = bias;
      c.embed_padding_idx = false;
      if (alibi) {
        c.pos = Pos::kNone;
        c.alibi = Alibi::kFalcon;
      }
      Names& n = c.n;
      n.head_base = "transformer.";
      n.embed = "word_embeddings";
      n.layers = "h.";
      n.attn = "self_attention.";
      n.qkv = "query_key_value";
      n.o = "dense";
      n.up = "dense_h_to_4h";
      n.down = "dense_4h_to_h";
      n.final_norm = "ln_f";
      n.token_cls = "classifier";
      if (!parallel) {
        c.block = Block::kPre;
      } else if (new_arch) {
        TS_ASSIGN_OR_RETURN(int64_t lns, r.Int("num_ln_in_parallel_attn", 2));
        if (lns == 2) {
          c.block = Block::kParallel2;
          n.ln1 = "ln_attn";
          n.ln2 = "ln_mlp";
        } else {
          c.block = Block::kParallel1;
        }
      } else {
        c.block = Block::kParallel1;
      }
      return c;
    };
    v.push_back(fam);
  }
  {
    Family fam;
    fam.model_type = "bloom";
    fam.aliases = {{"n_embed", "hidden_size"},
                   {"num_attention_heads", "n_head"},
                   {"num_hidden_layers", "n_layer"}};
    fam.f.inter = "";
    fam.f.layers = "n_layer";
    fam.f.heads = "n_head";
    fam.f.kv = "";
    fam.f.max_pos = "";
    fam.f.act = "";
    fam.f.eps = "layer_norm_epsilon";
    const Fields f = fam.f;
    fam.parse = [f](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(
          ReadCore(config, f, Defaults{4, 2048, "gelu_pytorch_tanh", 1e-5, true, 10000.0, 0}, c));
      ConfigReader r(config);
      TS_ASSIGN_OR_RETURN(bool post, r.Bool("apply_residual_connection_post_layernorm", false));
      if (post)
        return r.Error("apply_residual_connection_post_layernorm",
                       "true is not supported by the zoo");
      c.norm = Norm::kLayerNorm;
      c.pos = Pos::kNone;
      c.alibi = Alibi::kBloom;
      c.qkv = Qkv::kPerHead;
      c.mlp = Mlp::kPlain;
      c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
      c.embed_padding_idx = false;
      Names& n = c.n;
      n.head_base = "transformer.";
      n.embed = "word_embeddings";
      n.emb_ln = "word_embeddings_layernorm";
      n.layers = "h.";
      n.attn = "self_attention.";
      n.qkv = "query_key_value";
      n.o = "dense";
      n.up = "dense_h_to_4h";
      n.down = "dense_4h_to_h";
      n.final_norm = "ln_f";
      n.token_cls = "classifier";
      return c;
    };
    v.push_back(fam);
  }
  {
    Family fam;
    fam.model_type = "mpt";
    fam.f.hidden = "d_model";
    fam.f.inter = "";
    fam.f.layers = "n_layers";
    fam.f.heads = "n_heads";
    fam.f.kv = "";
    fam.f.max_pos = "max_seq_len";
    fam.f.act = "";
    fam.f.eps = "layer_norm_epsilon";
    const Fields f = fam.f;
    fam.parse = [f](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      ConfigReader r(config);
      TS_ASSIGN_OR_RETURN(int64_t ratio, r.Int("expansion_ratio", 4));
      TS_RETURN_IF_ERROR(Positive(r, "expansion_ratio", ratio));
      Recipe c;
      TS_RETURN_IF_ERROR(
          ReadCore(config, f, Defaults{ratio, 2048, "gelu", 1e-5, true, 10000.0, 0}, c));
      TS_ASSIGN_OR_RETURN(bool no_bias, r.Bool("no_bias", true));
      if (!no_bias) return r.Error("no_bias", "false is not supported by the zoo");
      json ac = config.contains("attn_config") && config["attn_config"].is_object()
                    ? config["attn_config"]
                    : json::object();
      ConfigReader a(ac, "attn_config.");
      TS_ASSIGN_OR_RETURN(bool alibi, a.Bool("alibi", true));
      if (!alibi) return a.Error("alibi", "false is not supported by the zoo");
      TS_ASSIGN_OR_RETURN(c.alibi_bias_max, a.Double("alibi_bias_max", 8.0));
      TS_ASSIGN_OR_RETURN(bool qk_ln, a.Bool("qk_ln", false));
      if (qk_ln) return a.Error("qk_ln", "true is not supported by the zoo");
      if (a.Has("clip_qkv")) {
        TS_ASSIGN_OR_RETURN(c.clip_qkv, a.Double("clip_qkv"));
        if (!(c.clip_qkv > 0)) return a.Error("clip_qkv", "must be positive");
      }
      if (a.Has("softmax_scale")) {
        TS_ASSIGN_OR_RETURN(c.attn_scale, a.Double("softmax_scale"));
        if (!(c.attn_scale > 0)) return a.Error("softmax_scale", "must be positive");
      }
      c.norm = Norm::kLayerNormNoBias;
      c.pos = Pos::kNone;
      c.alibi = Alibi::kMpt;
      c.qkv = Qkv::kFused;
      c.mlp = Mlp::kPlain;
      c.embed_padding_idx = false;
      Names& n = c.n;
      n.head_base = "transformer.";
      n.embed = "wte";
      n.layers = "blocks.";
      n.ln1 = "norm_1";
      n.ln2 = "norm_2";
      n.attn = "attn.";
      n.qkv = "Wqkv";
      n.o = "out_proj";
      n.mlp = "ffn.";
      n.final_norm = "norm_f";
      n.token_cls = "classifier";
      return c;
    };
    v.push_back(fam);
  }
  // OPT, XGLM, BioGPT: BART-style decoder layers (self_attn_layer_norm, fc1/fc2, final_layer_norm).
  auto bart_like = [](Recipe& c) {
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
  };
  {
    Family fam;
    fam.model_type = "opt";
    fam.f.inter = "ffn_dim";
    fam.f.kv = "";
    fam.f.act = "activation_function";
    fam.f.eps = "";
    const Fields f = fam.f;
    fam.parse = [f, bart_like](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(ReadCore(config, f, Defaults{0, 2048, "relu", 1e-5, true, 10000.0, 0}, c));
      ConfigReader r(config);
      TS_ASSIGN_OR_RETURN(bool before, r.Bool("do_layer_norm_before", true));
      if (!before) return r.Error("do_layer_norm_before", "false is not supported by the zoo");
      TS_ASSIGN_OR_RETURN(int64_t proj, r.Int("word_embed_proj_dim", c.hidden));
      if (proj != c.hidden) return r.Error("word_embed_proj_dim", "must equal hidden_size");
      TS_ASSIGN_OR_RETURN(bool affine, r.Bool("layer_norm_elementwise_affine", true));
      if (!affine)
        return r.Error("layer_norm_elementwise_affine", "false is not supported by the zoo");
      TS_ASSIGN_OR_RETURN(bool bias, r.Bool("enable_bias", true));
      bart_like(c);
      c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = bias;
      c.pos = Pos::kLearned;
      c.pos_offset = 2;
      c.pos_from_mask = true;
      Names& n = c.n;
      n.head_base = "model.decoder.";
      n.model_base = "decoder.";
      n.pos = "embed_positions";
      n.final_norm = "final_layer_norm";
      return c;
    };
    fam.scale_extra = [](const json&, const Recipe&, json& t) {
      if (t.contains("word_embed_proj_dim")) t["word_embed_proj_dim"] = t["hidden_size"];
    };
    v.push_back(fam);
  }
  {
    Family fam;
    fam.model_type = "gpt_neo";
    fam.f.layers = "num_layers";
    fam.f.heads = "num_heads";
    fam.f.kv = "";
    fam.f.act = "activation_function";
    fam.f.eps = "layer_norm_epsilon";
    const Fields f = fam.f;
    fam.parse = [f](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(
          ReadCore(config, f, Defaults{4, 2048, "gelu_new", 1e-5, true, 10000.0, 0}, c));
      ConfigReader r(config);
      c.norm = Norm::kLayerNorm;
      c.pos = Pos::kLearned;
      c.attn_scale = 1.0;  // GPT-Neo does not scale attention scores
      c.o_bias = c.mlp_bias = true;
      c.mlp = Mlp::kPlain;
      c.embed_padding_idx = false;
      TS_ASSIGN_OR_RETURN(int64_t window, r.Int("window_size", 256));
      TS_RETURN_IF_ERROR(Positive(r, "window_size", window));
      // attention_types: [[["global", "local"], 12]] -> per-layer kinds.
      std::vector<bool> local;
      if (r.Has("attention_types")) {
        for (const auto& item : config["attention_types"]) {
          if (!item.is_array() || item.size() != 2 || !item[0].is_array() ||
              !item[1].is_number_integer()) {
            return r.Error("attention_types", "expected [[kinds, repeat], ...]");
          }
          for (int64_t k = 0; k < item[1].get<int64_t>(); ++k) {
            for (const auto& kind : item[0]) {
              if (!kind.is_string() || (kind != "global" && kind != "local")) {
                return r.Error("attention_types", "kinds must be 'global' or 'local'");
              }
              local.push_back(kind == "local");
            }
          }
        }
      } else {
        for (int64_t i = 0; i < c.layers; ++i) local.push_back(i % 2 == 1);
      }
      if (static_cast<int64_t>(local.size()) != c.layers) {
        return r.Error("attention_types", "expands to " + std::to_string(local.size()) +
                                              " layers, num_layers is " + std::to_string(c.layers));
      }
      for (int64_t i = 0; i < c.layers; ++i)
        if (local[static_cast<size_t>(i)]) c.window[static_cast<size_t>(i)] = window;
      Names& n = c.n;
      n.head_base = "transformer.";
      n.embed = "wte";
      n.pos = "wpe";
      n.layers = "h.";
      n.ln1 = "ln_1";
      n.ln2 = "ln_2";
      n.attn = "attn.attention.";
      n.o = "out_proj";
      n.up = "c_fc";
      n.down = "c_proj";
      n.final_norm = "ln_f";
      n.token_cls = "classifier";
      return c;
    };
    fam.scale_extra = [](const json& real, const Recipe& rc, json& t) {
      std::vector<bool> local;
      for (const auto& w : rc.window) local.push_back(w.has_value());
      std::vector<bool> tiny = TinyPattern(local, rc);
      json kinds = json::array();
      for (bool l : tiny) kinds.push_back(l ? "local" : "global");
      t["attention_types"] = json::array({json::array({kinds, 1})});
      t["window_size"] = std::min<int64_t>(real.value("window_size", int64_t{256}), P::kWindow);
    };
    v.push_back(fam);
  }
  {
    Family fam;
    fam.model_type = "xglm";
    fam.f.hidden = "d_model";
    fam.f.inter = "ffn_dim";
    fam.f.layers = "num_layers";
    fam.f.heads = "attention_heads";
    fam.f.kv = "";
    fam.f.act = "activation_function";
    fam.f.eps = "";
    const Fields f = fam.f;
    fam.parse = [f, bart_like](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(ReadCore(config, f, Defaults{0, 2048, "gelu", 1e-5, true, 10000.0, 0}, c));
      ConfigReader r(config);
      bart_like(c);
      TS_ASSIGN_OR_RETURN(bool scale, r.Bool("scale_embedding", true));
      if (scale) c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
      c.pos = Pos::kSinusoidal;
      c.pos_offset = 2;
      c.n.final_norm = "layer_norm";
      return c;
    };
    v.push_back(fam);
  }
  {
    Family fam;
    fam.model_type = "biogpt";
    fam.f.kv = "";
    fam.f.eps = "layer_norm_eps";
    const Fields f = fam.f;
    fam.parse = [f, bart_like](const json& config) -> StatusOr<Recipe> {
      if (!config.is_object()) return InvalidArgumentError("config: expected object");
      Recipe c;
      TS_RETURN_IF_ERROR(
          ReadCore(config, f, Defaults{0, 1024, "gelu", 1e-12, true, 10000.0, 0}, c));
      ConfigReader r(config);
      bart_like(c);
      TS_ASSIGN_OR_RETURN(bool scale, r.Bool("scale_embedding", true));
      if (scale) c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
      c.pos = Pos::kLearned;
      c.pos_offset = 2;
      c.pos_from_mask = true;
      Names& n = c.n;
      n.head_base = "biogpt.";
      n.pos = "embed_positions";
      n.final_norm = "layer_norm";
      n.lm_head = "output_projection";
      n.token_cls = "classifier";
      return c;
    };
    v.push_back(fam);
  }
  return v;
}

json Normalize(const Family& fam, const json& config) {
  if (!config.is_object()) return config;
  json c = config;
  for (const auto& [alias, name] : fam.aliases) {
    if (!c.contains(alias)) continue;
    if (!c.contains(name) || c[name].is_null()) c[name] = c[alias];
    c.erase(alias);
  }
  return c;
}

// Llama-style config and names, with the family's defaults; `tweak` adjusts the recipe.
}  // namespace ts::zoo::internal::dextra

namespace ts::zoo::internal {
namespace {

using dextra::Head;

struct HeadNames {
  const char *causal_lm, *seq_cls, *token_cls, *qa, *base;
};

struct Entry {
  const char* model_type;
  HeadNames heads;
  const char* example;  // modelled on the public checkpoint named beside it
};

const Entry kEntries[] = {
    // kyutai/helium-1-preview-2b
    {"helium",
     {"HeliumForCausalLM", "HeliumForSequenceClassification", "HeliumForTokenClassification", "",
      "HeliumModel"},
     R"({"hidden_size":2560,"intermediate_size":7040,"num_attention_heads":20,"num_key_value_heads":20,
         "head_dim":128,"num_hidden_layers":24,"vocab_size":48000,"max_position_embeddings":4096,
         "rms_norm_eps":1e-8,"rope_theta":100000.0,"hidden_act":"silu","attention_bias":false,
         "mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":3,"bos_token_id":1,"eos_token_id":2})"},
    // mistralai/Ministral-8B-Instruct-2410 (interleaved sliding / full layers)
    {"ministral",
     {"MinistralForCausalLM", "MinistralForSequenceClassification",
      "MinistralForTokenClassification", "MinistralForQuestionAnswering", "MinistralModel"},
     R"({"hidden_size":4096,"intermediate_size":12288,"num_attention_heads":32,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":36,"vocab_size":131072,"max_position_embeddings":32768,
         "rms_norm_eps":1e-5,"rope_theta":100000000.0,"hidden_act":"silu","sliding_window":4096,
         "layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention"],
         "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})"},
    // arcee-ai/AFM-4.5B-Base
    {"arcee",
     {"ArceeForCausalLM", "ArceeForSequenceClassification", "ArceeForTokenClassification",
      "ArceeForQuestionAnswering", "ArceeModel"},
     R"({"hidden_size":2560,"intermediate_size":18432,"num_attention_heads":20,"num_key_value_heads":4,
         "head_dim":128,"num_hidden_layers":36,"vocab_size":128004,"max_position_embeddings":65536,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"relu2",
         "rope_scaling":{"rope_type":"yarn","factor":20.0,"original_max_position_embeddings":4096,
           "beta_fast":32.0,"beta_slow":1.0},
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":128004,
         "bos_token_id":128000,"eos_token_id":128001})"},
    // ByteDance-Seed/Seed-OSS-36B-Base
    {"seed_oss",
     {"SeedOssForCausalLM", "SeedOssForSequenceClassification", "SeedOssForTokenClassification",
      "SeedOssForQuestionAnswering", "SeedOssModel"},
     R"({"hidden_size":5120,"intermediate_size":27648,"num_attention_heads":80,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":64,"vocab_size":155136,"max_position_embeddings":524288,
         "rms_norm_eps":1e-6,"rope_theta":10000000.0,"hidden_act":"silu","attention_bias":true,
         "attention_out_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"pad_token_id":1,
         "bos_token_id":0,"eos_token_id":2})"},
    // HuggingFaceTB/SmolLM3-3B (every fourth layer NoPE)
    {"smollm3",
     {"SmolLM3ForCausalLM", "SmolLM3ForSequenceClassification", "SmolLM3ForTokenClassification",
      "SmolLM3ForQuestionAnswering", "SmolLM3Model"},
     R"({"hidden_size":2048,"intermediate_size":11008,"num_attention_heads":16,"num_key_value_heads":4,
         "num_hidden_layers":36,"vocab_size":128256,"max_position_embeddings":65536,"rms_norm_eps":1e-6,
         "rope_theta":5000000.0,"hidden_act":"silu","no_rope_layer_interval":4,"use_sliding_window":false,
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,"pad_token_id":128004,
         "bos_token_id":128000,"eos_token_id":128012})"},
    // THUDM/glm-4-9b-hf
    {"glm",
     {"GlmForCausalLM", "GlmForSequenceClassification", "GlmForTokenClassification", "",
      "GlmModel"},
     R"({"hidden_size":4096,"intermediate_size":13696,"num_attention_heads":32,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":40,"vocab_size":151552,"max_position_embeddings":131072,
         "rms_norm_eps":1.5625e-07,"rope_theta":10000.0,"partial_rotary_factor":0.5,"hidden_act":"silu",
         "attention_bias":true,"tie_word_embeddings":false,"pad_token_id":151329,
         "eos_token_id":[151329,151336,151338]})"},
    // THUDM/GLM-4-9B-0414
    {"glm4",
     {"Glm4ForCausalLM", "Glm4ForSequenceClassification", "Glm4ForTokenClassification", "",
      "Glm4Model"},
     R"({"hidden_size":4096,"intermediate_size":13696,"num_attention_heads":32,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":40,"vocab_size":151552,"max_position_embeddings":32768,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"partial_rotary_factor":0.5,"hidden_act":"silu",
         "attention_bias":true,"tie_word_embeddings":false,"pad_token_id":151329,"eos_token_id":151329})"},
    // baidu/ERNIE-4.5-0.3B-PT
    {"ernie4_5",
     {"Ernie4_5ForCausalLM", "", "", "", "Ernie4_5Model"},
     R"({"hidden_size":1024,"intermediate_size":3072,"num_attention_heads":16,"num_key_value_heads":2,
         "head_dim":128,"num_hidden_layers":18,"vocab_size":103424,"max_position_embeddings":131072,
         "rms_norm_eps":1e-5,"rope_theta":500000.0,"hidden_act":"silu","use_bias":false,
         "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":1,"eos_token_id":2})"},
    // ibm-granite/granite-3.0-2b-base
    {"granite",
     {"GraniteForCausalLM", "", "", "", "GraniteModel"},
     R"({"hidden_size":2048,"intermediate_size":8192,"num_attention_heads":32,"num_key_value_heads":8,
         "num_hidden_layers":40,"vocab_size":49155,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
         "rope_theta":10000.0,"hidden_act":"silu","embedding_multiplier":12.0,
         "attention_multiplier":0.015625,"residual_multiplier":0.22,"logits_scaling":8.0,
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,"pad_token_id":0,
         "bos_token_id":0,"eos_token_id":0})"},
    // allenai/OLMo-7B-0424-hf
    {"olmo",
     {"OlmoForCausalLM", "", "", "", "OlmoModel"},
     R"({"hidden_size":4096,"intermediate_size":11008,"num_attention_heads":32,"num_key_value_heads":32,
         "num_hidden_layers":32,"vocab_size":50304,"max_position_embeddings":4096,"rope_theta":10000.0,
         "hidden_act":"silu","attention_bias":false,"clip_qkv":8.0,"tie_word_embeddings":false,
         "pad_token_id":1,"eos_token_id":50279})"},
    // nvidia/Minitron-4B-Base
    {"nemotron",
     {"NemotronForCausalLM", "NemotronForSequenceClassification", "NemotronForTokenClassification",
      "NemotronForQuestionAnswering", "NemotronModel"},
     R"({"hidden_size":3072,"intermediate_size":9216,"num_attention_heads":24,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":32,"vocab_size":256000,"max_position_embeddings":4096,
         "norm_eps":1e-5,"rope_theta":10000,"partial_rotary_factor":0.5,"hidden_act":"relu2",
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":false,"bos_token_id":2,
         "eos_token_id":3})"},
    // LGAI-EXAONE/EXAONE-4.0-32B (3 sliding layers, then a NoPE full layer)
    {"exaone4",
     {"Exaone4ForCausalLM", "Exaone4ForSequenceClassification", "Exaone4ForTokenClassification",
      "Exaone4ForQuestionAnswering", "Exaone4Model"},
     R"({"hidden_size":5120,"intermediate_size":27392,"num_attention_heads":40,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":64,"vocab_size":102400,"max_position_embeddings":131072,
         "rms_norm_eps":1e-5,"rope_theta":1000000.0,"hidden_act":"silu",
         "rope_scaling":{"rope_type":"llama3","factor":16.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
           "original_max_position_embeddings":8192},
         "sliding_window":4096,"sliding_window_pattern":"LLLG","tie_word_embeddings":false,
         "pad_token_id":0,"bos_token_id":1,"eos_token_id":361})"},
    // google/gemma-3-1b-pt
    {"gemma3_text",
     {"Gemma3ForCausalLM", "Gemma3TextForSequenceClassification", "", "", "Gemma3TextModel"},
     R"({"hidden_size":1152,"intermediate_size":6912,"num_attention_heads":4,"num_key_value_heads":1,
         "head_dim":256,"num_hidden_layers":26,"vocab_size":262144,"max_position_embeddings":32768,
         "rms_norm_eps":1e-6,"rope_theta":1000000.0,"rope_local_base_freq":10000.0,"rope_scaling":null,
         "hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":256,"sliding_window":512,
         "sliding_window_pattern":6,"attn_logit_softcapping":null,"final_logit_softcapping":null,
         "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":2,
         "eos_token_id":1})"},
    // CohereForAI/c4ai-command-r-v01
    {"cohere",
     {"CohereForCausalLM", "", "", "", "CohereModel"},
     R"({"hidden_size":8192,"intermediate_size":22528,"num_attention_heads":64,"num_key_value_heads":64,
         "num_hidden_layers":40,"vocab_size":256000,"max_position_embeddings":8192,"layer_norm_eps":1e-5,
         "logit_scale":0.0625,"rope_theta":8000000.0,"use_qk_norm":false,"hidden_act":"silu",
         "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":5,
         "eos_token_id":255001})"},
    // CohereForAI/c4ai-command-r7b-12-2024
    {"cohere2",
     {"Cohere2ForCausalLM", "", "", "", "Cohere2Model"},
     R"({"hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,"num_key_value_heads":8,
         "num_hidden_layers":32,"vocab_size":256000,"max_position_embeddings":8192,"layer_norm_eps":1e-5,
         "logit_scale":0.25,"rope_theta":50000.0,"sliding_window":4096,"sliding_window_pattern":4,
         "hidden_act":"silu","attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,
         "bos_token_id":5,"eos_token_id":255001})"},
    // adept/persimmon-8b-base
    {"persimmon",
     {"PersimmonForCausalLM", "PersimmonForSequenceClassification",
      "PersimmonForTokenClassification", "", "PersimmonModel"},
     R"({"hidden_size":4096,"intermediate_size":16384,"num_attention_heads":64,"num_hidden_layers":36,
         "vocab_size":262144,"max_position_embeddings":16384,"layer_norm_eps":1e-5,"hidden_act":"relu2",
         "qk_layernorm":true,"partial_rotary_factor":0.5,"rope_theta":25000.0,"tie_word_embeddings":false,
         "bos_token_id":71013,"eos_token_id":71013})"},
    // EleutherAI/gpt-j-6b
    {"gptj",
     {"GPTJForCausalLM", "GPTJForSequenceClassification", "", "GPTJForQuestionAnswering",
      "GPTJModel"},
     R"({"n_embd":4096,"n_head":16,"n_layer":28,"n_positions":2048,"rotary_dim":64,"n_inner":null,
         "activation_function":"gelu_new","vocab_size":50400,"layer_norm_epsilon":1e-5,
         "tie_word_embeddings":false,"bos_token_id":50256,"eos_token_id":50256})"},
    // Salesforce/codegen-350M-mono
    {"codegen",
     {"CodeGenForCausalLM", "", "", "", "CodeGenModel"},
     R"({"n_embd":1024,"n_head":16,"n_layer":20,"n_positions":2048,"n_ctx":2048,"rotary_dim":32,
         "n_inner":null,"activation_function":"gelu_new","vocab_size":51200,"layer_norm_epsilon":1e-5,
         "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":50256})"},
    // tiiuae/falcon-7b (multi-query, parallel attention, rotary)
    {"falcon",
     {"FalconForCausalLM", "FalconForSequenceClassification", "FalconForTokenClassification",
      "FalconForQuestionAnswering", "FalconModel"},
     R"({"hidden_size":4544,"num_attention_heads":71,"num_hidden_layers":32,"vocab_size":65024,
         "layer_norm_epsilon":1e-5,"multi_query":true,"parallel_attn":true,"new_decoder_architecture":false,
         "alibi":false,"bias":false,"apply_residual_connection_post_layernorm":false,"bos_token_id":11,
         "eos_token_id":11})"},
    // bigscience/bloom-560m
    {"bloom",
     {"BloomForCausalLM", "BloomForSequenceClassification", "BloomForTokenClassification",
      "BloomForQuestionAnswering", "BloomModel"},
     R"({"n_embed":1024,"num_attention_heads":16,"n_layer":24,"vocab_size":250880,"layer_norm_epsilon":1e-5,
         "apply_residual_connection_post_layernorm":false,"initializer_range":0.02,"pad_token_id":3,
         "bos_token_id":1,"eos_token_id":2,"slow_but_exact":false})"},
    // mosaicml/mpt-7b
    {"mpt",
     {"MptForCausalLM", "MptForSequenceClassification", "MptForTokenClassification",
      "MptForQuestionAnswering", "MptModel"},
     R"({"d_model":4096,"n_heads":32,"n_layers":32,"expansion_ratio":4,"max_seq_len":2048,"vocab_size":50432,
         "layer_norm_epsilon":1e-5,"no_bias":true,"norm_type":"low_precision_layernorm",
         "attn_config":{"alibi":true,"alibi_bias_max":8,"attn_type":"multihead_attention","clip_qkv":null,
           "qk_ln":false,"softmax_scale":null},
         "tie_word_embeddings":true,"eos_token_id":0})"},
    // facebook/opt-125m
    {"opt",
     {"OPTForCausalLM", "OPTForSequenceClassification", "", "OPTForQuestionAnswering", "OPTModel"},
     R"({"hidden_size":768,"ffn_dim":3072,"num_attention_heads":12,"num_hidden_layers":12,
         "max_position_embeddings":2048,"vocab_size":50272,"activation_function":"relu",
         "do_layer_norm_before":true,"word_embed_proj_dim":768,"enable_bias":true,
         "layer_norm_elementwise_affine":true,"pad_token_id":1,"bos_token_id":2,"eos_token_id":2})"},
    // EleutherAI/gpt-neo-125m
    {"gpt_neo",
     {"GPTNeoForCausalLM", "GPTNeoForSequenceClassification", "GPTNeoForTokenClassification",
      "GPTNeoForQuestionAnswering", "GPTNeoModel"},
     R"({"hidden_size":768,"num_heads":12,"num_layers":12,"attention_types":[[["global","local"],6]],
         "window_size":256,"max_position_embeddings":2048,"vocab_size":50257,"intermediate_size":null,
         "activation_function":"gelu_new","layer_norm_epsilon":1e-5,"bos_token_id":50256,
         "eos_token_id":50256})"},
    // facebook/xglm-564M
    {"xglm",
     {"XGLMForCausalLM", "", "", "", "XGLMModel"},
     R"({"d_model":1024,"ffn_dim":4096,"num_layers":24,"attention_heads":16,"max_position_embeddings":2048,
         "vocab_size":256008,"activation_function":"gelu","scale_embedding":true,"pad_token_id":1,
         "bos_token_id":0,"eos_token_id":2,"decoder_start_token_id":2})"},
    // microsoft/biogpt
    {"biogpt",
     {"BioGptForCausalLM", "BioGptForSequenceClassification", "BioGptForTokenClassification", "",
      "BioGptModel"},
     R"({"hidden_size":1024,"intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
         "max_position_embeddings":1024,"vocab_size":42384,"hidden_act":"gelu","scale_embedding":true,
         "layer_norm_eps":1e-12,"pad_token_id":1,"bos_token_id":0,"eos_token_id":2})"},
};

}  // namespace

std::vector<ArchEntry> DecoderExtraArchs() {
  std::vector<dextra::Family> families = dextra::Families();
  std::vector<ArchEntry> out;
  for (const Entry& e : kEntries) {
    auto it = std::find_if(families.begin(), families.end(),
                           [&](const dextra::Family& f) { return f.model_type == e.model_type; });
    TORCH_CHECK(it != families.end(), "zoo: no recipe family ", e.model_type);
    const auto fam = std::make_shared<const dextra::Family>(*it);
    const std::pair<Head, const char*> heads[] = {{Head::kCausalLM, e.heads.causal_lm},
                                                  {Head::kSeqCls, e.heads.seq_cls},
                                                  {Head::kTokenCls, e.heads.token_cls},
                                                  {Head::kQA, e.heads.qa},
                                                  {Head::kBase, e.heads.base}};
    for (const auto& [head, name] : heads) {
      const std::string arch = name;
      if (arch.empty()) continue;
      const char* task = head == Head::kCausalLM   ? "text-generation"
                         : head == Head::kSeqCls   ? "text-classification"
                         : head == Head::kTokenCls ? "token-classification"
                         : head == Head::kQA       ? "question-answering"
                                                   : "feature-extraction";
      nlohmann::json cfg = nlohmann::json::parse(e.example);
      cfg["model_type"] = e.model_type;
      cfg["architectures"] = {arch};
      if (head == Head::kSeqCls || head == Head::kTokenCls) cfg["num_labels"] = 2;
      ArchEntry a;
      a.info = {arch, e.model_type, task};
      a.example_config = cfg;
      a.scale = [fam](const nlohmann::json& c) { return dextra::Scale(*fam, c); };
      a.build = [fam, h = head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
        TS_ASSIGN_OR_RETURN(dextra::Recipe r,
                            fam->parse(dextra::Normalize(*fam, spec.tiny_config)));
        return dextra::BuildRecipeModel(std::move(spec), std::move(r), h);
      };
      out.push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace ts::zoo::internal
