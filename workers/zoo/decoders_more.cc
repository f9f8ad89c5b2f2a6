// Zoo: further decoder-only families (gemma, gemma2, qwen3, olmo2, phi, phi3, stablelm,
// starcoder2, gpt2, gpt_bigcode, gpt_neox, mixtral, qwen2_moe), each with its CausalLM,
// SequenceClassification, TokenClassification, QuestionAnswering and base Model heads where
// transformers has them; and the llama, mistral and qwen2 heads decoder.cc does not build
// (TokenClassification, QuestionAnswering, base Model). See README.md.
//
// One configurable decoder (FamilyConfig below): norm kind, positional scheme (rotary, partial
// rotary, learned), attention projection layout (separate, fused [q;k;v], per-head interleaved,
// GPT-2 Conv1D), MLP kind (gated, fused gate_up, plain, sparse MoE), residual layout (sequential,
// parallel with one or two norms), optional pre/post norms, q/k norms, soft-capping and sliding
// windows. Weight names are the HF state_dict names of each family.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;

enum class Fam {
  kGemma, kGemma2, kQwen3, kOlmo2, kPhi, kPhi3, kStableLm, kStarcoder2, kGpt2, kBigCode,
  kNeoX, kMixtral, kQwen2Moe, kLlama, kMistral, kQwen2
};

enum class NormKind { kRms, kGemmaRms, kLayerNorm };
enum class AttnLayout { kSeparate, kFusedQkv, kPerHeadInterleaved, kConv1D, kMqaFused };
enum class MlpKind { kGated, kFusedGateUp, kPlain };
enum class Residual { kSequential, kParallelOneNorm, kParallelTwoNorms };
enum class Head {
  kCausalLM, kSequenceClassification, kTokenClassification, kQuestionAnswering, kBase
};

// Config field names of a family (phi-msft and GPT-2 style configs use n_embd & co).
struct FieldNames {
  std::string vocab = "vocab_size", hidden = "hidden_size", inter = "intermediate_size",
              layers = "num_hidden_layers", heads = "num_attention_heads",
              kv = "num_key_value_heads", max_pos = "max_position_embeddings",
              act = "hidden_act", eps = "rms_norm_eps";
};

// Everything the builder needs, parsed and validated from an HF config.json.
struct FamilyConfig {
  Fam fam = Fam::kGemma;
  FieldNames f;
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0, kv = 0, head_dim = 0,
          max_pos = 0;
  bool head_dim_field = false;  // head_dim is a config field of this family
  Activation act = Activation::kSilu;
  double eps = 1e-6;
  double init_range = 0.02;
  bool tie = false;
  std::optional<int64_t> pad;
  // Positions.
  bool rotary = true;
  bool learned_pos = false;
  RopeConfig rope;
  double partial_rotary = 1.0;  // fraction of head_dim rotated
  int64_t rotary_dim = 0;       // int(head_dim * partial_rotary)
  std::string partial_field;    // field carrying the fraction ("" none)
  bool partial_is_dim = false;  // phi-msft rotary_dim (absolute) instead of a fraction
  // Phi-3 longrope.
  bool longrope = false;
  std::vector<double> short_factor, long_factor;
  int64_t longrope_orig = 4096;
  // Attention.
  double attn_scale = 0.0;  // 0: 1/sqrt(head_dim)
  double query_pre_attn_scalar = 0.0;
  double attn_softcap = 0.0, final_softcap = 0.0;
  bool qkv_bias = false, o_bias = false, mlp_bias = false, lm_head_bias = false;
  std::vector<std::optional<int64_t>> window;  // per layer
  std::optional<int64_t> window_size;          // the configured window, if active anywhere
  // MoE.
  int64_t experts = 0, top_k = 0, moe_inter = 0, shared_inter = 0, sparse_step = 1;
  bool norm_topk = false;
  std::vector<int64_t> mlp_only_layers;
  int64_t num_labels = 2;
  bool multi_query = false;
  bool parallel_residual = false;
};

Status CheckPos(const ConfigReader& r, const std::string& field, int64_t v) {
  if (v <= 0) return r.Error(field, "must be positive, got " + std::to_string(v));
  return Status();
}

// Names the first of `names` present in `c`, else the first.
std::string Pick(const nlohmann::json& c, std::initializer_list<const char*> names) {
  ConfigReader r(c);
  for (const char* n : names) {
    if (r.Has(n)) return n;
  }
  return *names.begin();
}

