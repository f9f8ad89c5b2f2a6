// olmoe (modular_olmoe.py) and flex_olmo (modular_flex_olmo.py): the OLMo attention (q/k
// RMSNorm over the whole projection before the rotary) with the Qwen MoE router
// (Qwen2MoeTopKRouter: softmax over every expert, top-k, renormalised only when
// norm_topk_prob, default false) and transformers 5's fused experts (MixtralExperts), on every
// layer; the expert width is intermediate_size (no moe_intermediate_size field).
//   olmoe: llama's pre-norm block; `clip_qkv` clamps q, k and v after the q/k norms.
//   flex_olmo: olmo2's post-norm block (families/olmo2.cc), rope_theta 500000, eps 1e-6.
#include "workers/zoo/families/decoder_families.h"

namespace ts::zoo::internal::decoder {
namespace {

ParseFn OlmoeExperts(int64_t experts, int64_t top_k) {
  return [experts, top_k](const ConfigReader& r, const json& config, Recipe& c) {
    return ReadQwenMoe(
        r, config, {.experts = experts, .top_k = top_k, .inter = c.inter, .inter_field = ""}, c);
  };
}

void ScaleOlmoeExperts(const json&, const Recipe& rc, json& t) {
  ScaleExperts(rc, "num_experts", t);
}

}  // namespace

DecoderFamily Olmoe() {
  return {
      .model_type = "olmoe",
      .defaults = {.max_pos = 4096, .eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadOlmo2Attention(r, config, c));
        if (r.Has("clip_qkv")) {  // null: no clipping
          TS_ASSIGN_OR_RETURN(c.clip_qkv, r.Double("clip_qkv"));
          if (!(c.clip_qkv > 0)) return r.Error("clip_qkv", "must be positive");
        }
        return OkStatus();
      },
      .parse_layers = OlmoeExperts(64, 8),
      .scale_extra = ScaleOlmoeExperts,
      .aliases = {{"num_local_experts", "num_experts"}},
      .classes = {"OlmoeForCausalLM", "", "", "", "OlmoeModel"},
      // allenai/OLMoE-1B-7B-0924
      .example = R"({"model_type":"olmoe","hidden_size":2048,"intermediate_size":1024,
           "num_attention_heads":16,"num_key_value_heads":16,"num_hidden_layers":16,
           "vocab_size":50304,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
           "rope_theta":10000.0,"hidden_act":"silu","attention_bias":false,"clip_qkv":null,
           "num_experts":64,"num_experts_per_tok":8,"norm_topk_prob":false,
           "router_aux_loss_coef":0.01,"tie_word_embeddings":false,"pad_token_id":1,
           "eos_token_id":50279})",
  };
}

DecoderFamily FlexOlmo() {
  DecoderFamily f = Olmo2();
  f.model_type = "flex_olmo";
  f.defaults.eps = 1e-6;
  f.defaults.theta = 500000.0;
  f.defaults.max_pos = 4096;
  f.parse = [olmo2 = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    json rc = config;
    if (!r.Has("rope_theta")) rc["rope_theta"] = 500000.0;  // FlexOlmoConfig.default_theta
    return olmo2(r, rc, c);
  };
  f.parse_layers = OlmoeExperts(7, 5);
  f.scale_extra = ScaleOlmoeExperts;
  f.aliases = {{"num_local_experts", "num_experts"}};
  f.classes = {"FlexOlmoForCausalLM", "", "", "", "FlexOlmoModel"};
  // allenai/FlexOlmo-7x7B-1T
  f.example = R"({"model_type":"flex_olmo","hidden_size":4096,"intermediate_size":11008,
       "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
       "vocab_size":100352,"max_position_embeddings":4096,"rms_norm_eps":1e-6,
       "rope_theta":500000,"hidden_act":"silu","attention_bias":false,"num_experts":7,
       "num_experts_per_tok":5,"norm_topk_prob":false,"tie_word_embeddings":false,
       "pad_token_id":100277,"eos_token_id":100257})";
  return f;
}

}  // namespace ts::zoo::internal::decoder
