// hunyuan_v1_dense (modular_hunyuan_v1_dense.py): llama's layers (bias-free gated MLP,
// attention_bias on q / k / v / o) with HunYuanDenseV1Attention's per-head RMSNorm on q and k
// after the rotary (`self_attn.query_layernorm` / `key_layernorm`, rms_norm_eps), and
// HunYuanDenseV1RotaryEmbedding's NTK-alpha rotary: a dynamic RoPE with an `alpha` runs at base
// rope_theta * alpha^(head_dim / (head_dim - 2)) with attention scaling 1 (transformers' dynamic
// update, which ignores alpha, only starts past max_position_embeddings, which the tiny config
// keeps above the run's length).
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// The `alpha` of a dynamic RoPE dict, if any.
std::optional<double> RopeAlpha(const json& config) {
  const std::optional<RopeParamsRef> ref = FindRopeParams(config);
  if (!ref) return std::nullopt;
  const json& p = RopeParams(config, *ref);
  const std::string kind = p.value("rope_type", p.value("type", std::string("default")));
  if (kind != "dynamic" || !p.contains("alpha") || !p["alpha"].is_number()) return std::nullopt;
  return p["alpha"].get<double>();
}

}  // namespace

DecoderFamily HunYuanDenseV1() {
  return {
      .model_type = "hunyuan_v1_dense",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-5, .tie = false},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        c.qk_norm = QkNorm::kPerHeadRms;
        c.qk_norm_after_rope = true;
        c.n.qn = "query_layernorm";
        c.n.kn = "key_layernorm";
        if (const std::optional<double> alpha = RopeAlpha(config)) {
          if (!(*alpha > 0)) return r.Error("rope_scaling.alpha", "must be positive");
          const double d = static_cast<double>(c.head_dim);
          c.rope.kind = RopeKind::kDefault;
          c.rope.theta = c.rope.theta * std::pow(*alpha, d / (d - 2.0));
          c.rope.attention_factor = 1.0;
          c.rope_local = c.rope;
        }
        return OkStatus();
      },
      .scale_extra =
          [](const json& real, const Recipe&, json& t) {
            if (RopeAlpha(real)) t["max_position_embeddings"] = TinyProfile::kMaxPositions;
          },
      .classes = {"HunYuanDenseV1ForCausalLM", "HunYuanDenseV1ForSequenceClassification", "", "",
                  "HunYuanDenseV1Model"},
      // tencent/Hunyuan-7B-Instruct
      .example = R"({"model_type":"hunyuan_v1_dense","hidden_size":4096,"intermediate_size":14336,
         "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"num_hidden_layers":32,
         "vocab_size":128167,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
         "rope_theta":10000.0,"rope_scaling":{"alpha":1000.0,"beta_fast":32,"beta_slow":1,
         "factor":1.0,"mscale":1.0,"mscale_all_dim":1.0,"type":"dynamic"},"hidden_act":"silu",
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,"pad_token_id":127961,
         "bos_token_id":1,"eos_token_id":127960})",
  };
}

TS_ZOO_DECODER_FAMILY(HunYuanDenseV1);

}  // namespace ts::zoo::internal::decoder