StatusOr<std::vector<double>> DoubleList(const nlohmann::json& rs, const std::string& field,
                                         size_t want) {
  ConfigReader r(rs, "rope_scaling.");
  auto it = rs.find(field);
  if (it == rs.end() || it->is_null()) return r.Error(field, "missing");
  if (!it->is_array()) return r.Error(field, std::string("expected array, got ") + JsonTypeName(*it));
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

StatusOr<FamilyConfig> ParseFamily(const nlohmann::json& config, Fam fam) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  FamilyConfig c;
  c.fam = fam;
  ConfigReader r(config);
  FieldNames& f = c.f;
  const bool gpt_style = fam == Fam::kGpt2 || fam == Fam::kBigCode;
  if (gpt_style || (fam == Fam::kPhi && !r.Has("hidden_size") && r.Has("n_embd"))) {
    f.hidden = "n_embd";
    f.inter = "n_inner";
    f.layers = "n_layer";
    f.heads = "n_head";
    f.kv = fam == Fam::kPhi ? "n_head_kv" : "";
    f.max_pos = "n_positions";
    f.act = "activation_function";
    f.eps = "layer_norm_epsilon";
  }
  if (fam == Fam::kPhi && f.hidden == "hidden_size") {
    f.act = "hidden_act";
    f.eps = "layer_norm_eps";
  }
  if (fam == Fam::kStableLm || fam == Fam::kNeoX) f.eps = "layer_norm_eps";
  if (fam == Fam::kStarcoder2) f.eps = "norm_epsilon";
  if (fam == Fam::kGemma || fam == Fam::kGemma2) f.act = Pick(config, {"hidden_activation"});
  if (fam == Fam::kGpt2 || fam == Fam::kBigCode) f.kv = "";

  TS_ASSIGN_OR_RETURN(c.vocab, r.Int(f.vocab));
  TS_RETURN_IF_ERROR(CheckPos(r, f.vocab, c.vocab));
  TS_ASSIGN_OR_RETURN(c.hidden, r.Int(f.hidden));
  TS_RETURN_IF_ERROR(CheckPos(r, f.hidden, c.hidden));
  TS_ASSIGN_OR_RETURN(c.layers, r.Int(f.layers));
  TS_RETURN_IF_ERROR(CheckPos(r, f.layers, c.layers));
  TS_ASSIGN_OR_RETURN(c.heads, r.Int(f.heads));
  TS_RETURN_IF_ERROR(CheckPos(r, f.heads, c.heads));
  // Intermediate: GPT-2 style n_inner null means 4 * hidden (phi-msft too).
  if (f.inter == "n_inner") {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter, 4 * c.hidden));
  } else if (fam == Fam::kPhi) {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter, 4 * c.hidden));
  } else {
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(f.inter));
  }
  TS_RETURN_IF_ERROR(CheckPos(r, f.inter, c.inter));

  // Heads and head_dim.
  c.head_dim_field = fam == Fam::kGemma || fam == Fam::kGemma2 || fam == Fam::kQwen3 ||
                     fam == Fam::kLlama || fam == Fam::kMistral;
  int64_t def_kv = c.heads;
  if (fam == Fam::kStarcoder2 && !r.Has("num_key_value_heads")) def_kv = 2;
  if (fam == Fam::kBigCode) {
    TS_ASSIGN_OR_RETURN(c.multi_query, r.Bool("multi_query", true));
    c.kv = c.multi_query ? 1 : c.heads;
  } else if (f.kv.empty()) {
    c.kv = c.heads;
  } else {
    TS_ASSIGN_OR_RETURN(c.kv, r.Int(f.kv, def_kv));
    TS_RETURN_IF_ERROR(CheckPos(r, f.kv, c.kv));
  }
  if (c.heads % c.kv != 0) {
    return r.Error(f.kv, "must divide " + f.heads + " (" + std::to_string(c.heads) + " % " +
                             std::to_string(c.kv) + " != 0)");
  }
  if (c.head_dim_field && r.Has("head_dim")) {
    TS_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim"));
    TS_RETURN_IF_ERROR(CheckPos(r, "head_dim", c.head_dim));
  } else if (fam == Fam::kQwen3) {
    c.head_dim = 128;  // Qwen3Config default
  } else {
    if (c.hidden % c.heads != 0) {
      return r.Error(f.heads, "must divide " + f.hidden + " (" + std::to_string(c.hidden) +
                                  " % " + std::to_string(c.heads) + " != 0)");
    }
    c.head_dim = c.hidden / c.heads;
  }
  TS_ASSIGN_OR_RETURN(c.max_pos, r.Int(f.max_pos, fam == Fam::kGpt2 ? 1024 : 2048));
  TS_RETURN_IF_ERROR(CheckPos(r, f.max_pos, c.max_pos));

  // Activation, norm eps, init, tie, pad.
  std::string def_act = "silu";
  if (fam == Fam::kGemma || fam == Fam::kGemma2 || fam == Fam::kStarcoder2 ||
      fam == Fam::kBigCode)
    def_act = "gelu_pytorch_tanh";
  if (fam == Fam::kPhi || fam == Fam::kGpt2) def_act = "gelu_new";
  if (fam == Fam::kNeoX) def_act = "gelu";
  // Gemma: hidden_activation wins; when absent HF uses gelu_pytorch_tanh (not hidden_act).
  TS_ASSIGN_OR_RETURN(std::string act, r.String(f.act, def_act));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, f.act));
  double def_eps = 1e-5;
  if (fam == Fam::kGemma || fam == Fam::kGemma2 || fam == Fam::kQwen3 || fam == Fam::kQwen2Moe ||
      fam == Fam::kLlama || fam == Fam::kMistral || fam == Fam::kQwen2)
    def_eps = 1e-6;
  TS_ASSIGN_OR_RETURN(c.eps, r.Double(f.eps, def_eps));
  if (!(c.eps > 0)) return r.Error(f.eps, "must be positive");
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  const bool def_tie = fam == Fam::kGemma || fam == Fam::kGemma2 || fam == Fam::kStarcoder2 ||
                       fam == Fam::kGpt2 || fam == Fam::kBigCode;
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", def_tie));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_token_id"));
    if (pad >= 0 && pad < c.vocab) c.pad = pad;
  }

  // Positions / rotary.
  c.rotary = !gpt_style;
  c.learned_pos = gpt_style;
  if (c.rotary) {
    nlohmann::json rc = config;
    if (fam == Fam::kNeoX && !r.Has("rope_theta") && r.Has("rotary_emb_base")) {
      rc["rope_theta"] = config["rotary_emb_base"];
    }
    if (fam == Fam::kMixtral && !r.Has("rope_theta")) rc["rope_theta"] = 1e6;
    if (fam == Fam::kPhi3 && rc.contains("rope_scaling") && rc["rope_scaling"].is_object()) {
      const nlohmann::json& rs = rc["rope_scaling"];
      ConfigReader s(rs, "rope_scaling.");
      std::string key = s.Has("rope_type") ? "rope_type" : "type";
      TS_ASSIGN_OR_RETURN(std::string kind, s.String(key, "default"));
      if (kind == "longrope" || kind == "su") {
        c.longrope = true;
        rc.erase("rope_scaling");
      }
    }
    TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rc, c.max_pos));
    double def_partial = 1.0;
    c.partial_field = "";
    if (fam == Fam::kPhi) {
      if (r.Has("rotary_dim") && !r.Has("partial_rotary_factor")) {
        c.partial_field = "rotary_dim";
        c.partial_is_dim = true;
      } else {
        c.partial_field = "partial_rotary_factor";
        def_partial = 0.5;
      }
    } else if (fam == Fam::kStableLm) {
      c.partial_field = "partial_rotary_factor";
      def_partial = 0.25;
    } else if (fam == Fam::kPhi3) {
      c.partial_field = "partial_rotary_factor";
    } else if (fam == Fam::kNeoX) {
      c.partial_field = "rotary_pct";
      def_partial = 0.25;
    }
    if (c.partial_is_dim) {
      TS_ASSIGN_OR_RETURN(int64_t rd, r.Int("rotary_dim"));
      if (rd <= 0 || rd > c.head_dim || rd % 2 != 0) {
        return r.Error("rotary_dim", "must be even and in (0, head_dim=" +
                                         std::to_string(c.head_dim) + "]");
      }
      c.partial_rotary = static_cast<double>(rd) / static_cast<double>(c.head_dim);
    } else if (!c.partial_field.empty()) {
      TS_ASSIGN_OR_RETURN(c.partial_rotary, r.Double(c.partial_field, def_partial));
      if (!(c.partial_rotary > 0.0 && c.partial_rotary <= 1.0)) {
        return r.Error(c.partial_field, "must be in (0, 1]");
      }
    }
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary);
    if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0) {
      return r.Error(c.partial_field.empty() ? "head_dim" : c.partial_field,
                     "rotary dims int(head_dim * factor) = " + std::to_string(c.rotary_dim) +
                         " must be even and >= 2");
    }
    if (c.longrope) {
      const nlohmann::json& rs = config["rope_scaling"];
      const size_t half = static_cast<size_t>(c.rotary_dim / 2);
      TS_ASSIGN_OR_RETURN(c.short_factor, DoubleList(rs, "short_factor", half));
      TS_ASSIGN_OR_RETURN(c.long_factor, DoubleList(rs, "long_factor", half));
      ConfigReader s(rs, "rope_scaling.");
      if (s.Has("original_max_position_embeddings")) {
        TS_ASSIGN_OR_RETURN(c.longrope_orig, s.Int("original_max_position_embeddings"));
        TS_RETURN_IF_ERROR(CheckPos(s, "original_max_position_embeddings", c.longrope_orig));
      } else {
        TS_ASSIGN_OR_RETURN(c.longrope_orig, r.Int("original_max_position_embeddings", 4096));
        TS_RETURN_IF_ERROR(CheckPos(r, "original_max_position_embeddings", c.longrope_orig));
      }
    }
  }

  // Attention options.
  if (fam == Fam::kGemma2) {
    TS_ASSIGN_OR_RETURN(c.query_pre_attn_scalar, r.Double("query_pre_attn_scalar", 256.0));
    if (!(c.query_pre_attn_scalar > 0)) return r.Error("query_pre_attn_scalar", "must be positive");
    c.attn_scale = 1.0 / std::sqrt(c.query_pre_attn_scalar);
    if (!r.IsNull("attn_logit_softcapping")) {
      TS_ASSIGN_OR_RETURN(c.attn_softcap, r.Double("attn_logit_softcapping", 50.0));
    }
    if (!r.IsNull("final_logit_softcapping")) {
      TS_ASSIGN_OR_RETURN(c.final_softcap, r.Double("final_logit_softcapping", 30.0));
    }
    if (c.attn_softcap < 0) return r.Error("attn_logit_softcapping", "must be positive");
    if (c.final_softcap < 0) return r.Error("final_logit_softcapping", "must be positive");
  }
  if (fam == Fam::kGemma || fam == Fam::kGemma2 || fam == Fam::kQwen3 || fam == Fam::kOlmo2 ||
      fam == Fam::kLlama) {
    TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
    c.qkv_bias = c.o_bias = ab;
    if (fam == Fam::kLlama) {
      TS_ASSIGN_OR_RETURN(bool mb, r.Bool("mlp_bias", false));
      if (mb) return r.Error("mlp_bias", "true is not supported by the zoo");
    }
  } else if (fam == Fam::kPhi) {
    c.qkv_bias = c.o_bias = c.mlp_bias = c.lm_head_bias = true;
  } else if (fam == Fam::kStableLm) {
    TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("use_qkv_bias", false));
    TS_ASSIGN_OR_RETURN(c.parallel_residual, r.Bool("use_parallel_residual", false));
  } else if (fam == Fam::kStarcoder2) {
    TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("use_bias", true));
    c.o_bias = c.mlp_bias = c.qkv_bias;
  } else if (fam == Fam::kGpt2 || fam == Fam::kBigCode) {
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
  } else if (fam == Fam::kNeoX) {
    TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", true));
    c.qkv_bias = c.o_bias = ab;
    c.mlp_bias = true;
    TS_ASSIGN_OR_RETURN(c.parallel_residual, r.Bool("use_parallel_residual", true));
  } else if (fam == Fam::kQwen2Moe || fam == Fam::kQwen2) {
    c.qkv_bias = true;
  }
  for (const char* unsupported : {"qk_layernorm"}) {
    TS_ASSIGN_OR_RETURN(bool on, r.Bool(unsupported, false));
    if (on) return r.Error(unsupported, "true is not supported by the zoo");
  }

  // Sliding windows.
  c.window.assign(static_cast<size_t>(c.layers), std::nullopt);
  if (fam == Fam::kGemma2 || fam == Fam::kStarcoder2 || fam == Fam::kMixtral ||
      fam == Fam::kPhi3 || fam == Fam::kQwen3 || fam == Fam::kQwen2Moe || fam == Fam::kMistral ||
      fam == Fam::kQwen2) {
    std::optional<int64_t> w;
    if (r.Has("sliding_window")) {
      TS_ASSIGN_OR_RETURN(int64_t v, r.Int("sliding_window"));
      TS_RETURN_IF_ERROR(CheckPos(r, "sliding_window", v));
      w = v;
    } else if (fam == Fam::kGemma2 && !r.IsNull("sliding_window")) {
      w = 4096;
    }
    bool use = w.has_value();
    int64_t max_window_layers = 0;
    if (fam == Fam::kQwen3 || fam == Fam::kQwen2Moe || fam == Fam::kQwen2) {
      TS_ASSIGN_OR_RETURN(use, r.Bool("use_sliding_window", false));
      TS_ASSIGN_OR_RETURN(max_window_layers, r.Int("max_window_layers", 28));
      if (use && !w) w = 4096;
    }
    // A window no shorter than the context never bites: treated as off (Phi-3.5's 262144).
    if (w && *w >= c.max_pos) use = false;
    if (use) {
      c.window_size = w;
      for (int64_t i = 0; i < c.layers; ++i) {
        bool on = true;
        if (fam == Fam::kGemma2) on = i % 2 == 0;  // sliding, full, sliding, ...
        if (fam == Fam::kQwen3 || fam == Fam::kQwen2Moe || fam == Fam::kQwen2)
          on = i >= max_window_layers;
        if (on) c.window[static_cast<size_t>(i)] = w;
      }
    }
  }

  // MoE.
  if (fam == Fam::kMixtral) {
    TS_ASSIGN_OR_RETURN(c.experts, r.Int("num_local_experts", 8));
    TS_RETURN_IF_ERROR(CheckPos(r, "num_local_experts", c.experts));
    TS_ASSIGN_OR_RETURN(c.top_k, r.Int("num_experts_per_tok", 2));
    c.moe_inter = c.inter;
    c.norm_topk = true;
  } else if (fam == Fam::kQwen2Moe) {
    TS_ASSIGN_OR_RETURN(c.experts, r.Int("num_experts", 60));
    TS_RETURN_IF_ERROR(CheckPos(r, "num_experts", c.experts));
    TS_ASSIGN_OR_RETURN(c.top_k, r.Int("num_experts_per_tok", 4));
    TS_ASSIGN_OR_RETURN(c.moe_inter, r.Int("moe_intermediate_size", 1408));
    TS_RETURN_IF_ERROR(CheckPos(r, "moe_intermediate_size", c.moe_inter));
    TS_ASSIGN_OR_RETURN(c.shared_inter, r.Int("shared_expert_intermediate_size", 5632));
    TS_RETURN_IF_ERROR(CheckPos(r, "shared_expert_intermediate_size", c.shared_inter));
    TS_ASSIGN_OR_RETURN(c.norm_topk, r.Bool("norm_topk_prob", false));
    TS_ASSIGN_OR_RETURN(c.sparse_step, r.Int("decoder_sparse_step", 1));
    TS_RETURN_IF_ERROR(CheckPos(r, "decoder_sparse_step", c.sparse_step));
    if (r.Has("mlp_only_layers")) {
      const nlohmann::json& m = config["mlp_only_layers"];
      if (!m.is_array()) return r.Error("mlp_only_layers", "expected array");
      for (const auto& v : m) {
        if (!v.is_number_integer()) return r.Error("mlp_only_layers", "expected integers");
        c.mlp_only_layers.push_back(v.get<int64_t>());
      }
    }
  }
  if (c.experts > 0) {
    TS_RETURN_IF_ERROR(CheckPos(r, "num_experts_per_tok", c.top_k));
    if (c.top_k > c.experts) {
      return r.Error("num_experts_per_tok", "must not exceed the number of experts (" +
                                                std::to_string(c.top_k) + " > " +
                                                std::to_string(c.experts) + ")");
    }
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// ---- Tiny scaling.

StatusOr<nlohmann::json> ScaleFamily(const nlohmann::json& config, Fam fam) {
  TS_ASSIGN_OR_RETURN(FamilyConfig c, ParseFamily(config, fam));
  const FieldNames& f = c.f;
  nlohmann::json t = config;
  const TinyAttention a = TinyAttentionShape(c.heads, c.kv);
  const int64_t heads = a.heads, kv = a.kv_heads, head_dim = a.head_dim, hidden = a.hidden;
  t[f.hidden] = hidden;
  t[f.heads] = heads;
  if (!f.kv.empty() && (config.contains(f.kv) || kv != heads)) t[f.kv] = kv;
  if (fam == Fam::kBigCode) t["multi_query"] = c.multi_query;
  if (c.head_dim_field) t["head_dim"] = head_dim;
  t[f.inter] = ScaleRatio(c.inter, c.hidden, hidden, 8);
  // Layers differ by window (gemma2 alternates, qwen full-then-windowed) or dense/MoE MLP.
  const bool moe_pattern = c.experts > 0 && (c.sparse_step > 1 || !c.mlp_only_layers.empty());
  const int64_t layers = TinyDepth(c.layers, VariesByLayer(c.window) || moe_pattern);
  t[f.layers] = layers;
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t[f.vocab] = vocab;
  for (const char* fld : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, fld, vocab);
  int64_t max_pos = P::kMaxPositions;
  if (c.rotary && c.rope.kind == RopeKind::kDynamic) max_pos = P::kDynamicPositions;
  t[f.max_pos] = max_pos;
  if (fam == Fam::kGpt2) t["n_ctx"] = max_pos;
  // Partial rotary: keep the fraction (phi-msft: rotary_dim scaled to the tiny head_dim).
  if (c.partial_is_dim) {
    int64_t rd = std::max<int64_t>(2, static_cast<int64_t>(std::lround(
                                          c.partial_rotary * static_cast<double>(head_dim))) /
                                          2 * 2);
    t["rotary_dim"] = rd;
  }
  const int64_t tiny_rot =
      static_cast<int64_t>(static_cast<double>(head_dim) * c.partial_rotary);
  if (c.rotary && (tiny_rot < 2 || tiny_rot % 2 != 0) && !c.partial_is_dim) {
    // Keep the partial fraction but round to an even rotary width the tiny head_dim allows.
    const int64_t rd = std::max<int64_t>(2, tiny_rot / 2 * 2);
    t[c.partial_field] = static_cast<double>(rd) / static_cast<double>(head_dim);
  }
  if (c.rotary && t.contains("rope_scaling") && t["rope_scaling"].is_object()) {
    nlohmann::json& rs = t["rope_scaling"];
    if (c.longrope) {
      // Shrink the per-frequency factors to the tiny rotary width (evenly subsampled), and the
      // original context so that the 32-token run uses the long factors.
      const int64_t rd = c.partial_is_dim ? t["rotary_dim"].get<int64_t>() : tiny_rot / 2 * 2;
      const size_t half = static_cast<size_t>(std::max<int64_t>(1, rd / 2));
      for (const char* key : {"short_factor", "long_factor"}) {
        const std::vector<double>& src = key[0] == 's' ? c.short_factor : c.long_factor;
        nlohmann::json out = nlohmann::json::array();
        for (size_t i = 0; i < half; ++i) out.push_back(src[i * src.size() / half]);
        rs[key] = out;
      }
      int64_t orig = ScaleRatio(c.longrope_orig, c.max_pos, max_pos, 1);
      orig = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
      if (rs.contains("original_max_position_embeddings")) rs["original_max_position_embeddings"] = orig;
      t["original_max_position_embeddings"] = orig;
    } else if (rs.contains("original_max_position_embeddings")) {
      if (c.rope.kind == RopeKind::kDynamic) {
        rs["original_max_position_embeddings"] = max_pos;
      } else {
        int64_t orig =
            ScaleRatio(c.rope.original_max_position_embeddings, c.max_pos, max_pos, 1);
        rs["original_max_position_embeddings"] = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
      }
    }
  }
  // Gemma2: query_pre_attn_scalar keeps its ratio to head_dim.
  if (fam == Fam::kGemma2) {
    t["query_pre_attn_scalar"] =
        std::max<int64_t>(1, std::llround(c.query_pre_attn_scalar * static_cast<double>(head_dim) /
                                          static_cast<double>(c.head_dim)));
  }
  // Sliding window: bites within the tiny sequence; the layer pattern is kept.
  if (c.window_size) {
    t["sliding_window"] = std::min<int64_t>(*c.window_size, P::kWindow);
    if (fam == Fam::kQwen3 || fam == Fam::kQwen2Moe || fam == Fam::kQwen2) {
      int64_t first = -1;
      for (int64_t i = 0; i < c.layers; ++i)
        if (c.window[static_cast<size_t>(i)] && first < 0) first = i;
      t["max_window_layers"] = first == 0 ? 0 : std::min<int64_t>(1, layers - 1);
    }
  } else if (t.contains("sliding_window") && t["sliding_window"].is_number()) {
    // Inactive (use_sliding_window false, or no shorter than the context): stays inactive.
    if (fam == Fam::kQwen3 || fam == Fam::kQwen2Moe || fam == Fam::kQwen2) {
      t["sliding_window"] = P::kWindow;
      t["max_window_layers"] = std::min<int64_t>(t.value("max_window_layers", 28), layers);
    } else {
      t["sliding_window"] = nullptr;
    }
  }
  // MoE: 4 experts; top_k at most half of them so that routing still selects.
  if (c.experts > 0) {
    const int64_t experts = std::min<int64_t>(c.experts, 4);
    const int64_t top_k = std::max<int64_t>(1, std::min(c.top_k, std::max<int64_t>(1, experts / 2)));
    t[fam == Fam::kMixtral ? "num_local_experts" : "num_experts"] = experts;
    t["num_experts_per_tok"] = top_k;
    if (fam == Fam::kQwen2Moe) {
      t["moe_intermediate_size"] = ScaleRatio(c.moe_inter, c.hidden, hidden, 8);
      t["shared_expert_intermediate_size"] = ScaleRatio(c.shared_inter, c.hidden, hidden, 8);
      t["decoder_sparse_step"] = std::min<int64_t>(c.sparse_step, layers);
      nlohmann::json only = nlohmann::json::array();
      for (int64_t i : c.mlp_only_layers)
        if (i < layers) only.push_back(i);
      t["mlp_only_layers"] = only;
    }
  }
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  return t;
}

// ---- The model.

struct Expert {
  std::string gate, up, down;
};

struct LayerW {
  std::string n1w, n1b, n2w, n2b, post_attn, post_ffn;
  std::string q, qb, k, kb, v, vb, qkv, qkvb, o, ob, qn, kn;
  std::string gate, gate_b, up, up_b, down, down_b;
  bool moe = false;
  std::string router;
  std::vector<Expert> experts;
  Expert shared;
  std::string shared_gate;
  std::optional<int64_t> window;
};

class FamilyModel : public Model {
 public:
  FamilyModel(ModelSpec spec, FamilyConfig c, Head head)
      : Model(std::move(spec)), c_(std::move(c)), head_kind_(head) {
    const Fam fam = c_.fam;
    const int64_t h = c_.hidden, hd = c_.head_dim, im = c_.inter;
    const int64_t q_out = c_.heads * hd, kv_out = c_.kv * hd;
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes_.emplace_back(name, std::move(shape));
      return name;
    };
    norm_ = c_.fam == Fam::kGemma || fam == Fam::kGemma2 ? NormKind::kGemmaRms : NormKind::kRms;
    if (fam == Fam::kPhi || fam == Fam::kStableLm || fam == Fam::kStarcoder2 ||
        fam == Fam::kGpt2 || fam == Fam::kBigCode || fam == Fam::kNeoX)
      norm_ = NormKind::kLayerNorm;
    const bool ln = norm_ == NormKind::kLayerNorm;
    layout_ = AttnLayout::kSeparate;
    if (fam == Fam::kPhi3) layout_ = AttnLayout::kFusedQkv;
    if (fam == Fam::kNeoX || (fam == Fam::kBigCode && !c_.multi_query))
      layout_ = AttnLayout::kPerHeadInterleaved;
    if (fam == Fam::kBigCode && c_.multi_query) layout_ = AttnLayout::kMqaFused;
    if (fam == Fam::kGpt2) layout_ = AttnLayout::kConv1D;
    conv1d_ = fam == Fam::kGpt2;
    mlp_ = MlpKind::kGated;
    if (fam == Fam::kPhi3) mlp_ = MlpKind::kFusedGateUp;
    if (fam == Fam::kPhi || fam == Fam::kStarcoder2 || fam == Fam::kGpt2 ||
        fam == Fam::kBigCode || fam == Fam::kNeoX)
      mlp_ = MlpKind::kPlain;
    residual_ = Residual::kSequential;
    if (fam == Fam::kPhi) residual_ = Residual::kParallelOneNorm;
    if ((fam == Fam::kNeoX || fam == Fam::kStableLm) && c_.parallel_residual)
      residual_ = fam == Fam::kNeoX ? Residual::kParallelTwoNorms : Residual::kParallelOneNorm;

    const bool gpt = fam == Fam::kGpt2 || fam == Fam::kBigCode;
    // The base model (GPT2Model, LlamaModel, ...) has its weights at the root of its state_dict.
    const std::string base = head_kind_ == Head::kBase ? ""
                             : gpt                     ? "transformer."
                             : fam == Fam::kNeoX       ? "gpt_neox."
                                                       : "model.";
    embed_ = add(base + (gpt ? "wte.weight" : fam == Fam::kNeoX ? "embed_in.weight"
                                                                 : "embed_tokens.weight"),
                 {c_.vocab, h});
    if (c_.learned_pos) pos_ = add(base + "wpe.weight", {c_.max_pos, h});
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string p = base + (gpt ? "h." : "layers.") + std::to_string(i) + ".";
      LayerW l;
      auto norm = [&](const std::string& n, std::string& w, std::string& b) {
        w = add(p + n + ".weight", {h});
        if (ln) b = add(p + n + ".bias", {h});
      };
      if (gpt) {
        norm("ln_1", l.n1w, l.n1b);
      } else if (fam != Fam::kOlmo2) {
        norm("input_layernorm", l.n1w, l.n1b);
      }
      // Attention projections.
      const std::string a = p + (gpt ? "attn." : fam == Fam::kNeoX ? "attention." : "self_attn.");
      switch (layout_) {
        case AttnLayout::kSeparate:
          l.q = add(a + "q_proj.weight", {q_out, h});
          if (c_.qkv_bias) l.qb = add(a + "q_proj.bias", {q_out});
          l.k = add(a + "k_proj.weight", {kv_out, h});
          if (c_.qkv_bias) l.kb = add(a + "k_proj.bias", {kv_out});
          l.v = add(a + "v_proj.weight", {kv_out, h});
          if (c_.qkv_bias) l.vb = add(a + "v_proj.bias", {kv_out});
          break;
        case AttnLayout::kFusedQkv:
          l.qkv = add(a + "qkv_proj.weight", {q_out + 2 * kv_out, h});
          break;
        case AttnLayout::kPerHeadInterleaved: {
          const std::string n = fam == Fam::kNeoX ? "query_key_value" : "c_attn";
          l.qkv = add(a + n + ".weight", {3 * q_out, h});
          if (c_.qkv_bias) l.qkvb = add(a + n + ".bias", {3 * q_out});
          break;
        }
        case AttnLayout::kMqaFused:
          l.qkv = add(a + "c_attn.weight", {q_out + 2 * kv_out, h});
          l.qkvb = add(a + "c_attn.bias", {q_out + 2 * kv_out});
          break;
        case AttnLayout::kConv1D:
          l.qkv = add(a + "c_attn.weight", {h, 3 * h});
          l.qkvb = add(a + "c_attn.bias", {3 * h});
          break;
      }
      if (fam == Fam::kQwen3) {
        l.qn = add(a + "q_norm.weight", {hd});
        l.kn = add(a + "k_norm.weight", {hd});
      }
      if (fam == Fam::kOlmo2) {
        l.qn = add(a + "q_norm.weight", {q_out});
        l.kn = add(a + "k_norm.weight", {kv_out});
      }
      std::string o_name = "o_proj";
      if (fam == Fam::kPhi || fam == Fam::kNeoX) o_name = "dense";
      if (gpt) o_name = "c_proj";
      l.o = add(a + o_name + ".weight", conv1d_ ? std::vector<int64_t>{q_out, h}
                                                : std::vector<int64_t>{h, q_out});
      if (c_.o_bias) l.ob = add(a + o_name + ".bias", {h});
      // Norms around the MLP.
      if (fam == Fam::kGemma2) {
        l.post_attn = add(p + "post_attention_layernorm.weight", {h});
        l.n2w = add(p + "pre_feedforward_layernorm.weight", {h});
        l.post_ffn = add(p + "post_feedforward_layernorm.weight", {h});
      } else if (fam == Fam::kOlmo2) {
        l.post_attn = add(p + "post_attention_layernorm.weight", {h});
        l.post_ffn = add(p + "post_feedforward_layernorm.weight", {h});
      } else if (gpt) {
        norm("ln_2", l.n2w, l.n2b);
      } else if (residual_ != Residual::kParallelOneNorm) {
        norm("post_attention_layernorm", l.n2w, l.n2b);
      }
      // MLP.
      const std::string m = p + "mlp.";
      const bool sparse =
          c_.experts > 0 &&
          (fam == Fam::kMixtral ||
           (std::find(c_.mlp_only_layers.begin(), c_.mlp_only_layers.end(), i) ==
                c_.mlp_only_layers.end() &&
            (i + 1) % c_.sparse_step == 0));
      if (sparse) {
        l.moe = true;
        const int64_t e_im = c_.moe_inter;
        if (fam == Fam::kMixtral) {
          const std::string s = p + "block_sparse_moe.";
          l.router = add(s + "gate.weight", {c_.experts, h});
          for (int64_t e = 0; e < c_.experts; ++e) {
            const std::string x = s + "experts." + std::to_string(e) + ".";
            Expert ex;
            ex.gate = add(x + "w1.weight", {e_im, h});
            ex.down = add(x + "w2.weight", {h, e_im});
            ex.up = add(x + "w3.weight", {e_im, h});
            l.experts.push_back(ex);
          }
        } else {
          l.router = add(m + "gate.weight", {c_.experts, h});
          for (int64_t e = 0; e < c_.experts; ++e) {
            const std::string x = m + "experts." + std::to_string(e) + ".";
            Expert ex;
            ex.gate = add(x + "gate_proj.weight", {e_im, h});
            ex.up = add(x + "up_proj.weight", {e_im, h});
            ex.down = add(x + "down_proj.weight", {h, e_im});
            l.experts.push_back(ex);
          }
          const int64_t s_im = c_.shared_inter;
          l.shared.gate = add(m + "shared_expert.gate_proj.weight", {s_im, h});
          l.shared.up = add(m + "shared_expert.up_proj.weight", {s_im, h});
          l.shared.down = add(m + "shared_expert.down_proj.weight", {h, s_im});
          l.shared_gate = add(m + "shared_expert_gate.weight", {1, h});
        }
      } else if (mlp_ == MlpKind::kGated) {
        l.gate = add(m + "gate_proj.weight", {im, h});
        l.up = add(m + "up_proj.weight", {im, h});
        l.down = add(m + "down_proj.weight", {h, im});
      } else if (mlp_ == MlpKind::kFusedGateUp) {
        l.up = add(m + "gate_up_proj.weight", {2 * im, h});
        l.down = add(m + "down_proj.weight", {h, im});
      } else {
        std::string up = "fc1", down = "fc2";
        if (fam == Fam::kStarcoder2 || gpt) up = "c_fc", down = "c_proj";
        if (fam == Fam::kNeoX) up = "dense_h_to_4h", down = "dense_4h_to_h";
        l.up = add(m + up + ".weight", conv1d_ ? std::vector<int64_t>{h, im}
                                                : std::vector<int64_t>{im, h});
        if (c_.mlp_bias) l.up_b = add(m + up + ".bias", {im});
        l.down = add(m + down + ".weight", conv1d_ ? std::vector<int64_t>{im, h}
                                                    : std::vector<int64_t>{h, im});
        if (c_.mlp_bias) l.down_b = add(m + down + ".bias", {h});
      }
      l.window = c_.window[static_cast<size_t>(i)];
      layers_.push_back(std::move(l));
    }
    std::string fn = "norm";
    if (gpt) fn = "ln_f";
    if (fam == Fam::kPhi) fn = "final_layernorm";
    if (fam == Fam::kNeoX) fn = "final_layer_norm";
    final_w_ = add(base + fn + ".weight", {h});
    if (ln) final_b_ = add(base + fn + ".bias", {h});
    if (head_kind_ == Head::kSequenceClassification) {
      head_ = add("score.weight", {c_.num_labels, h});
    } else if (head_kind_ == Head::kTokenClassification) {
      // GPT-2, GPTBigCode and GPTNeoX name it classifier; the generic head (all others) score.
      const std::string n = gpt || fam == Fam::kNeoX ? "classifier" : "score";
      head_ = add(n + ".weight", {c_.num_labels, h});
      head_b_ = add(n + ".bias", {c_.num_labels});
    } else if (head_kind_ == Head::kQuestionAnswering) {
      head_ = add("qa_outputs.weight", {2, h});
      head_b_ = add("qa_outputs.bias", {2});
    } else if (head_kind_ == Head::kBase) {
      // No head: last_hidden_state.
    } else if (c_.tie) {
      head_ = embed_;
    } else {
      head_ = add(fam == Fam::kNeoX ? "embed_out.weight" : "lm_head.weight", {c_.vocab, h});
      if (c_.lm_head_bias) head_b_ = add("lm_head.bias", {c_.vocab});
    }
    seq_len_ = RunSeqLen(this->spec().tiny_config);
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override {
    if (head_kind_ == Head::kBase) return {"last_hidden_state"};
    if (head_kind_ == Head::kQuestionAnswering) return {"start_logits", "end_logits"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const int64_t b = ids.size(0), s = ids.size(1);
    const at::Device dev = ids.device();
    at::Tensor h = nn::Embedding(GetWeight(w, embed_), ids, c_.pad.value_or(-1));
    const at::ScalarType dtype = h.scalar_type();
    at::Tensor pos = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
    if (norm_ == NormKind::kGemmaRms) {
      // HF: normalizer = tensor(hidden_size ** 0.5, dtype=hidden.dtype).
      h = h * std::sqrt(static_cast<double>(c_.hidden));
    }
    if (!pos_.empty()) h = h + nn::Embedding(GetWeight(w, pos_), pos);
    at::Tensor cos, sin;
    if (c_.rotary) std::tie(cos, sin) = RotaryTables(pos, s, dtype);
    at::Tensor blocked_full, blocked_window;
    for (const LayerW& l : layers_) {
      at::Tensor& blocked = l.window ? blocked_window : blocked_full;
      if (!blocked.defined()) blocked = nn::BlockedKeys(mask, s, /*causal=*/true, l.window, dev);
      if (residual_ == Residual::kSequential) {
        at::Tensor x = l.n1w.empty() ? h : Norm(w, h, l.n1w, l.n1b);
        at::Tensor a = Attn(w, l, x, cos, sin, blocked, b, s);
        if (!l.post_attn.empty()) a = Norm(w, a, l.post_attn, "");
        h = h + a;
        x = l.n2w.empty() ? h : Norm(w, h, l.n2w, l.n2b);
        at::Tensor m = Mlp(w, l, x);
        if (!l.post_ffn.empty()) m = Norm(w, m, l.post_ffn, "");
        h = h + m;
      } else if (residual_ == Residual::kParallelOneNorm) {
        at::Tensor x = Norm(w, h, l.n1w, l.n1b);
        h = h + Attn(w, l, x, cos, sin, blocked, b, s) + Mlp(w, l, x);
      } else {
        at::Tensor a = Attn(w, l, Norm(w, h, l.n1w, l.n1b), cos, sin, blocked, b, s);
        h = h + a + Mlp(w, l, Norm(w, h, l.n2w, l.n2b));
      }
    }
    h = Norm(w, h, final_w_, final_b_);
    if (head_kind_ == Head::kBase) return {h};
    at::Tensor logits = nn::Linear(h, GetWeight(w, head_), GetOptionalWeight(w, head_b_));
    if (head_kind_ == Head::kTokenClassification) return {logits};
    if (head_kind_ == Head::kQuestionAnswering) {
      return {logits.select(-1, 0).contiguous(), logits.select(-1, 1).contiguous()};
    }
    if (c_.final_softcap > 0) logits = at::tanh(logits / c_.final_softcap) * c_.final_softcap;
    if (head_kind_ == Head::kCausalLM) return {logits};
    at::Tensor last;
    if (mask.defined()) {
      at::Tensor idx = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
      last = (idx * mask.to(at::kLong)).argmax(-1);
    } else {
      last = at::full({b}, s - 1, at::TensorOptions().dtype(at::kLong).device(dev));
    }
    at::Tensor gather_idx = last.view({b, 1, 1}).expand({b, 1, c_.num_labels});
    return {logits.gather(1, gather_idx).squeeze(1)};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (head_kind_ == Head::kQuestionAnswering) {
      // HF: start/end positions clamped to [0, S]; mean of the two cross entropies.
      const int64_t s = out[0].size(1);
      at::Tensor sp = GetInput(batch.labels, "start_positions").clamp(0, s);
      at::Tensor ep = GetInput(batch.labels, "end_positions").clamp(0, s);
      return (CrossEntropy(out[0], sp) + CrossEntropy(out[1], ep)) / 2;
    }
    at::Tensor logits = out[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (head_kind_ == Head::kBase) {
      // No task loss in HF: regress last_hidden_state onto a fixed random target.
      return at::mse_loss(logits, labels.to(logits.scalar_type()));
    }
    if (head_kind_ == Head::kTokenClassification) {
      return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
    }
    if (head_kind_ == Head::kSequenceClassification) {
      if (c_.num_labels == 1)
        return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
      return CrossEntropy(logits, labels);
    }
    const int64_t s = logits.size(1);
    at::Tensor shift_logits = logits.narrow(1, 0, s - 1).reshape({-1, logits.size(-1)});
    at::Tensor shift_labels = labels.narrow(1, 1, s - 1).reshape({-1});
    return CrossEntropy(shift_logits, shift_labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    at::Tensor ids = at::randint(0, c_.vocab, {batch_size, seq_len_}, gen, lopts);
    at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
    if (c_.pad) ids = ids.masked_fill(mask.eq(0), *c_.pad);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    if (head_kind_ == Head::kSequenceClassification) {
      batch.labels["labels"] = c_.num_labels == 1
                                   ? at::randn({batch_size}, gen, fopts)
                                   : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
    } else if (head_kind_ == Head::kTokenClassification) {
      batch.labels["labels"] = at::randint(0, c_.num_labels, {batch_size, seq_len_}, gen, lopts)
                                   .masked_fill(mask.eq(0), -100);
    } else if (head_kind_ == Head::kQuestionAnswering) {
      at::Tensor start = at::randint(0, seq_len_ / 2, {batch_size}, gen, lopts);
      batch.labels["start_positions"] = start;
      batch.labels["end_positions"] =
          start + at::randint(0, seq_len_ / 4, {batch_size}, gen, lopts);
    } else if (head_kind_ == Head::kBase) {
      batch.labels["labels"] = at::randn({batch_size, seq_len_, c_.hidden}, gen, fopts);
    } else {
      batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (conv1d_ && t.dim() == 2 && name != embed_ && name != pos_ && name != head_) {
      // GPT-2 Conv1D weights are stored [in, out]: fan_in is the first dimension.
      const double range = c_.init_range;
      const double std = std::max(range, 1.0 / std::sqrt(static_cast<double>(t.size(0))));
      t.normal_(0.0, std, gen);
      return;
    }
    Model::InitWeight(name, t, gen);
    if (name == embed_ && c_.pad) t[*c_.pad].zero_();
  }

 private:
  // Projection: Linear, or GPT-2 Conv1D (x @ W + b with W [in, out]).
  at::Tensor Proj(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                  const std::string& bn) const {
    const at::Tensor& weight = GetWeight(w, wn);
    return nn::Linear(x, conv1d_ ? weight.t() : weight, GetOptionalWeight(w, bn));
  }

  at::Tensor Norm(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                  const std::string& bn) const {
    switch (norm_) {
      case NormKind::kRms:
        return nn::RmsNorm(x, GetWeight(w, wn), c_.eps);
      case NormKind::kGemmaRms: {
        at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
        return (x * at::rsqrt(var + c_.eps)) * (1.0 + GetWeight(w, wn));
      }
      case NormKind::kLayerNorm:
        return nn::LayerNorm(x, GetWeight(w, wn), GetOptionalWeight(w, bn), c_.eps);
    }
    return x;
  }

  std::pair<at::Tensor, at::Tensor> RotaryTables(const at::Tensor& pos, int64_t s,
                                                 at::ScalarType dtype) const {
    if (!c_.longrope) return nn::RotaryCosSin(c_.rope, c_.rotary_dim, pos, dtype);
    // Phi-3 longrope: inv_freq = 1 / (ext * base^(2i/d)); long factors past the original
    // context; cos/sin scaled by sqrt(1 + ln(max/orig) / ln(orig)).
    const std::vector<double>& ext = s > c_.longrope_orig ? c_.long_factor : c_.short_factor;
    // Built from traced scalar fills (a captured constant tensor does not survive the device
    // compiler: phi-3.5 compiled to NaN that way).
    const auto fopts = at::TensorOptions().dtype(dtype).device(pos.device());
    std::vector<at::Tensor> parts;
    for (double v : ext) parts.push_back(at::full({1}, v, fopts));
    at::Tensor ext_t = at::cat(parts, 0);
    const int64_t d = c_.rotary_dim;
    at::Tensor expo =
        at::arange(0, d, 2, at::TensorOptions().dtype(at::kLong).device(pos.device())).to(dtype) /
        static_cast<double>(d);
    at::Tensor inv_freq = at::reciprocal(ext_t * at::pow(c_.rope.theta, expo));
    at::Tensor freqs = pos.to(dtype).unsqueeze(-1) * inv_freq;
    at::Tensor emb = at::cat({freqs, freqs}, -1);
    const double factor =
        static_cast<double>(c_.max_pos) / static_cast<double>(c_.longrope_orig);
    double attn_factor = 1.0;
    if (factor > 1.0) {
      attn_factor = std::sqrt(1.0 + std::log(factor) /
                                        std::log(static_cast<double>(c_.longrope_orig)));
    }
    return {emb.cos() * attn_factor, emb.sin() * attn_factor};
  }

  at::Tensor Rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
    if (c_.rotary_dim == c_.head_dim) return nn::ApplyRotary(x, cos, sin);
    at::Tensor rot = x.narrow(-1, 0, c_.rotary_dim);
    at::Tensor pass = x.narrow(-1, c_.rotary_dim, c_.head_dim - c_.rotary_dim);
    return at::cat({nn::ApplyRotary(rot, cos, sin), pass}, -1);
  }

  at::Tensor Attn(const WeightMap& w, const LayerW& l, const at::Tensor& x, const at::Tensor& cos,
                  const at::Tensor& sin, const at::Tensor& blocked, int64_t b, int64_t s) const {
    const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
    at::Tensor q, k, v;  // [B, S, *]
    switch (layout_) {
      case AttnLayout::kSeparate:
        q = Proj(w, x, l.q, l.qb);
        k = Proj(w, x, l.k, l.kb);
        v = Proj(w, x, l.v, l.vb);
        break;
      case AttnLayout::kFusedQkv:
      case AttnLayout::kMqaFused:
      case AttnLayout::kConv1D: {
        at::Tensor qkv = Proj(w, x, l.qkv, l.qkvb);
        q = qkv.narrow(-1, 0, nh * hd);
        k = qkv.narrow(-1, nh * hd, nkv * hd);
        v = qkv.narrow(-1, (nh + nkv) * hd, nkv * hd);
        break;
      }
      case AttnLayout::kPerHeadInterleaved: {
        at::Tensor qkv = Proj(w, x, l.qkv, l.qkvb).view({b, s, nh, 3 * hd});
        q = qkv.narrow(-1, 0, hd).reshape({b, s, nh * hd});
        k = qkv.narrow(-1, hd, hd).reshape({b, s, nh * hd});
        v = qkv.narrow(-1, 2 * hd, hd).reshape({b, s, nh * hd});
        break;
      }
    }
    if (c_.fam == Fam::kOlmo2) {
      q = nn::RmsNorm(q, GetWeight(w, l.qn), c_.eps);
      k = nn::RmsNorm(k, GetWeight(w, l.kn), c_.eps);
    }
    q = q.reshape({b, s, nh, hd}).transpose(1, 2);
    k = k.reshape({b, s, nkv, hd}).transpose(1, 2);
    v = v.reshape({b, s, nkv, hd}).transpose(1, 2);
    if (c_.fam == Fam::kQwen3) {
      q = nn::RmsNorm(q, GetWeight(w, l.qn), c_.eps);
      k = nn::RmsNorm(k, GetWeight(w, l.kn), c_.eps);
    }
    if (c_.rotary) {
      q = Rotate(q, cos, sin);
      k = Rotate(k, cos, sin);
    }
    const double scale =
        c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    at::Tensor kr = nn::RepeatKv(k, nh / nkv);
    at::Tensor vr = nn::RepeatKv(v, nh / nkv);
    at::Tensor scores = nn::Matmul(q, kr.transpose(-1, -2)) * scale;
    if (c_.attn_softcap > 0) scores = at::tanh(scores / c_.attn_softcap) * c_.attn_softcap;
    const double lowest = q.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                         : std::numeric_limits<float>::lowest();
    if (blocked.defined()) scores = scores.masked_fill(blocked, lowest);
    at::Tensor a = nn::Matmul(at::softmax(scores, -1), vr);
    a = a.transpose(1, 2).reshape({b, s, nh * hd});
    return Proj(w, a, l.o, l.ob);
  }

  at::Tensor Gated(const WeightMap& w, const at::Tensor& x, const Expert& e) const {
    at::Tensor g = nn::Activate(nn::Linear(x, GetWeight(w, e.gate)), c_.act);
    return nn::Linear(g * nn::Linear(x, GetWeight(w, e.up)), GetWeight(w, e.down));
  }

  at::Tensor Mlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
    if (l.moe) return Moe(w, l, x);
    switch (mlp_) {
      case MlpKind::kGated:
        return Gated(w, x, Expert{l.gate, l.up, l.down});
      case MlpKind::kFusedGateUp: {
        at::Tensor gu = nn::Linear(x, GetWeight(w, l.up));
        const int64_t im = c_.inter;
        at::Tensor up = gu.narrow(-1, im, im) * nn::Activate(gu.narrow(-1, 0, im), c_.act);
        return nn::Linear(up, GetWeight(w, l.down));
      }
      case MlpKind::kPlain:
        return Proj(w, nn::Activate(Proj(w, x, l.up, l.up_b), c_.act), l.down, l.down_b);
    }
    return x;
  }

  // Sparse MoE: softmax router, top-k (ties broken by topk's order), optional renormalisation;
  // the top-k weights are scattered into a [tokens, experts] combine matrix (zero for experts a
  // token is not routed to) that weights each expert's output. Dense over tokens on purpose: a
  // data-dependent gather (nonzero + index_select/index_add) splits the compiled graph and the
  // simulated device then runs the expert matmuls partly off its bf16 units, which the declared
  // numerics cannot follow (MixtralForSequenceClassification failed compile that way).
  at::Tensor Moe(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
    const auto shape = x.sizes().vec();
    at::Tensor x2 = x.reshape({-1, c_.hidden});
    at::Tensor router_logits = nn::Linear(x2, GetWeight(w, l.router));
    at::Tensor probs = at::softmax(router_logits, -1);
    auto [top_w, top_i] = at::topk(probs, c_.top_k, -1);
    if (c_.norm_topk) top_w = top_w / top_w.sum(-1, /*keepdim=*/true);
    at::Tensor combine = at::zeros_like(probs).scatter(1, top_i, top_w);  // [N, E]
    at::Tensor out;
    for (int64_t e = 0; e < static_cast<int64_t>(l.experts.size()); ++e) {
      at::Tensor ye = Gated(w, x2, l.experts[static_cast<size_t>(e)]) *
                      combine.select(1, e).unsqueeze(-1);
      out = out.defined() ? out + ye : ye;
    }
    if (!l.shared_gate.empty()) {
      at::Tensor g = at::sigmoid(nn::Linear(x2, GetWeight(w, l.shared_gate)));
      out = out + g * Gated(w, x2, l.shared);
    }
    return out.view(shape);
  }

  FamilyConfig c_;
  Head head_kind_;
  NormKind norm_ = NormKind::kRms;
  AttnLayout layout_ = AttnLayout::kSeparate;
  MlpKind mlp_ = MlpKind::kGated;
  Residual residual_ = Residual::kSequential;
  bool conv1d_ = false;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<LayerW> layers_;
  std::string embed_, pos_, final_w_, final_b_, head_, head_b_;
  int64_t seq_len_ = 32;
};

StatusOr<std::unique_ptr<Model>> BuildFamily(ModelSpec spec, Fam fam, Head head) {
  TS_ASSIGN_OR_RETURN(FamilyConfig c, ParseFamily(spec.tiny_config, fam));
  return std::unique_ptr<Model>(
      std::make_unique<FamilyModel>(std::move(spec), std::move(c), head));
}

// ---- Example configs (modelled on public checkpoints).

// Class names of a family's heads; "" where transformers has none or another file registers it.
struct HeadNames {
  const char* causal_lm;
  const char* seq_cls;
  const char* token_cls;
  const char* qa;
  const char* base;
};

struct FamilyEntry {
  Fam fam;
  const char* model_type;
  HeadNames heads;
  nlohmann::json example;
};

std::vector<FamilyEntry> Families() {
  return {
      // google/gemma-2b
      {Fam::kGemma, "gemma",
       {"GemmaForCausalLM", "GemmaForSequenceClassification", "GemmaForTokenClassification",
        "", "GemmaModel"},
       R"({"model_type":"gemma","hidden_size":2048,"intermediate_size":16384,
           "num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,
           "num_hidden_layers":18,"vocab_size":256000,"max_position_embeddings":8192,
           "rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"gelu",
           "hidden_activation":"gelu_pytorch_tanh","pad_token_id":0,"bos_token_id":2,
           "eos_token_id":1,"attention_bias":false,"tie_word_embeddings":true})"_json},
      // google/gemma-2-2b
      {Fam::kGemma2, "gemma2",
       {"Gemma2ForCausalLM", "Gemma2ForSequenceClassification", "Gemma2ForTokenClassification",
        "", "Gemma2Model"},
       R"({"model_type":"gemma2","hidden_size":2304,"intermediate_size":9216,
           "num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,
           "num_hidden_layers":26,"vocab_size":256000,"max_position_embeddings":8192,
           "rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_activation":"gelu_pytorch_tanh",
           "query_pre_attn_scalar":256,"sliding_window":4096,"attn_logit_softcapping":50.0,
           "final_logit_softcapping":30.0,"pad_token_id":0,"bos_token_id":2,"eos_token_id":1,
           "attention_bias":false})"_json},
      // Qwen/Qwen3-1.7B
      {Fam::kQwen3, "qwen3",
       {"Qwen3ForCausalLM", "Qwen3ForSequenceClassification", "Qwen3ForTokenClassification",
        "Qwen3ForQuestionAnswering", "Qwen3Model"},
       R"({"model_type":"qwen3","hidden_size":2048,"intermediate_size":6144,
           "num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,
           "num_hidden_layers":28,"vocab_size":151936,"max_position_embeddings":40960,
           "rms_norm_eps":1e-6,"rope_theta":1000000,"hidden_act":"silu",
           "tie_word_embeddings":true,"use_sliding_window":false,"sliding_window":null,
           "max_window_layers":28,"attention_bias":false,"bos_token_id":151643,
           "eos_token_id":151645})"_json},
      // allenai/OLMo-2-1124-7B
      {Fam::kOlmo2, "olmo2",
       {"Olmo2ForCausalLM", "", "", "", "Olmo2Model"},
       R"({"model_type":"olmo2","hidden_size":4096,"intermediate_size":11008,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":100352,"max_position_embeddings":4096,"rms_norm_eps":1e-6,
           "rope_theta":500000,"hidden_act":"silu","attention_bias":false,
           "tie_word_embeddings":false,"pad_token_id":100277,"eos_token_id":100257})"_json},
      // microsoft/phi-2 (transformers format)
      {Fam::kPhi, "phi",
       {"PhiForCausalLM", "PhiForSequenceClassification", "PhiForTokenClassification",
        "", "PhiModel"},
       R"({"model_type":"phi","hidden_size":2560,"intermediate_size":10240,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":51200,"max_position_embeddings":2048,"layer_norm_eps":1e-5,
           "rope_theta":10000.0,"partial_rotary_factor":0.4,"hidden_act":"gelu_new",
           "qk_layernorm":false,"tie_word_embeddings":false,"bos_token_id":50256,
           "eos_token_id":50256})"_json},
      // microsoft/Phi-3-mini-4k-instruct
      {Fam::kPhi3, "phi3",
       {"Phi3ForCausalLM", "Phi3ForSequenceClassification", "Phi3ForTokenClassification",
        "", "Phi3Model"},
       R"({"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":32064,"max_position_embeddings":4096,
           "original_max_position_embeddings":4096,"rms_norm_eps":1e-5,"rope_theta":10000.0,
           "rope_scaling":null,"hidden_act":"silu","sliding_window":2047,
           "tie_word_embeddings":false,"pad_token_id":32000,"bos_token_id":1,
           "eos_token_id":32000})"_json},
      // stabilityai/stablelm-3b-4e1t
      {Fam::kStableLm, "stablelm",
       {"StableLmForCausalLM", "StableLmForSequenceClassification",
        "StableLmForTokenClassification",
        "", "StableLmModel"},
       R"({"model_type":"stablelm","hidden_size":2560,"intermediate_size":6912,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":50304,"max_position_embeddings":4096,"layer_norm_eps":1e-5,
           "rope_theta":10000,"partial_rotary_factor":0.25,"hidden_act":"silu",
           "use_qkv_bias":false,"tie_word_embeddings":false,"bos_token_id":0,
           "eos_token_id":0})"_json},
      // bigcode/starcoder2-3b
      {Fam::kStarcoder2, "starcoder2",
       {"Starcoder2ForCausalLM", "Starcoder2ForSequenceClassification",
        "Starcoder2ForTokenClassification",
        "", "Starcoder2Model"},
       R"({"model_type":"starcoder2","hidden_size":3072,"intermediate_size":12288,
           "num_attention_heads":24,"num_key_value_heads":2,"num_hidden_layers":30,
           "vocab_size":49152,"max_position_embeddings":16384,"norm_epsilon":1e-5,
           "rope_theta":999999.4420358813,"hidden_act":"gelu_pytorch_tanh","use_bias":true,
           "sliding_window":4096,"tie_word_embeddings":true,"bos_token_id":0,
           "eos_token_id":0})"_json},
      // openai-community/gpt2
      {Fam::kGpt2, "gpt2",
       {"GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT2ForTokenClassification",
        "GPT2ForQuestionAnswering", "GPT2Model"},
       R"({"model_type":"gpt2","n_embd":768,"n_head":12,"n_layer":12,"n_positions":1024,
           "n_ctx":1024,"vocab_size":50257,"activation_function":"gelu_new",
           "layer_norm_epsilon":1e-5,"initializer_range":0.02,"bos_token_id":50256,
           "eos_token_id":50256})"_json},
      // bigcode/gpt_bigcode-santacoder
      {Fam::kBigCode, "gpt_bigcode",
       {"GPTBigCodeForCausalLM", "GPTBigCodeForSequenceClassification",
        "GPTBigCodeForTokenClassification",
        "", "GPTBigCodeModel"},
       R"({"model_type":"gpt_bigcode","n_embd":2048,"n_head":16,"n_inner":8192,"n_layer":24,
           "n_positions":2048,"vocab_size":49280,"activation_function":"gelu_pytorch_tanh",
           "multi_query":true,"layer_norm_epsilon":1e-5,"bos_token_id":49152,
           "eos_token_id":49152})"_json},
      // EleutherAI/pythia-410m
      {Fam::kNeoX, "gpt_neox",
       {"GPTNeoXForCausalLM", "GPTNeoXForSequenceClassification", "GPTNeoXForTokenClassification",
        "GPTNeoXForQuestionAnswering", "GPTNeoXModel"},
       R"({"model_type":"gpt_neox","hidden_size":1024,"intermediate_size":4096,
           "num_attention_heads":16,"num_hidden_layers":24,"vocab_size":50304,
           "max_position_embeddings":2048,"layer_norm_eps":1e-5,"rotary_pct":0.25,
           "rotary_emb_base":10000,"hidden_act":"gelu","use_parallel_residual":true,
           "tie_word_embeddings":false,"bos_token_id":0,"eos_token_id":0})"_json},
      // mistralai/Mixtral-8x7B-v0.1
      {Fam::kMixtral, "mixtral",
       {"MixtralForCausalLM", "MixtralForSequenceClassification", "MixtralForTokenClassification",
        "MixtralForQuestionAnswering", "MixtralModel"},
       R"({"model_type":"mixtral","hidden_size":4096,"intermediate_size":14336,
           "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
           "rope_theta":1000000.0,"hidden_act":"silu","num_local_experts":8,
           "num_experts_per_tok":2,"sliding_window":null,"tie_word_embeddings":false,
           "bos_token_id":1,"eos_token_id":2})"_json},
      // Qwen/Qwen1.5-MoE-A2.7B
      {Fam::kQwen2Moe, "qwen2_moe",
       {"Qwen2MoeForCausalLM", "Qwen2MoeForSequenceClassification", "Qwen2MoeForTokenClassification",
        "Qwen2MoeForQuestionAnswering", "Qwen2MoeModel"},
       R"({"model_type":"qwen2_moe","hidden_size":2048,"intermediate_size":5632,
           "num_attention_heads":16,"num_key_value_heads":16,"num_hidden_layers":24,
           "vocab_size":151936,"max_position_embeddings":8192,"rms_norm_eps":1e-6,
           "rope_theta":1000000.0,"hidden_act":"silu","use_sliding_window":false,
           "sliding_window":32768,"max_window_layers":21,"decoder_sparse_step":1,
           "moe_intermediate_size":1408,"shared_expert_intermediate_size":5632,
           "num_experts_per_tok":4,"num_experts":60,"norm_topk_prob":false,
           "tie_word_embeddings":false,"bos_token_id":151643,"eos_token_id":151643})"_json},
      // Llama, Mistral and Qwen2: their CausalLM and SequenceClassification heads are decoder.cc's.
      // meta-llama/Llama-2-7b-hf
      {Fam::kLlama, "llama",
       {"", "", "LlamaForTokenClassification", "LlamaForQuestionAnswering", "LlamaModel"},
       R"({"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"hidden_act":"silu","attention_bias":false,
           "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})"_json},
      // mistralai/Mistral-7B-v0.1
      {Fam::kMistral, "mistral",
       {"", "", "MistralForTokenClassification", "MistralForQuestionAnswering", "MistralModel"},
       R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
           "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
           "vocab_size":32000,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"sliding_window":4096,"hidden_act":"silu",
           "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})"_json},
      // Qwen/Qwen2-7B
      {Fam::kQwen2, "qwen2",
       {"", "", "Qwen2ForTokenClassification", "Qwen2ForQuestionAnswering", "Qwen2Model"},
       R"({"model_type":"qwen2","hidden_size":3584,"intermediate_size":18944,
           "num_attention_heads":28,"num_key_value_heads":4,"num_hidden_layers":28,
           "vocab_size":152064,"max_position_embeddings":32768,"rms_norm_eps":1e-6,
           "rope_theta":1000000.0,"use_sliding_window":false,"sliding_window":131072,
           "max_window_layers":28,"hidden_act":"silu","tie_word_embeddings":false,
           "bos_token_id":151643,"eos_token_id":151643})"_json},
  };
}

}  // namespace

