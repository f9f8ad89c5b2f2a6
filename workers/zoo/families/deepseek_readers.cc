// deepseek_v2 (modeling_deepseek_v2.py) and deepseek_v3 (modeling_deepseek_v3.py): llama's
// pre-norm layers with multi-head latent attention (trunks/decoder_mla.cc) and DeepSeek MoE
// layers from first_k_dense_replace on (dense gated MLPs of intermediate_size before): fused
// routed experts of moe_intermediate_size, n_shared_experts ungated shared experts
// (`mlp.shared_experts`), and the routers of decoder.h's Router (v2: softmax, greedy or
// group-limited greedy; v3: sigmoid with e_score_correction_bias, groups by their top-2 sum,
// renormalised when norm_topk_prob), both times routed_scaling_factor. The softmax scale is
// (nope + rope)^-0.5, times mscale^2 = (0.1 * mscale_all_dim * ln(factor) + 1)^2 when the RoPE
// is scaled and mscale_all_dim is set (transformers 5.17 applies it in both versions). HF's
// head_dim is qk_rope_head_dim: the rotary's width. Fields transformers ignores (moe_layer_freq,
// scoring_func, v3's topk_method, aux-loss fields) are not read.
//
// This file holds the lineage's readers (declared in decoder_lineages.h); deepseek_v2.cc,
// deepseek_v3.cc and the families derived from them (glm4_moe, glm4_moe_lite, dots1, solar_open,
// exaone_moe, minimax_m2, ernie4_5_moe, youtu) use them.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

Status ReadMla(const ConfigReader& r, const json& config, const MlaSpec& d, Recipe& c) {
  Mla& m = c.mla;
  // q_lora_rank: absent -> the config class's 1536; null -> no LoRA (q_proj).
  m.q_lora = 0;
  if (!config.contains("q_lora_rank")) {
    m.q_lora = d.q_lora;
  } else if (!r.IsNull("q_lora_rank")) {
    TS_ASSIGN_OR_RETURN(m.q_lora, r.Int("q_lora_rank"));
    TS_RETURN_IF_ERROR(Positive(r, "q_lora_rank", m.q_lora));
  }
  TS_ASSIGN_OR_RETURN(m.kv_lora, r.Int("kv_lora_rank", d.kv_lora));
  TS_RETURN_IF_ERROR(Positive(r, "kv_lora_rank", m.kv_lora));
  TS_ASSIGN_OR_RETURN(m.nope, r.Int("qk_nope_head_dim", d.nope));
  TS_RETURN_IF_ERROR(Positive(r, "qk_nope_head_dim", m.nope));
  TS_ASSIGN_OR_RETURN(m.rope, r.Int("qk_rope_head_dim", d.rope));
  TS_RETURN_IF_ERROR(Positive(r, "qk_rope_head_dim", m.rope));
  if (m.rope % 2 != 0) return r.Error("qk_rope_head_dim", "must be even");
  TS_ASSIGN_OR_RETURN(m.v, r.Int("v_head_dim", d.v));
  TS_RETURN_IF_ERROR(Positive(r, "v_head_dim", m.v));
  m.ln_eps = d.ln_eps > 0 ? d.ln_eps : c.eps;
  if (c.kv != c.heads) {
    return r.Error("num_key_value_heads",
                   "must equal num_attention_heads (MLA's keys and values "
                   "have one head per query head)");
  }
  c.head_dim = m.rope;  // DeepseekV*Config: head_dim = qk_rope_head_dim (the rotary's width)
  c.rotary_dim = m.rope;
  c.partial_rotary = 1.0;
  TS_ASSIGN_OR_RETURN(bool bias, r.Bool("attention_bias", false));
  c.q_bias = c.k_bias = c.v_bias = false;
  c.o_bias = bias;
  // The softmax scale, with YaRN's mscale_all_dim.
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(m.nope + m.rope));
  if (const std::optional<RopeParamsRef> ref = FindRopeParams(config)) {
    const json& p = RopeParams(config, *ref);
    const std::string kind = p.value("rope_type", p.value("type", std::string("default")));
    const bool has_all_dim = p.contains("mscale_all_dim") && p["mscale_all_dim"].is_number();
    const double all_dim = has_all_dim ? p["mscale_all_dim"].get<double>() : 0.0;
    if (kind != "default" && all_dim != 0.0) {
      if (!p.contains("factor") || !p["factor"].is_number())
        return r.Error(ref->Prefix() + "factor", "missing");
      const double factor = p["factor"].get<double>();
      const double mscale = factor <= 1.0 ? 1.0 : 0.1 * all_dim * std::log(factor) + 1.0;
      c.attn_scale *= mscale * mscale;
    }
  }
  return OkStatus();
}

}  // namespace

