// glm4_moe (modular_glm4_moe.py): llama attention with q/k/v bias from attention_bias (o_proj
// never), per-head q/k RMSNorm before the rotary when use_qk_norm, rotate_half over
// partial_rotary_factor (0.5) of the head; DeepSeek-V3 MoE from first_k_dense_replace (1).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily Glm4Moe() {
  const DeepseekMoeSpec d{.experts = 128,
                          .top_k = 8,
                          .inter = 1408,
                          .shared = 1,
                          .scaling = 1.0,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = true,
                          .dense = 1};
  return {
      .model_type = "glm4_moe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RotaryWithTheta(r, config, 10000.0, "partial_rotary_factor", 0.5, c));
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = bias;
        c.o_bias = false;
        TS_ASSIGN_OR_RETURN(bool qk, r.Bool("use_qk_norm", false));
        if (qk) c.qk_norm = QkNorm::kPerHeadRms;
        return OkStatus();
      },
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"Glm4MoeForCausalLM", "", "", "", "Glm4MoeModel"},
      // zai-org/GLM-4.5-Air
      .example = R"({"model_type":"glm4_moe","vocab_size":151552,"hidden_size":4096,
           "intermediate_size":10944,"moe_intermediate_size":1408,"num_hidden_layers":46,
           "num_attention_heads":96,"num_key_value_heads":8,"head_dim":128,
           "partial_rotary_factor":0.5,"attention_bias":true,"use_qk_norm":false,
           "n_routed_experts":128,"num_experts_per_tok":8,"n_shared_experts":1,
           "first_k_dense_replace":1,"n_group":1,"topk_group":1,"routed_scaling_factor":1.0,
           "norm_topk_prob":true,"num_nextn_predict_layers":1,"hidden_act":"silu",
           "max_position_embeddings":131072,"rms_norm_eps":1e-5,"rope_theta":1000000,
           "tie_word_embeddings":false,"pad_token_id":151329,
           "eos_token_id":[151329,151336,151338]})",
  };
}

TS_ZOO_DECODER_FAMILY(Glm4Moe);

}  // namespace ts::zoo::internal::decoder
