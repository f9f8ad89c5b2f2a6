// olmoe (modular_olmoe.py): llama's pre-norm block with the OLMo attention (q/k RMSNorm over the
// whole projection before the rotary; `clip_qkv` clamps q, k and v after the q/k norms) and the
// Qwen MoE router (Qwen2MoeTopKRouter: softmax over every expert, top-k, renormalised only when
// norm_topk_prob, default false) on transformers 5's fused experts (MixtralExperts), on every
// layer; the expert width is intermediate_size (no moe_intermediate_size field). Its experts are
// flex_olmo's too (OlmoeExperts, decoder_lineages.h).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

ParseFn OlmoeExperts(int64_t experts, int64_t top_k) {
  return [experts, top_k](const ConfigReader& r, const json& config, Recipe& c) {
    return ReadQwenMoe(
        r, config, {.experts = experts, .top_k = top_k, .inter = c.inter, .inter_field = ""}, c);
  };
}

void ScaleOlmoeExperts(const json&, const Recipe& rc, json& t) {
  ScaleExperts(rc, "num_experts", t);
}

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

TS_ZOO_DECODER_FAMILY(Olmoe);

}  // namespace ts::zoo::internal::decoder
