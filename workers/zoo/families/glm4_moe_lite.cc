// glm4_moe_lite (modular_glm4_moe_lite.py): DeepseekV3Attention (MLA; q_a_layernorm eps 1e-6)
// with glm4_moe's MoE; the dense layers by mlp_layer_types (default: one dense layer first).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily Glm4MoeLite() {
  const DeepseekMoeSpec d{.experts = 64,
                          .top_k = 4,
                          .inter = 1536,
                          .shared = 1,
                          .scaling = 1.8,
                          .n_group = 1,
                          .topk_group = 1,
                          .norm_topk = true,
                          .dense_field = "",
                          .dense = 1,
                          .layer_types_field = true};
  return {
      .model_type = "glm4_moe_lite",
      // head_dim: MLA's width is not hidden / heads (2048 / 20); ReadMla sets the rope width.
      .defaults = {.max_pos = 202752, .eps = 1e-5, .head_dim = 64},
      .llama_biases = false,
      .classic = true,
      .parse = MlaParse(
          {.q_lora = 768, .kv_lora = 512, .nope = 192, .rope = 64, .v = 256, .ln_eps = 1e-6},
          /*reads_interleave=*/true, /*reads_mlp_bias=*/false),
      .parse_layers = DeepseekMoeParse(d),
      .scale_extra = DeepseekMoeScale(d),
      .aliases = {{"num_local_experts", "n_routed_experts"}},
      .classes = {"Glm4MoeLiteForCausalLM", "", "", "", "Glm4MoeLiteModel"},
      // Glm4MoeLiteConfig's defaults (zai-org/GLM-4.7-Flash)
      .example = R"({"model_type":"glm4_moe_lite","vocab_size":154880,"hidden_size":2048,
           "intermediate_size":10240,"moe_intermediate_size":1536,"num_hidden_layers":47,
           "num_attention_heads":20,"num_key_value_heads":20,"n_shared_experts":1,
           "n_routed_experts":64,"num_experts_per_tok":4,"routed_scaling_factor":1.8,
           "n_group":1,"topk_group":1,"norm_topk_prob":true,"q_lora_rank":768,
           "kv_lora_rank":512,"qk_nope_head_dim":192,"qk_rope_head_dim":64,"v_head_dim":256,
           "rope_interleave":true,"attention_bias":false,"hidden_act":"silu",
           "max_position_embeddings":202752,"rms_norm_eps":1e-5,"rope_theta":1000000,
           "tie_word_embeddings":false,"bos_token_id":0,"eos_token_id":1})",
  };
}

TS_ZOO_DECODER_FAMILY(Glm4MoeLite);

}  // namespace ts::zoo::internal::decoder