Status ReadDeepseekMoe(const ConfigReader& r, const json& config, const DeepseekMoeSpec& d,
                       Recipe& c) {
  Moe& m = c.moe;
  m.router = d.sigmoid ? Router::kDeepseekV3 : Router::kDeepseekV2;
  m.deepseek_shared = true;
  auto required = [&](const std::string& f, int64_t def, int64_t& out) -> Status {
    if (def < 0 && !r.Has(f)) return r.Error(f, "missing (the config class has no default)");
    TS_ASSIGN_OR_RETURN(out, r.Int(f, def));
    return OkStatus();
  };
  TS_RETURN_IF_ERROR(required(d.experts_field, d.experts, m.experts));
  TS_RETURN_IF_ERROR(Positive(r, d.experts_field, m.experts));
  TS_RETURN_IF_ERROR(required("num_experts_per_tok", d.top_k, m.top_k));
  m.inter = c.inter;
  if (!d.inter_field.empty()) {
    TS_ASSIGN_OR_RETURN(m.inter, r.Int(d.inter_field, d.inter));
    TS_RETURN_IF_ERROR(Positive(r, d.inter_field, m.inter));
  }
  int64_t shared = 0;
  if (!d.shared_field.empty() && !r.IsNull(d.shared_field)) {
    TS_RETURN_IF_ERROR(required(d.shared_field, d.shared, shared));
    if (shared < 0) return r.Error(d.shared_field, "must not be negative");
  }
  m.shared_inter = shared * m.inter;
  TS_ASSIGN_OR_RETURN(m.routed_scaling, r.Double("routed_scaling_factor", d.scaling));
  m.n_group = m.topk_group = 1;
  if (!r.IsNull("n_group")) {
    TS_ASSIGN_OR_RETURN(m.n_group, r.Int("n_group", d.n_group));
  }
  if (!r.IsNull("topk_group")) {
    TS_ASSIGN_OR_RETURN(m.topk_group, r.Int("topk_group", d.topk_group));
  }
  TS_RETURN_IF_ERROR(Positive(r, "n_group", m.n_group));
  TS_RETURN_IF_ERROR(Positive(r, "topk_group", m.topk_group));
  if (m.experts % m.n_group != 0) return r.Error("n_group", "must divide the routed experts");
  if (m.topk_group > m.n_group) return r.Error("topk_group", "must not exceed n_group");
  if (d.sigmoid) {
    TS_ASSIGN_OR_RETURN(m.norm_topk, r.Bool("norm_topk_prob", d.norm_topk));
    if (m.n_group > 1 && m.experts / m.n_group < 2) {
      return r.Error("n_group",
                     "leaves fewer than two experts per group (groups are scored by "
                     "their top two)");
    }
  } else {
    // DeepseekV2Moe ignores norm_topk_prob.
    TS_ASSIGN_OR_RETURN(std::string method, r.String("topk_method", "greedy"));
    if (method != "greedy" && method != "group_limited_greedy")
      return r.Error("topk_method", "unknown '" + method + "'");
    m.group_limited = method == "group_limited_greedy";
  }
  TS_RETURN_IF_ERROR(CheckExperts(r, c));
  const bool grouped = d.sigmoid ? m.n_group > 1 : m.group_limited && m.n_group > 1;
  if (grouped && m.top_k > m.topk_group * (m.experts / m.n_group)) {
    return r.Error("num_experts_per_tok", "exceeds the experts of the topk_group groups kept");
  }
  m.sparse.assign(static_cast<size_t>(c.layers), true);
  if (d.layer_types_field && r.Has("mlp_layer_types")) {
    const json& types = config["mlp_layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.layers)
      return r.Error("mlp_layer_types", "expected one entry per layer");
    for (int64_t i = 0; i < c.layers; ++i) {
      const json& t = types[static_cast<size_t>(i)];
      if (t != "dense" && t != "sparse")
        return r.Error("mlp_layer_types", "expected \"dense\" or \"sparse\"");
      m.sparse[static_cast<size_t>(i)] = t == "sparse";
    }
  } else {
    int64_t dense = d.dense;
    if (!d.dense_field.empty()) {
      TS_ASSIGN_OR_RETURN(dense, r.Int(d.dense_field, d.dense));
      if (dense < 0) return r.Error(d.dense_field, "must not be negative");
    }
    for (int64_t i = 0; i < c.layers && i < dense; ++i) m.sparse[static_cast<size_t>(i)] = false;
  }
  bool any_dense = false, any_sparse = false;
  for (bool sp : m.sparse) (sp ? any_sparse : any_dense) = true;
  m.pattern = any_dense && any_sparse;
  return OkStatus();
}

// Tiny fields: 4 experts (two groups of two when the real config groups them, so v3's top-2 group
// scores and v2's group-limited choice still bite), MLA widths 32 / 8, dense-first layers kept.
void ScaleDeepseekLike(const DeepseekMoeSpec& d, const json& real, const Recipe& rc, json& t) {
  if (rc.mla.kv_lora > 0) {
    if (rc.mla.q_lora > 0) t["q_lora_rank"] = 32;
    t["kv_lora_rank"] = 32;
    t["qk_nope_head_dim"] = 8;
    t["qk_rope_head_dim"] = 8;
    t["v_head_dim"] = 8;
  }
  if (rc.moe.experts == 0) return;
  ScaleExperts(rc, d.experts_field, t);
  const int64_t hidden = t["hidden_size"].get<int64_t>();
  if (!d.inter_field.empty()) t[d.inter_field] = ScaleRatio(rc.moe.inter, rc.hidden, hidden, 8);
  const int64_t layers = t["num_hidden_layers"].get<int64_t>();
  if (d.layer_types_field && real.contains("mlp_layer_types")) {
    json types = json::array();
    for (int64_t i = 0; i < layers; ++i)
      types.push_back(i == 0 && rc.moe.pattern ? "dense" : "sparse");
    t["mlp_layer_types"] = types;
  } else if (!d.dense_field.empty() && real.contains(d.dense_field)) {
    t[d.dense_field] = std::min<int64_t>(real.value(d.dense_field, int64_t{0}), layers - 1);
  }
  if (rc.moe.n_group > 1) {
    t["n_group"] = 2;
    t["topk_group"] = 1;
    t["num_experts_per_tok"] = std::min<int64_t>(t["num_experts_per_tok"].get<int64_t>(), 2);
  }
}

// The MLA families' attention: the rotary over adjacent pairs unless the config class reads
// rope_interleave and it is false (the checkpoint's rope dims are already half-split).
ParseFn MlaParse(const MlaSpec& md, bool reads_interleave, bool reads_mlp_bias) {
  return [md, reads_interleave, reads_mlp_bias](const ConfigReader& r, const json& config,
                                                Recipe& c) -> Status {
    TS_RETURN_IF_ERROR(ReadClassicRotary(r, config, "", 1.0, false, c));
    TS_RETURN_IF_ERROR(ReadMla(r, config, md, c));
    c.interleaved = true;  // adjacent pairs (see trunks/decoder_mla.cc)
    if (reads_interleave) {
      TS_ASSIGN_OR_RETURN(c.interleaved, r.Bool("rope_interleave", true));
    }
    if (reads_mlp_bias) {
      TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
    }
    return OkStatus();
  };
}

ParseFn DeepseekMoeParse(const DeepseekMoeSpec& d) {
  return [d](const ConfigReader& r, const json& config, Recipe& c) {
    return ReadDeepseekMoe(r, config, d, c);
  };
}

ScaleFn DeepseekMoeScale(const DeepseekMoeSpec& d) {
  return [d](const json& real, const Recipe& rc, json& t) { ScaleDeepseekLike(d, real, rc, t); };
}

// `rope_theta` defaulted to the config class's value, then the classic rotary.
Status RotaryWithTheta(const ConfigReader& r, const json& config, double theta,
                       const std::string& partial_field, double partial, Recipe& c) {
  json rc = config;
  if (!r.Has("rope_theta")) rc["rope_theta"] = theta;
  return ReadClassicRotary(r, rc, partial_field, partial, false, c);
}

}  // namespace ts::zoo::internal::decoder