std::vector<ArchEntry> DecoderZooArchs() {
  std::vector<ArchEntry> out;
  for (const FamilyEntry& e : Families()) {
    const Fam fam = e.fam;
    auto scale = [fam](const nlohmann::json& c) { return ScaleFamily(c, fam); };
    const std::tuple<Head, const char*, const char*> heads[] = {
        {Head::kCausalLM, e.heads.causal_lm, "text-generation"},
        {Head::kSequenceClassification, e.heads.seq_cls, "text-classification"},
        {Head::kTokenClassification, e.heads.token_cls, "token-classification"},
        {Head::kQuestionAnswering, e.heads.qa, "question-answering"},
        {Head::kBase, e.heads.base, "feature-extraction"}};
    for (const auto& [head, name, task] : heads) {
      const std::string arch = name;
      if (arch.empty()) continue;
      nlohmann::json cfg = e.example;
      cfg["architectures"] = {arch};
      if (head == Head::kSequenceClassification || head == Head::kTokenClassification)
        cfg["num_labels"] = 2;
      out.push_back({{arch, e.model_type, task}, cfg,
                     scale, [fam, head](ModelSpec spec) {
                       return BuildFamily(std::move(spec), fam, head);
                     }});
    }
  }
  return out;
}

}  // namespace ts::zoo::internal
